// fuse_quantize_dequantize: a QuantizeLinear read only by a DequantizeLinear with the same
// parameters becomes peregrine.QuantizeDequantize; outputs equal to the unfused graph on the
// reference backend; cases it must leave alone.
#include "passes/pass_list.h"
#include "passes/pass_manager.h"
#include "graph_builder.h"

namespace peregrine::testing {
namespace {

struct Options {
  bool other_scale = false;      // the DequantizeLinear's scale differs
  bool q_has_other_reader = false;
  bool signed_zero = false;
  bool int8_by_attribute = false;  // no zero point, output_dtype = INT8 (opset 21)
};

// x -> Q -> DQ -> Softmax -> y (a float op with no integer form after the pair).
ir::Graph fake_quant(const Options& o) {
  GraphBuilder b(21);
  std::string x = b.input("x", {2, 3, 17});
  b.scalar("s", 0.02f);
  b.scalar("s2", 0.04f);
  b.constant("z", o.signed_zero ? Tensor::scalar<int8_t>(-4) : Tensor::scalar<uint8_t>(128));
  ir::Node& qn = b.node("QuantizeLinear", {x, "s", o.int8_by_attribute ? "" : "z"});
  if (o.int8_by_attribute) qn.attributes["output_dtype"] = int_attr("output_dtype", 3);
  std::string q = qn.outputs[0];
  if (o.q_has_other_reader) b.output(q);
  std::string d =
      b.op("DequantizeLinear", {q, o.other_scale ? "s2" : "s", o.int8_by_attribute ? "" : "z"});
  b.output(b.op("Softmax", {d}));
  return b.build();
}

ir::Graph fused(const Options& o) {
  ir::Graph g = fake_quant(o);
  passes::PassManager pm;
  pm.add(passes::make_fuse_quantize_dequantize());
  pm.add(passes::make_dead_code_elimination());
  EXPECT_TRUE(pm.run(g).is_ok());
  return g;
}

TEST(FuseQuantizeDequantize, PairBecomesOneNode) {
  for (bool signed_zero : {false, true}) {
    const Options o{.signed_zero = signed_zero};
    ir::Graph g = fused(o);
    EXPECT_EQ(count_op(g, "QuantizeDequantize"), 1);
    EXPECT_EQ(count_op(g, "QuantizeLinear") + count_op(g, "DequantizeLinear"), 0);
    expect_close(run_graph(fake_quant(o)), run_graph(g), 0.0);
  }
}

TEST(FuseQuantizeDequantize, LeavesWhatItMustNot) {
  EXPECT_EQ(count_op(fused({.other_scale = true}), "QuantizeDequantize"), 0);
  EXPECT_EQ(count_op(fused({.q_has_other_reader = true}), "QuantizeDequantize"), 0);
  // The type comes from output_dtype, not a zero point: the fused op could not know it.
  const Options by_attribute{.int8_by_attribute = true};
  EXPECT_EQ(count_op(fused(by_attribute), "QuantizeDequantize"), 0);
  expect_close(run_graph(fake_quant(by_attribute)), run_graph(fused(by_attribute)), 0.0);
}

}  // namespace
}  // namespace peregrine::testing
