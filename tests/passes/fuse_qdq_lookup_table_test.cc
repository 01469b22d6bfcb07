// fuse_qdq_lookup_table: quantized elementwise functions of one 8-bit value (Sigmoid, SiLU
// through an inner Q / DQ pair, HardSwish) become one peregrine.TableLookup; outputs equal to
// the unfused graph on the reference backend (the table holds the same float32 operations);
// cases it must leave alone.
#include "backends/reference/evaluate.h"
#include "graph_builder.h"
#include "passes/pass_list.h"
#include "passes/pass_manager.h"

namespace peregrine::testing {
namespace {

enum class Activation { kSigmoid, kSiLU, kHardSwish, kPerChannelScale, kTwoSources, kFloatOnly };

struct Options {
  Activation activation = Activation::kSiLU;
  bool inner_value_is_output = false;  // the Sigmoid's output is also a graph output
  bool signed_out = false;
};

// x (float) -> Q -> DQ -> activation -> Q -> DQ -> y.
ir::Graph quantized_activation(const Options& o) {
  GraphBuilder b(18);
  std::string x = b.input("x", {2, 3, 5, 7});
  b.scalar("sx", 0.01f);
  b.constant("zx", Tensor::scalar<uint8_t>(128));
  std::string xq = b.op("QuantizeLinear", {x, "sx", "zx"});
  std::string xd = b.op("DequantizeLinear", {xq, "sx", "zx"});
  b.scalar("sy", 0.004f);
  b.constant("zy", o.signed_out ? Tensor::scalar<int8_t>(-100) : Tensor::scalar<uint8_t>(30));
  std::string y;
  switch (o.activation) {
    case Activation::kSigmoid:
      y = b.op("Sigmoid", {xd});
      break;
    case Activation::kSiLU: {
      // ONNX Runtime's quantizer writes SiLU as x * DQ(Q(Sigmoid(x))).
      std::string s = b.op("Sigmoid", {xd});
      if (o.inner_value_is_output) b.output(s);
      b.scalar("ss", 1.0f / 255);
      b.constant("zs", Tensor::scalar<uint8_t>(0));
      std::string sd = b.op("DequantizeLinear", {b.op("QuantizeLinear", {s, "ss", "zs"}), "ss", "zs"});
      y = b.op("Mul", {xd, sd});
      break;
    }
    case Activation::kHardSwish:
      y = b.op("HardSwish", {xd});
      break;
    case Activation::kPerChannelScale:  // a per-channel constant: not a function of x alone
      y = b.op("Mul", {xd, b.random("c", {1, 3, 1, 1}, 3)});
      break;
    case Activation::kTwoSources: {  // x * z, z another quantized input
      std::string z = b.input("z", {2, 3, 5, 7});
      std::string zd = b.op("DequantizeLinear", {b.op("QuantizeLinear", {z, "sx", "zx"}), "sx", "zx"});
      y = b.op("Mul", {xd, zd});
      break;
    }
    case Activation::kFloatOnly:  // Sigmoid of the float input itself: no 8-bit source
      y = b.op("Sigmoid", {x});
      break;
  }
  std::string yq = b.op("QuantizeLinear", {y, "sy", "zy"});
  b.output(b.op("DequantizeLinear", {yq, "sy", "zy"}));
  return b.build();
}

ir::Graph fused(const Options& o) {
  ir::Graph g = quantized_activation(o);
  passes::PassManager pm;
  pm.add(passes::make_fuse_qdq_lookup_table(reference_evaluator()));
  pm.add(passes::make_dead_code_elimination());
  EXPECT_TRUE(pm.run(g).is_ok());
  return g;
}

void expect_one_table(const Options& o) {
  ir::Graph g = fused(o);
  EXPECT_EQ(count_op(g, "TableLookup"), 1);
  EXPECT_EQ(count_op(g, "Sigmoid") + count_op(g, "HardSwish") + count_op(g, "Mul"), 0);
  EXPECT_EQ(count_op(g, "QuantizeLinear"), 1);    // the input's
  EXPECT_EQ(count_op(g, "DequantizeLinear"), 1);  // the output's
  expect_close(run_graph(quantized_activation(o)), run_graph(g), 0.0);
}

TEST(FuseQdqLookupTable, Sigmoid) { expect_one_table({.activation = Activation::kSigmoid}); }
TEST(FuseQdqLookupTable, SiLUThroughInnerQdq) { expect_one_table({}); }
TEST(FuseQdqLookupTable, HardSwishSignedOutput) {
  expect_one_table({.activation = Activation::kHardSwish, .signed_out = true});
}

// The Sigmoid's value has another reader: it stays, and the table still replaces the rest.
TEST(FuseQdqLookupTable, KeepsWhatOthersRead) {
  const Options o{.inner_value_is_output = true};
  ir::Graph g = fused(o);
  EXPECT_EQ(count_op(g, "TableLookup"), 1);
  EXPECT_EQ(count_op(g, "Sigmoid"), 1);
  EXPECT_EQ(count_op(g, "Mul"), 0);
  expect_close(run_graph(quantized_activation(o)), run_graph(g), 0.0);
}

TEST(FuseQdqLookupTable, LeavesWhatItMustNot) {
  for (Activation a : {Activation::kPerChannelScale, Activation::kTwoSources,
                       Activation::kFloatOnly}) {
    ir::Graph g = fused({.activation = a});
    EXPECT_EQ(count_op(g, "TableLookup"), 0) << static_cast<int>(a);
  }
}

}  // namespace
}  // namespace peregrine::testing
