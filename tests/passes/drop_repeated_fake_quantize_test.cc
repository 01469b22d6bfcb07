// drop_repeated_fake_quantize: a QuantizeDequantize after a Reshape / Transpose of a value the
// same parameters already quantized goes; outputs equal to the graph before on the reference
// backend; cases it must leave alone.
#include "graph_builder.h"
#include "passes/pass_list.h"
#include "passes/pass_manager.h"

namespace peregrine::testing {
namespace {

struct Options {
  bool from_dequantize = false;  // the first quantization is Q -> DQ with an 8-bit reader
  bool other_scale = false;      // the second quantization's scale differs
  bool add_between = false;      // an Add (which leaves the grid) instead of the Transpose
  bool signed_zero = false;
};

// x -> Q -> DQ (or QDQ) -> Reshape -> Transpose|Add -> Q -> DQ -> Softmax -> y
ir::Graph repeated(const Options& o) {
  GraphBuilder b(21);
  std::string x = b.input("x", {2, 3, 8});
  b.scalar("s", 0.02f);
  b.scalar("s2", 0.03f);
  b.constant("z", o.signed_zero ? Tensor::scalar<int8_t>(-4) : Tensor::scalar<uint8_t>(128));
  b.constant("shape", Tensor::from_vector<int64_t>({2, 3, 2, 4}, {4}));
  std::string q = b.op("QuantizeLinear", {x, "s", "z"});
  if (o.from_dequantize) b.output(q);  // an 8-bit reader keeps the pair from fusing
  std::string d = b.op("DequantizeLinear", {q, "s", "z"});
  std::string r = b.op("Reshape", {d, "shape"});
  std::string t;
  if (o.add_between) {
    b.scalar("one", 0.013f);
    t = b.op("Add", {r, "one"});
  } else {
    ir::Node& tr = b.node("Transpose", {r});
    tr.attributes["perm"] = ints_attr("perm", {0, 2, 1, 3});
    t = tr.outputs[0];
  }
  const char* s = o.other_scale ? "s2" : "s";
  std::string d2 = b.op("DequantizeLinear", {b.op("QuantizeLinear", {t, s, "z"}), s, "z"});
  b.output(b.op("Softmax", {d2}));
  return b.build();
}

ir::Graph optimized(const Options& o) {
  ir::Graph g = repeated(o);
  passes::PassManager pm;
  pm.add(passes::make_fuse_quantize_dequantize());
  pm.add(passes::make_drop_repeated_fake_quantize());
  pm.add(passes::make_dead_code_elimination());
  EXPECT_TRUE(pm.run(g).is_ok());
  return g;
}

// Fake quantizations left: QuantizeDequantize nodes plus Q -> DQ pairs.
int quantizations(const ir::Graph& g) {
  return count_op(g, "QuantizeDequantize") + count_op(g, "DequantizeLinear");
}

TEST(DropRepeatedFakeQuantize, SecondQuantizationGoes) {
  for (bool from_dequantize : {false, true})
    for (bool signed_zero : {false, true}) {
      const Options o{.from_dequantize = from_dequantize, .signed_zero = signed_zero};
      ir::Graph g = optimized(o);
      EXPECT_EQ(quantizations(g), 1);
      expect_close(run_graph(repeated(o)), run_graph(g), 0.0);
    }
}

TEST(DropRepeatedFakeQuantize, LeavesWhatItMustNot) {
  for (const Options& o : {Options{.other_scale = true}, Options{.add_between = true}}) {
    ir::Graph g = optimized(o);
    EXPECT_EQ(quantizations(g), 2);
    expect_close(run_graph(repeated(o)), run_graph(g), 0.0);
  }
}

}  // namespace
}  // namespace peregrine::testing
