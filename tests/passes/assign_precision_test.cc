// assign_precision: which nodes take the session's precision, what --keep-fp32 keeps, and the
// error for a name that matches nothing.
#include <gtest/gtest.h>

#include "graph_builder.h"
#include "passes/assign_precision.h"

namespace peregrine::testing {
namespace {

ir::Graph conv_relu_matmul() {
  GraphBuilder b;
  const std::string x = b.input("x", {1, 3, 8, 8});
  auto& conv = b.node("Conv", {x, b.random("w", {4, 3, 3, 3}, 1)});
  conv.name = "stem";
  const std::string r = b.op("Relu", {conv.outputs[0]});
  const std::string f = b.op("Flatten", {r});
  const std::string y = b.op("MatMul", {f, b.random("wm", {144, 5}, 2)});
  b.output(y);
  return b.build();
}

Precision precision_of(const ir::Graph& g, const std::string& op) {
  for (const auto& n : g.nodes)
    if (n->op_type == op) return n->precision;
  ADD_FAILURE() << "no " << op;
  return Precision::kFloat32;
}

TEST(AssignPrecision, MarksGemmClassNodesOnly) {
  ir::Graph g = conv_relu_matmul();
  auto count = passes::assign_precision(g, Precision::kBFloat16, {});
  ASSERT_TRUE(count.is_ok()) << count.status().message();
  EXPECT_EQ(*count, 2);
  EXPECT_EQ(precision_of(g, "Conv"), Precision::kBFloat16);
  EXPECT_EQ(precision_of(g, "MatMul"), Precision::kBFloat16);
  EXPECT_EQ(precision_of(g, "Relu"), Precision::kFloat32);
  EXPECT_EQ(precision_of(g, "Flatten"), Precision::kFloat32);
}

// The fused attention takes the precision (its products run in bf16); a Softmax outside it
// stays float32.
TEST(AssignPrecision, MarksFusedAttention) {
  GraphBuilder b;
  const std::string q = b.input("q", {1, 4, 8}), k = b.input("k", {1, 4, 8}),
                    v = b.input("v", {1, 4, 8});
  auto& attention = b.node("Attention", {q, k, v});
  attention.domain = "peregrine";
  b.output(b.op("Softmax", {attention.outputs[0]}));
  ir::Graph g = b.build();
  auto count = passes::assign_precision(g, Precision::kBFloat16, {});
  ASSERT_TRUE(count.is_ok()) << count.status().message();
  EXPECT_EQ(*count, 1);
  EXPECT_EQ(precision_of(g, "Attention"), Precision::kBFloat16);
  EXPECT_EQ(precision_of(g, "Softmax"), Precision::kFloat32);
}

TEST(AssignPrecision, Float32LeavesEveryNodeFloat32) {
  ir::Graph g = conv_relu_matmul();
  auto count = passes::assign_precision(g, Precision::kFloat32, {});
  ASSERT_TRUE(count.is_ok());
  EXPECT_EQ(*count, 0);
  for (const auto& n : g.nodes) EXPECT_EQ(n->precision, Precision::kFloat32);
}

TEST(AssignPrecision, KeepsNodesByNameAndOpType) {
  ir::Graph by_name = conv_relu_matmul();
  ASSERT_TRUE(passes::assign_precision(by_name, Precision::kBFloat16, {"stem"}).is_ok());
  EXPECT_EQ(precision_of(by_name, "Conv"), Precision::kFloat32);
  EXPECT_EQ(precision_of(by_name, "MatMul"), Precision::kBFloat16);
  ir::Graph by_op = conv_relu_matmul();
  ASSERT_TRUE(passes::assign_precision(by_op, Precision::kBFloat16, {"MatMul"}).is_ok());
  EXPECT_EQ(precision_of(by_op, "Conv"), Precision::kBFloat16);
  EXPECT_EQ(precision_of(by_op, "MatMul"), Precision::kFloat32);
}

TEST(AssignPrecision, UnknownKeepNameIsAnError) {
  ir::Graph g = conv_relu_matmul();
  auto r = passes::assign_precision(g, Precision::kBFloat16, {"stme"});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("'stme'"), std::string::npos) << r.status().message();
  for (const auto& n : g.nodes) EXPECT_EQ(n->precision, Precision::kFloat32);  // untouched
}

TEST(Precision, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(*parse_precision("fp32"), Precision::kFloat32);
  EXPECT_EQ(*parse_precision("bf16"), Precision::kBFloat16);
  EXPECT_FALSE(parse_precision("int8").is_ok());
  EXPECT_FALSE(parse_precision("BF16").is_ok());
  EXPECT_STREQ(precision_name(Precision::kBFloat16), "bf16");
}

}  // namespace
}  // namespace peregrine::testing
