// fuse_qdq_max_pool: DequantizeLinear -> MaxPool -> QuantizeLinear with equal parameters
// becomes MaxPool on the 8-bit values; outputs equal to the unfused graph on the reference
// backend and on the CPU backend; cases it must leave alone.
#include "backends/cpu/cpu_backend.h"
#include "graph_builder.h"
#include "passes/pass_list.h"
#include "passes/pass_manager.h"

namespace peregrine::testing {
namespace {

struct Options {
  bool signed_type = false;
  bool other_scale = false;  // the QuantizeLinear's scale differs
  bool pool_has_other_reader = false;
  bool dq_has_other_reader = false;
  int opset = 19;
};

// x (float) -> Q -> DQ -> MaxPool 3x3 / 2 pad 1 -> Q -> DQ -> y (ResNet's stem pool).
ir::Graph qdq_pool(const Options& o) {
  GraphBuilder b(o.opset);
  std::string x = b.input("x", {1, 3, 11, 13});
  b.scalar("s", 0.03f);
  b.scalar("s2", 0.05f);
  b.constant("z", o.signed_type ? Tensor::scalar<int8_t>(-5) : Tensor::scalar<uint8_t>(121));
  std::string d = b.op("DequantizeLinear", {b.op("QuantizeLinear", {x, "s", "z"}), "s", "z"});
  if (o.dq_has_other_reader) b.output(b.op("Relu", {d}));
  ir::Node& pool = b.node("MaxPool", {d});
  pool.attributes["kernel_shape"] = ints_attr("kernel_shape", {3, 3});
  pool.attributes["strides"] = ints_attr("strides", {2, 2});
  pool.attributes["pads"] = ints_attr("pads", {1, 1, 1, 1});
  const std::string p = pool.outputs[0];
  if (o.pool_has_other_reader) b.output(p);
  const char* s_out = o.other_scale ? "s2" : "s";
  b.output(b.op("DequantizeLinear", {b.op("QuantizeLinear", {p, s_out, "z"}), s_out, "z"}));
  return b.build();
}

ir::Graph fused(const Options& o) {
  ir::Graph g = qdq_pool(o);
  passes::PassManager pm;
  pm.add(passes::make_fuse_qdq_max_pool());
  pm.add(passes::make_dead_code_elimination());
  EXPECT_TRUE(pm.run(g).is_ok());
  return g;
}

// The pool's input is 8-bit once fused.
bool pools_8bit(const ir::Graph& g) {
  for (const auto& n : g.nodes)
    if (n->op_type == "MaxPool") {
      const ir::ValueType& t = g.values.at(n->inputs[0]).type;
      return t.is_tensor() && (t.dtype == DType::kUInt8 || t.dtype == DType::kInt8);
    }
  return false;
}

TEST(FuseQdqMaxPool, PoolRunsOnTheQuantizedValues) {
  for (bool signed_type : {false, true})
    for (bool dq_has_other_reader : {false, true}) {
      const Options o{.signed_type = signed_type, .dq_has_other_reader = dq_has_other_reader};
      ir::Graph g = fused(o);
      EXPECT_TRUE(pools_8bit(g));
      EXPECT_EQ(count_op(g, "QuantizeLinear"), 1);  // the input's
      EXPECT_EQ(count_op(g, "DequantizeLinear"), dq_has_other_reader ? 2 : 1);
      expect_close(run_graph(qdq_pool(o)), run_graph(g), 0.0);
      expect_close(run_graph(qdq_pool(o)), run_graph_on(cpu_backend(), g), 0.0);
    }
}

TEST(FuseQdqMaxPool, LeavesWhatItMustNot) {
  for (const Options& o : {Options{.other_scale = true}, Options{.pool_has_other_reader = true},
                           Options{.opset = 11}}) {  // MaxPool-11 takes no 8-bit input
    ir::Graph g = fused(o);
    EXPECT_FALSE(pools_8bit(g));
    EXPECT_EQ(count_op(g, "QuantizeLinear"), 2);
  }
}

}  // namespace
}  // namespace peregrine::testing
