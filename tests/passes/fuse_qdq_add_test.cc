// fuse_qdq_add: DequantizeLinear x2 -> Add -> [Relu] -> QuantizeLinear becomes
// peregrine.QLinearAdd; numerics equal to the unfused graph on the reference backend (the same
// float32 operations); cases it must leave alone.
#include "passes/pass_list.h"
#include "passes/pass_manager.h"
#include "graph_builder.h"

namespace peregrine::testing {
namespace {

struct QdqAddOptions {
  bool relu = true;
  uint8_t y_zero = 0;
  Shape b_shape = {1, 3, 4, 5};
  bool extra_add_use = false;
};

// x, z (float) -> Q -> DQ each -> Add -> [Relu] -> Q -> DQ -> y.
ir::Graph qdq_add(const QdqAddOptions& o) {
  GraphBuilder b(18);
  std::string x = b.input("x", {1, 3, 4, 5});
  std::string z = b.input("z", o.b_shape);
  b.scalar("sx", 0.01f);
  b.constant("zx", Tensor::scalar<uint8_t>(120));
  b.scalar("sz", 0.015f);
  b.constant("zz", Tensor::scalar<int8_t>(-3));
  std::string xd = b.op("DequantizeLinear", {b.op("QuantizeLinear", {x, "sx", "zx"}), "sx", "zx"});
  std::string zd = b.op("DequantizeLinear", {b.op("QuantizeLinear", {z, "sz", "zz"}), "sz", "zz"});
  std::string y = b.op("Add", {xd, zd});
  if (o.extra_add_use) b.output(y);
  if (o.relu) y = b.op("Relu", {y});
  b.scalar("sy", 0.02f);
  b.constant("zy", Tensor::scalar<uint8_t>(o.y_zero));
  std::string yq = b.op("QuantizeLinear", {y, "sy", "zy"});
  b.output(b.op("DequantizeLinear", {yq, "sy", "zy"}));
  return b.build();
}

ir::Graph fused(const QdqAddOptions& o) {
  ir::Graph g = qdq_add(o);
  passes::PassManager pm;
  pm.add(passes::make_fuse_qdq_add());
  pm.add(passes::make_dead_code_elimination());
  EXPECT_TRUE(pm.run(g).is_ok());
  return g;
}

TEST(FuseQdqAdd, ReluAndPlainSum) {
  for (bool relu : {true, false}) {
    QdqAddOptions o{.relu = relu, .y_zero = static_cast<uint8_t>(relu ? 0 : 128)};
    ir::Graph g = fused(o);
    EXPECT_EQ(count_op(g, "QLinearAdd"), 1);
    EXPECT_EQ(count_op(g, "Add"), 0);
    EXPECT_EQ(count_op(g, "Relu"), 0);
    EXPECT_EQ(count_op(g, "DequantizeLinear"), 1);  // the output's
    expect_close(run_graph(qdq_add(o)), run_graph(g), 0.0);
  }
}

TEST(FuseQdqAdd, LeavesWhatItMustNot) {
  EXPECT_EQ(count_op(fused({.relu = true, .y_zero = 10}), "QLinearAdd"), 0);  // Relu clamps
  EXPECT_EQ(count_op(fused({.b_shape = {1, 3, 1, 5}}), "QLinearAdd"), 0);     // broadcast
  EXPECT_EQ(count_op(fused({.extra_add_use = true}), "QLinearAdd"), 0);
}

}  // namespace
}  // namespace peregrine::testing
