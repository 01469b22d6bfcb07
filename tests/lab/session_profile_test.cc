// profile_session on a small compiled model: every top-level node profiled once per timed run,
// costs from the op cost model, latencies and trace events for each profiled run.
#include "profiler/session_profile.h"

#include <gtest/gtest.h>

#include "passes/graph_builder.h"
#include "peregrine/session.h"
#include "runtime/session_internals.h"

namespace peregrine::profiler {
namespace {

// y = Relu(x W + B): x (4, 32), W (32, 16).
std::unique_ptr<Session> linear_session() {
  testing::GraphBuilder b;
  std::string x = b.input("x", {4, 32});
  std::string w = b.constant("W", testing::random_tensor({32, 16}, 1));
  std::string bias = b.constant("B", testing::random_tensor({16}, 2));
  std::string y = b.op("MatMul", {x, w});
  b.output(b.op("Relu", {b.op("Add", {y, bias})}));
  ir::Model m;
  m.ir_version = 8;
  m.graph = b.build();
  auto s = session_from_model(std::move(m), SessionOptions{});
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return s.is_ok() ? std::move(s).value() : nullptr;
}

TEST(SessionProfile, ProfilesEveryNodeOfEveryTimedRun) {
  std::unique_ptr<Session> session = linear_session();
  ASSERT_NE(session, nullptr);
  std::map<std::string, RuntimeValue> inputs;
  inputs["x"] = RuntimeValue::of(testing::random_tensor({4, 32}, 4));
  const Roofs roofs{100.0, 10.0};
  constexpr int kIterations = 3;
  auto p = profile_session(*session, inputs, kIterations, {roofs, {}, {}}, 2);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  const ProfileReport& r = p->report;
  ASSERT_FALSE(r.nodes.empty());
  EXPECT_EQ(r.iterations, kIterations);
  EXPECT_EQ(p->timed_ms.size(), static_cast<size_t>(kIterations));
  EXPECT_EQ(p->run_spans.size(), static_cast<size_t>(kIterations));
  EXPECT_EQ(p->node_spans.size(), r.nodes.size() * kIterations);
  EXPECT_GT(r.latency_median_ms, 0.0);
  EXPECT_GT(r.latency_untimed_median_ms, 0.0);
  EXPECT_LE(r.bottlenecks.size(), 2u);
  double matmul_flops = 0;
  for (const NodeProfile& n : r.nodes) {
    EXPECT_EQ(p->node_samples_us[n.index].size(), static_cast<size_t>(kIterations)) << n.name;
    EXPECT_FALSE(n.kernel.empty()) << n.name;
    EXPECT_TRUE(n.cost_known) << n.name;
    if (n.op_type.find("MatMul") != std::string::npos ||
        n.op_type.find("Gemm") != std::string::npos)
      matmul_flops = n.roof.flops;
  }
  EXPECT_GE(matmul_flops, 2.0 * 4 * 32 * 16);  // the product (fused or not)
  const Trace trace = session_trace(*p, "test", {{"k", "1"}});
  EXPECT_EQ(trace.events.size(), static_cast<size_t>(kIterations) + p->node_spans.size());
  ASSERT_EQ(trace.metadata.size(), 1u);
}

}  // namespace
}  // namespace peregrine::profiler
