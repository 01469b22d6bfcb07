// Runs of a loaded session: several threads calling run() on one session at once get the
// outputs of a lone run; a tensor only the run reveals to be too large is an error of its node,
// never an abort.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "importer/onnx/onnx_exporter.h"
#include "passes/graph_builder.h"
#include "peregrine/session.h"

namespace peregrine {
namespace {

std::unique_ptr<Session> load_graph(ir::Graph g, int threads) {
  ir::Model model;
  model.ir_version = 8;
  model.graph = std::move(g);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("peregrine_runs_test_" + std::to_string(::getpid()) + ".onnx"))
                               .string();
  Status st = save_onnx_model(model, path, /*overwrite=*/true);
  EXPECT_TRUE(st.is_ok()) << st.message();
  SessionOptions options;
  options.num_threads = threads;
  auto s = Session::load(path, options);
  std::filesystem::remove(path);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return s.is_ok() ? std::move(s).value() : nullptr;
}

// Conv -> Relu -> Conv (+ residual) -> MatMul: planned intermediates, packed weights, a
// threaded conv.
ir::Graph small_cnn() {
  testing::GraphBuilder b;
  std::string x = b.input("x", {1, 8, 12, 12});
  std::string w1 = b.random("W1", {16, 8, 3, 3}, 2);
  std::string w2 = b.random("W2", {8, 16, 3, 3}, 3);
  std::string m = b.random("M", {12, 5}, 4);
  ir::Node& c1 = b.node("Conv", {x, w1});
  c1.attributes["pads"] = passes::ints_attr("pads", {1, 1, 1, 1});
  std::string h = b.op("Relu", {c1.outputs[0]});
  ir::Node& c2 = b.node("Conv", {h, w2});
  c2.attributes["pads"] = passes::ints_attr("pads", {1, 1, 1, 1});
  std::string r = b.op("Add", {c2.outputs[0], x});
  b.output(b.op("MatMul", {r, m}));
  return b.build();
}

TEST(SessionRuns, ConcurrentRunsOnOneSessionMatchLoneRuns) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE("session threads=" + std::to_string(threads));
    auto session = load_graph(small_cnn(), threads);
    ASSERT_TRUE(session);
    constexpr int kCallers = 4, kRunsPerCaller = 15;
    std::vector<Tensor> inputs, want;
    for (int c = 0; c < kCallers; ++c) {
      inputs.push_back(testing::random_tensor({1, 8, 12, 12}, 10 + c));
      auto out = session->run({{"x", inputs.back()}});
      ASSERT_TRUE(out.is_ok()) << out.status().message();
      want.push_back(out->begin()->second.clone());
    }
    std::vector<int> mismatches(kCallers, 0), failures(kCallers, 0);
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c)
      callers.emplace_back([&, c] {
        for (int r = 0; r < kRunsPerCaller; ++r) {
          auto out = session->run({{"x", inputs[static_cast<size_t>(c)]}});
          if (!out.is_ok()) {
            ++failures[static_cast<size_t>(c)];
            continue;
          }
          const Tensor& got = out->begin()->second;
          const Tensor& w = want[static_cast<size_t>(c)];
          if (got.shape() != w.shape() ||
              std::memcmp(got.raw(), w.raw(), static_cast<size_t>(w.nbytes())) != 0)
            ++mismatches[static_cast<size_t>(c)];
        }
      });
    for (auto& t : callers) t.join();
    for (int c = 0; c < kCallers; ++c) {
      EXPECT_EQ(failures[static_cast<size_t>(c)], 0) << "caller " << c;
      EXPECT_EQ(mismatches[static_cast<size_t>(c)], 0) << "caller " << c;
    }
  }
}

// ConstantOfShape to a shape computed at run time, past the tensor limit: the run fails with
// the node named and a bad-model code (exit 2), and the session still runs afterwards.
TEST(SessionRuns, RunTimeTensorPastTheLimitIsTheNodesError) {
  testing::GraphBuilder b;
  std::string n = b.input("n", {1}, DType::kInt64);
  std::string big = b.ints("big", {int64_t{1} << 40});
  std::string shape = b.op("Add", {n, big});
  ir::Node& fill = b.node("ConstantOfShape", {shape}, {"z"});
  fill.name = "fill_huge";
  b.output("z");
  auto session = load_graph(b.build(), 1);
  ASSERT_TRUE(session);
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto out = session->run({{"n", Tensor::from_vector<int64_t>({3}, {1})}});
    ASSERT_FALSE(out.is_ok());
    EXPECT_EQ(out.status().exit_code(), 2) << out.status().message();
    EXPECT_NE(out.status().message().find("fill_huge"), std::string::npos)
        << out.status().message();
  }
}

}  // namespace
}  // namespace peregrine
