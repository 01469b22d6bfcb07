// float16_to_float32: a float16 graph computes in float32 behind Casts at its boundary; graphs
// without 16-bit floats, and graphs whose subgraphs hold them, are left alone.
#include <gtest/gtest.h>

#include "backends/reference/evaluate.h"
#include "graph_builder.h"
#include "passes/pass_list.h"
#include "passes/pass_manager.h"
#include "peregrine/float_types.h"

namespace peregrine::testing {
namespace {

Tensor half_random(Shape dims, uint64_t seed, DType t = DType::kFloat16) {
  Tensor f = random_tensor(dims, seed);
  Tensor h = Tensor::zeros(t, dims);
  for (int64_t i = 0; i < f.numel(); ++i)
    h.data<uint16_t>()[i] = t == DType::kFloat16 ? Float16::from_float(f.data<float>()[i])
                                                 : BFloat16::from_float(f.data<float>()[i]);
  return h;
}

// x (fp16) -> Conv(fp16 w) -> Relu -> Add(Cast(y fp32 -> fp16)) -> Mul(fp16 Constant) -> out
ir::Graph half_net(DType t) {
  GraphBuilder b(17);
  b.input("x", {1, 3, 6, 6}, t);
  b.input("y", {1, 4, 6, 6});
  b.constant("w", half_random({4, 3, 3, 3}, 3, t));
  ir::Node& conv = b.node("Conv", {"x", "w"}, {"c"});
  conv.attributes["pads"] = ints_attr("pads", {1, 1, 1, 1});
  b.node("Relu", {"c"}, {"r"});
  b.node("Cast", {"y"}, {"yh"}).attributes["to"] = int_attr("to", static_cast<int64_t>(t));
  b.node("Add", {"r", "yh"}, {"s"});
  ir::Node& k = b.node("Constant", {}, {"k"});
  ir::Attribute value;
  value.name = "value";
  value.type = ir::Attribute::Type::kTensor;
  value.t = half_random({1}, 5, t);
  k.attributes["value"] = value;
  b.node("Mul", {"s", "k"}, {"out"});
  b.output("out");
  return b.build();
}

Tensor to_float(const Tensor& t) {
  Tensor f = Tensor::zeros(DType::kFloat32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) f.data<float>()[i] = static_cast<float>(t.get_as_double(i));
  return f;
}

TEST(Float16ToFloat32, ComputesInFloat32BehindBoundaryCasts) {
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    ir::Graph g = half_net(t);
    const std::vector<Tensor> before = run_graph(g);
    passes::PassManager pm;
    pm.add(passes::make_float16_to_float32());
    ASSERT_TRUE(pm.run(g).is_ok());
    ASSERT_TRUE(infer_graph_types(g, reference_evaluator()).is_ok());
    // The interface keeps its types; everything inside is float32.
    EXPECT_EQ(g.find_value("x")->type.dtype, t);
    EXPECT_EQ(g.find_value("out")->type.dtype, t);
    EXPECT_EQ(g.find_value("y")->type.dtype, DType::kFloat32);
    for (const auto& [name, v] : g.values) {
      if (name == "x" || name == "out") continue;
      EXPECT_NE(v.type.dtype, t) << name;
      if (v.initializer) EXPECT_EQ(v.initializer->dtype(), DType::kFloat32) << name;
    }
    EXPECT_EQ(count_op(g, "Cast"), 3);  // the model's own, retargeted, and two at the boundary
    const std::vector<Tensor> after = run_graph(g);
    ASSERT_EQ(after.size(), 1u);
    EXPECT_EQ(after[0].dtype(), t);
    // The 16-bit graph rounds every intermediate; the float32 one only the output: they agree
    // to the 16-bit type's precision (fp16 11 bits, bf16 8 bits, a few roundings deep).
    expect_close({to_float(after[0])}, {to_float(before[0])}, t == DType::kFloat16 ? 1e-2 : 6e-2);
  }
}

TEST(Float16ToFloat32, LeavesFloat32GraphsNarrowSubgraphsAndQuantizationAlone) {
  GraphBuilder b(17);
  b.input("x", {2, 3});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  ir::Graph g = b.build();
  auto changed = passes::make_float16_to_float32()->run(g);
  ASSERT_TRUE(changed.is_ok());
  EXPECT_FALSE(*changed);

  // An If whose branches compute in float16: the body is not rewritten, so nothing is.
  GraphBuilder branch(17);
  branch.constant("h", half_random({2}, 1));
  branch.node("Identity", {"h"}, {"bo"});
  branch.output("bo");
  auto body = std::make_shared<ir::Graph>(branch.build());
  GraphBuilder outer(17);
  outer.input("cond", {}, DType::kBool);
  outer.input("x16", {2}, DType::kFloat16);
  ir::Node& n = outer.node("If", {"cond"}, {"z"});
  for (const char* key : {"then_branch", "else_branch"}) {
    ir::Attribute a;
    a.name = key;
    a.type = ir::Attribute::Type::kGraph;
    a.g = body;
    n.attributes[key] = a;
  }
  outer.node("Add", {"z", "x16"}, {"out"});
  outer.output("out");
  ir::Graph h = outer.build();
  changed = passes::make_float16_to_float32()->run(h);
  ASSERT_TRUE(changed.is_ok());
  EXPECT_FALSE(*changed);

  // A DequantizeLinear with a float16 scale: rounding follows the scale's type, so no rewrite.
  GraphBuilder q(17);
  q.input("q", {4}, DType::kUInt8);
  q.constant("scale", half_random({1}, 2));
  q.node("DequantizeLinear", {"q", "scale"}, {"d"});
  q.node("Relu", {"d"}, {"r"});
  q.output("r");
  ir::Graph dq = q.build();
  changed = passes::make_float16_to_float32()->run(dq);
  ASSERT_TRUE(changed.is_ok());
  EXPECT_FALSE(*changed);
}

}  // namespace
}  // namespace peregrine::testing
