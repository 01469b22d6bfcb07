// fuse_qdq_matmul: DequantizeLinear x2 -> MatMul / Gemm -> QuantizeLinear becomes peregrine.QGemm
// with an int32 bias; numerics against the unfused graph on the reference backend; cases it
// must leave alone.
#include "graph_builder.h"
#include "passes/pass_list.h"
#include "passes/pass_manager.h"

namespace peregrine::testing {
namespace {

constexpr int64_t kK = 8, kN = 6;
constexpr float kYScale = 0.05f;

struct QdqMatMulOptions {
  bool gemm = false;  // Gemm(x, W^T, b) with transB = 1, else MatMul(x, W)
  bool per_column = true;
  bool int32_bias = true;  // Gemm only: DequantizeLinear(int32) bias, else float32
  float alpha = 1.0f;
  int8_t w_zero = 0;
  bool weight_is_activation = false;  // the second operand DequantizeLinear(QuantizeLinear(input))
  bool extra_product_use = false;
};

Tensor int8_weights(Shape dims, uint64_t seed) {
  Tensor t = Tensor::zeros(DType::kInt8, dims);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<int8_t>()[i] = static_cast<int8_t>(rng() % 255 - 127);
  return t;
}

// x (float) -> Q -> DQ -> MatMul / Gemm with DQ(w) -> Q -> DQ -> y (float).
ir::Graph qdq_matmul(const QdqMatMulOptions& o) {
  GraphBuilder b(18);
  std::string x = b.input("x", o.gemm ? Shape{5, kK} : Shape{2, 5, kK});
  b.scalar("sx", 0.02f);
  b.constant("zx", Tensor::scalar<uint8_t>(125));
  std::string xd = b.op("DequantizeLinear", {b.op("QuantizeLinear", {x, "sx", "zx"}), "sx", "zx"});
  const Shape w_shape = o.gemm ? Shape{kN, kK} : Shape{kK, kN};
  std::vector<float> sw_values = {0.004f, 0.003f, 0.005f, 0.0025f, 0.0045f, 0.002f};
  if (o.per_column)
    b.constant("sw", Tensor::from_vector<float>(sw_values, {kN}));
  else
    b.scalar("sw", 0.004f);
  b.constant("zw", o.per_column
                       ? Tensor::from_vector<int8_t>(std::vector<int8_t>(kN, o.w_zero), {kN})
                       : Tensor::scalar<int8_t>(o.w_zero));
  std::string wq;
  if (o.weight_is_activation) {
    wq = b.op("QuantizeLinear", {b.input("w", w_shape), "sw", "zw"});
  } else {
    wq = b.constant("wq", int8_weights(w_shape, 4));
  }
  ir::Node& dqw = b.node("DequantizeLinear", {wq, "sw", "zw"});
  dqw.attributes["axis"] = int_attr("axis", o.gemm ? 0 : 1);
  std::string y;
  if (o.gemm) {
    std::string bias;
    if (o.int32_bias) {
      b.constant("bq", Tensor::from_vector<int32_t>({90, -300, 250, -20, 0, 11}, {kN}));
      std::vector<float> bs(kN);
      for (int64_t i = 0; i < kN; ++i) bs[i] = 0.02f * (o.per_column ? sw_values[i] : 0.004f);
      b.constant("bs", Tensor::from_vector<float>(bs, {kN}));
      ir::Node& dqb = b.node("DequantizeLinear", {"bq", "bs"});
      dqb.attributes["axis"] = int_attr("axis", 0);
      bias = dqb.outputs[0];
    } else {
      bias = b.random("bf", {kN}, 5);
    }
    ir::Node& gemm = b.node("Gemm", {xd, dqw.outputs[0], bias});
    gemm.attributes["transB"] = int_attr("transB", 1);
    if (o.alpha != 1.0f) gemm.attributes["alpha"] = float_attr("alpha", o.alpha);
    y = gemm.outputs[0];
  } else {
    y = b.op("MatMul", {xd, dqw.outputs[0]});
  }
  if (o.extra_product_use) b.output(y);
  b.scalar("sy", kYScale);
  b.constant("zy", Tensor::scalar<uint8_t>(128));
  std::string yq = b.op("QuantizeLinear", {y, "sy", "zy"});
  b.output(b.op("DequantizeLinear", {yq, "sy", "zy"}));
  return b.build();
}

int fused_count(const QdqMatMulOptions& o, ir::Graph* out = nullptr) {
  ir::Graph g = qdq_matmul(o);
  passes::PassManager pm;
  pm.add(passes::make_fuse_qdq_matmul());
  pm.add(passes::make_dead_code_elimination());
  EXPECT_TRUE(pm.run(g).is_ok());
  const int n = count_op(g, "QGemm");
  if (out) *out = std::move(g);
  return n;
}

// Integer and float paths round differently at ties and by float32 products: at most one step
// of y's scale apart.
void expect_fused_and_close(const QdqMatMulOptions& o) {
  ir::Graph g;
  EXPECT_EQ(fused_count(o, &g), 1);
  EXPECT_EQ(count_op(g, "MatMul") + count_op(g, "Gemm"), 0);
  EXPECT_EQ(count_op(g, "QuantizeLinear"), 1);    // the input's
  EXPECT_EQ(count_op(g, "DequantizeLinear"), 1);  // the output's
  expect_close(run_graph(qdq_matmul(o)), run_graph(g), kYScale * 1.001);
}

TEST(FuseQdqMatMul, MatMulPerColumnAndPerTensor) {
  expect_fused_and_close({});
  expect_fused_and_close({.per_column = false});
}
TEST(FuseQdqMatMul, GemmTransposedWithInt32OrFloatBias) {
  expect_fused_and_close({.gemm = true});
  expect_fused_and_close({.gemm = true, .per_column = false, .int32_bias = false});
}

TEST(FuseQdqMatMul, LeavesWhatItMustNot) {
  EXPECT_EQ(fused_count({.weight_is_activation = true}), 0);  // attention-style product
  EXPECT_EQ(fused_count({.gemm = true, .alpha = 0.5f}), 0);
  EXPECT_EQ(fused_count({.w_zero = 3}), 0);  // weight zero points must be zero
  EXPECT_EQ(fused_count({.extra_product_use = true}), 0);
}

}  // namespace
}  // namespace peregrine::testing
