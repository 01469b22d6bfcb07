// Post-training quantization (src/quantization/): the range rules, which nodes the plan takes
// and leaves, the QDQ structure insert_qdq writes, and its numerics against the float graph.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/reference/evaluate.h"
#include "graph_builder.h"
#include "quantization/calibration.h"
#include "quantization/insert_qdq.h"

namespace peregrine::testing {
namespace {

using quantization::Range;

TEST(QuantizationRanges, PercentileDropsTheTails) {
  // 1000 values spread over 100 bins of [0, 100), plus one outlier in the top bin.
  std::vector<double> bins(100, 10.0);
  bins[0] = 10;
  bins[99] = 1;
  for (int k = 90; k < 99; ++k) bins[k] = 0;
  const Range all = quantization::percentile_range(bins, 0, 100, 100.0);
  EXPECT_FLOAT_EQ(all.min, 0);
  EXPECT_FLOAT_EQ(all.max, 100);
  // 891 values: at 99.9% the tail is 0.89 values, less than the outlier, so nothing goes; at
  // 99.8% (1.78 values) the outlier goes, and the empty bins below it.
  EXPECT_FLOAT_EQ(quantization::percentile_range(bins, 0, 100, 99.9).max, 100);
  const Range trimmed = quantization::percentile_range(bins, 0, 100, 99.8);
  EXPECT_FLOAT_EQ(trimmed.min, 0);
  EXPECT_FLOAT_EQ(trimmed.max, 90);
}

TEST(QuantizationRanges, EntropyClipsALongTailButNotASaturationSpike) {
  // |x| of a Laplace-like distribution: most mass near 0, a thin tail to the maximum.
  std::vector<double> bins(2048);
  for (int k = 0; k < 2048; ++k) bins[static_cast<size_t>(k)] = 1e6 * std::exp(-k / 40.0) + 1;
  const Range r = quantization::entropy_range(bins, 10.0f, /*never_negative=*/false);
  EXPECT_LT(r.max, 10.0f);
  EXPECT_GT(r.max, 0.5f);
  EXPECT_FLOAT_EQ(r.min, -r.max);
  const Range positive = quantization::entropy_range(bins, 10.0f, /*never_negative=*/true);
  EXPECT_FLOAT_EQ(positive.min, 0);
  // A ReLU6-like pile-up at the top keeps the whole range.
  bins.back() = 1e5;
  const Range saturated = quantization::entropy_range(bins, 6.0f, true);
  EXPECT_FLOAT_EQ(saturated.max, 6.0f);
}

// x -> Conv(w, b) -> Relu -> MatMul(m) -> Add(x2 branch) ; a Conv reading a run-time weight.
ir::Graph small_net() {
  GraphBuilder b(17);
  b.input("x", {1, 3, 8, 8});
  b.input("w_runtime", {4, 3, 3, 3});
  b.random("w", {4, 3, 3, 3}, 1);
  b.random("bias", {4}, 2);
  b.random("m", {8, 5}, 3);
  ir::Node& conv = b.node("Conv", {"x", "w", "bias"}, {"c"});
  conv.attributes["pads"] = ints_attr("pads", {1, 1, 1, 1});
  b.node("Relu", {"c"}, {"r"});
  b.node("MatMul", {"r", "m"}, {"y"});  // [1, 4, 8, 5]
  ir::Node& other = b.node("Conv", {"x", "w_runtime"}, {"c2"});
  other.attributes["pads"] = ints_attr("pads", {1, 1, 1, 1});
  b.node("Slice", {"c2", b.ints("starts", {0}), b.ints("ends", {5}), b.ints("axes", {3})}, {"s"});
  b.node("Add", {"y", "s"}, {"sum"});
  b.output("sum");
  return b.build();
}

TEST(QuantizationPlan, TakesConvMatMulAddAndSaysWhyNot) {
  ir::Graph g = small_net();
  auto plan = quantization::plan_quantization(g, {});
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  std::vector<std::string> ops;
  for (size_t i : plan->nodes) ops.push_back(g.nodes[i]->op_type);
  std::sort(ops.begin(), ops.end());
  EXPECT_EQ(ops, (std::vector<std::string>{"Add", "Conv", "MatMul"}));
  ASSERT_EQ(plan->skipped.size(), 1u);
  EXPECT_NE(plan->skipped[0].find("weight is not a float32 initializer"), std::string::npos);
  // The Relu that alone reads the conv is quantized after; the conv's own output is not.
  const auto& acts = plan->activations;
  EXPECT_NE(std::find(acts.begin(), acts.end(), "r"), acts.end());
  EXPECT_EQ(std::find(acts.begin(), acts.end(), "c"), acts.end());

  quantization::QuantizeOptions exclude;
  exclude.exclude = {"MatMul"};
  auto fewer = quantization::plan_quantization(g, exclude);
  ASSERT_TRUE(fewer.is_ok());
  EXPECT_EQ(fewer->nodes.size(), 2u);  // the Conv and the Add
  EXPECT_TRUE(std::any_of(fewer->skipped.begin(), fewer->skipped.end(), [](const std::string& s) {
    return s.find("(MatMul): excluded") != std::string::npos;
  }));
}

TEST(QuantizationPlan, RefusesOpsetsBelow13) {
  GraphBuilder b(11);
  b.input("x", {1, 4});
  b.random("m", {4, 2});
  b.node("MatMul", {"x", "m"}, {"y"});
  b.output("y");
  ir::Graph g = b.build();
  auto plan = quantization::plan_quantization(g, {});
  ASSERT_FALSE(plan.is_ok());
  EXPECT_NE(plan.status().message().find("opset 11"), std::string::npos);
}

TEST(QuantizationInsert, WritesQdqAndStaysCloseToFloat) {
  ir::Graph g = small_net();
  const std::vector<Tensor> reference = run_graph(g);
  auto plan = quantization::plan_quantization(g, {});
  ASSERT_TRUE(plan.is_ok());
  // Ranges from the float run's own values: generous bounds for every planned tensor.
  std::map<std::string, Range> ranges;
  for (const auto& t : plan->activations) ranges[t] = {-8.0f, 8.0f};
  ranges["x"] = {-1.0f, 1.0f};
  ranges["r"] = {0.0f, 8.0f};
  Status st = quantization::insert_qdq(g, *plan, ranges, {});
  ASSERT_TRUE(st.is_ok()) << st.message();
  ASSERT_TRUE(infer_graph_types(g, reference_evaluator()).is_ok());
  EXPECT_EQ(count_op(g, "QuantizeLinear"), static_cast<int>(plan->activations.size()));
  // Per activation a DQ, per weight and bias one more.
  EXPECT_EQ(count_op(g, "DequantizeLinear"), static_cast<int>(plan->activations.size()) + 3);
  EXPECT_EQ(g.find_value("w"), nullptr);  // the float weight left the graph
  ASSERT_NE(g.find_value("w_runtime"), nullptr);
  for (const auto& n : g.nodes) {
    if (n->op_type != "DequantizeLinear") continue;
    const Tensor* q = passes::constant_of(g, n->inputs[0]);
    if (!q) continue;
    if (q->dtype() == DType::kInt8) {  // a weight: per channel, zero points 0
      const ir::Attribute* axis = n->attribute("axis");
      ASSERT_NE(axis, nullptr);
      const Tensor* zp = passes::constant_of(g, n->inputs[2]);
      for (int64_t k = 0; k < zp->numel(); ++k) EXPECT_EQ(zp->data<int8_t>()[k], 0);
    } else {
      EXPECT_EQ(q->dtype(), DType::kInt32);  // the bias
    }
  }
  const std::vector<Tensor> quantized = run_graph(g);
  ASSERT_EQ(quantized.size(), reference.size());
  double dot = 0, na = 0, nb = 0;
  for (int64_t k = 0; k < reference[0].numel(); ++k) {
    const double a = reference[0].data<float>()[k], b = quantized[0].data<float>()[k];
    dot += a * b;
    na += a * a;
    nb += b * b;
  }
  EXPECT_GT(dot / std::sqrt(na * nb), 0.99);
}

}  // namespace
}  // namespace peregrine::testing
