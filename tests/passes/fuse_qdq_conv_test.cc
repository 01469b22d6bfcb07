// fuse_qdq_conv: DequantizeLinear -> Conv -> [Relu] -> QuantizeLinear becomes QLinearConv with
// an int32 bias; numerics against the unfused graph on the reference backend; cases it must
// leave alone.
#include "passes/pass_list.h"
#include "passes/pass_manager.h"
#include "graph_builder.h"

namespace peregrine::testing {
namespace {

struct QdqConvOptions {
  bool relu = true;
  uint8_t y_zero = 0;      // with a Relu, fusable only at 0 (uint8's minimum)
  bool per_channel = true;
  bool int32_bias = true;  // DequantizeLinear(int32) bias, else a float32 bias
  bool extra_conv_use = false;
  bool weight_is_input = false;
};

Tensor int8_weights(Shape dims, uint64_t seed) {
  Tensor t = Tensor::zeros(DType::kInt8, dims);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int8_t>()[i] = static_cast<int8_t>(rng() % 255 - 127);
  return t;
}

// x (float) -> Q -> DQ -> Conv(DQ(w), b) -> [Relu] -> Q -> DQ -> y (float).
ir::Graph qdq_conv(const QdqConvOptions& o) {
  GraphBuilder b(18);
  const int64_t m = 6, c = 5;
  std::string x = b.input("x", {1, c, 7, 8});
  b.scalar("sx", 0.01f);
  b.constant("zx", Tensor::scalar<uint8_t>(128));
  std::string xq = b.op("QuantizeLinear", {x, "sx", "zx"});
  std::string xd = b.op("DequantizeLinear", {xq, "sx", "zx"});
  std::string wq = o.weight_is_input ? b.input("wq", {m, c, 3, 3}, DType::kInt8)
                                     : b.constant("wq", int8_weights({m, c, 3, 3}, 3));
  std::vector<float> sw_values = {0.002f, 0.003f, 0.004f, 0.0025f, 0.0035f, 0.0015f};
  if (o.per_channel) b.constant("sw", Tensor::from_vector<float>(sw_values, {m}));
  else b.scalar("sw", 0.003f);
  b.constant("zw", o.per_channel ? Tensor::from_vector<int8_t>(std::vector<int8_t>(m, 0), {m})
                                 : Tensor::scalar<int8_t>(0));
  ir::Node& dqw = b.node("DequantizeLinear", {wq, "sw", "zw"});
  dqw.attributes["axis"] = int_attr("axis", 0);
  std::string bias;
  if (o.int32_bias) {
    b.constant("bq", Tensor::from_vector<int32_t>({100, -200, 300, -50, 0, 7}, {m}));
    std::vector<float> bs(m);
    for (int64_t i = 0; i < m; ++i) bs[i] = 0.01f * (o.per_channel ? sw_values[i] : 0.003f);
    b.constant("bs", Tensor::from_vector<float>(bs, {m}));
    ir::Node& dqb = b.node("DequantizeLinear", {"bq", "bs"});
    dqb.attributes["axis"] = int_attr("axis", 0);
    bias = dqb.outputs[0];
  } else {
    bias = b.random("bf", {m}, 5);
  }
  ir::Node& conv = b.node("Conv", {xd, dqw.outputs[0], bias});
  conv.attributes["pads"] = ints_attr("pads", {1, 1, 1, 1});
  std::string y = conv.outputs[0];
  if (o.extra_conv_use) b.output(y);
  if (o.relu) y = b.op("Relu", {y});
  b.scalar("sy", 0.02f);
  b.constant("zy", Tensor::scalar<uint8_t>(o.y_zero));
  std::string yq = b.op("QuantizeLinear", {y, "sy", "zy"});
  b.output(b.op("DequantizeLinear", {yq, "sy", "zy"}));
  return b.build();
}

ir::Graph fused(const QdqConvOptions& o, int* rewrites) {
  ir::Graph g = qdq_conv(o);
  passes::PassManager pm;
  pm.add(passes::make_fuse_qdq_conv());
  pm.add(passes::make_dead_code_elimination());
  EXPECT_TRUE(pm.run(g).is_ok());
  *rewrites = count_op(g, "QLinearConv");
  return g;
}

// Integer and float paths round differently at ties and by float32 products: at most one step
// of y's scale (0.02) apart.
void expect_fused_and_close(const QdqConvOptions& o) {
  int n = 0;
  ir::Graph g = fused(o, &n);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(count_op(g, "Conv"), 0);
  EXPECT_EQ(count_op(g, "Relu"), 0);
  EXPECT_EQ(count_op(g, "QuantizeLinear"), 1);    // the input's
  EXPECT_EQ(count_op(g, "DequantizeLinear"), 1);  // the output's
  expect_close(run_graph(qdq_conv(o)), run_graph(g), 0.0201);
}

TEST(FuseQdqConv, ReluPerChannelInt32Bias) { expect_fused_and_close({}); }
TEST(FuseQdqConv, NoReluPerTensorFloatBias) {
  expect_fused_and_close({.relu = false, .y_zero = 100, .per_channel = false, .int32_bias = false});
}

TEST(FuseQdqConv, LeavesReluThatQuantizingKeeps) {
  int n = 0;
  fused({.relu = true, .y_zero = 100}, &n);  // Relu clamps at 100, above the type's minimum
  EXPECT_EQ(n, 0);
}
TEST(FuseQdqConv, LeavesConvWithAnotherReader) {
  int n = 0;
  fused({.extra_conv_use = true}, &n);
  EXPECT_EQ(n, 0);
}
TEST(FuseQdqConv, LeavesNonConstantWeights) {
  int n = 0;
  fused({.weight_is_input = true}, &n);
  EXPECT_EQ(n, 0);
}

}  // namespace
}  // namespace peregrine::testing
