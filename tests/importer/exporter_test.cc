// The ONNX exporter round trip: IR -> save_onnx_model -> load_onnx_model gives the same
// structure (ops, domains, attributes, initializers, subgraphs) and the same outputs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "importer/onnx/onnx_exporter.h"
#include "importer/onnx/onnx_importer.h"
#include "passes/graph_builder.h"

namespace peregrine::testing {
namespace {

namespace fs = std::filesystem;

// x[1,2,5,5] -> peregrine.FusedConv(W, B, Relu) -> y[1,3,3,3]
//   -> If(cond) { then: Sigmoid(y) (reads y from the outer scope), else: Neg(y) } -> z
ir::Model make_model() {
  GraphBuilder b(17);
  b.input("x", {1, 2, 5, 5});
  b.random("w", {3, 2, 3, 3}, 11);
  b.random("bias", {3}, 12);
  b.constant("cond", Tensor::scalar<bool>(true));
  ir::Node& conv = b.node("FusedConv", {"x", "w", "bias"}, {"y"}, "peregrine");
  conv.opset = 1;
  conv.attributes["activation"] = [] {
    ir::Attribute a;
    a.name = "activation";
    a.type = ir::Attribute::Type::kString;
    a.s = "Relu";
    return a;
  }();
  conv.attributes["pads"] = ints_attr("pads", {0, 0, 0, 0});
  ir::Node& branch = b.node("If", {"cond"}, {"z"});
  for (const char* name : {"then_branch", "else_branch"}) {
    auto sub = std::make_shared<ir::Graph>();
    sub->name = name;
    auto n = std::make_unique<ir::Node>();
    n->name = std::string(name) + "_node";
    n->op_type = std::string(name) == "then_branch" ? "Sigmoid" : "Neg";
    n->opset = 17;
    n->inputs = {"y"};
    n->outputs = {std::string(name) + "_out"};
    sub->nodes.push_back(std::move(n));
    sub->value(std::string(name) + "_out").type =
        ir::ValueType::tensor(DType::kFloat32, {1, 3, 3, 3});
    sub->outputs = {std::string(name) + "_out"};
    ir::Attribute a;
    a.name = name;
    a.type = ir::Attribute::Type::kGraph;
    a.g = std::move(sub);
    branch.attributes[name] = std::move(a);
  }
  b.output("z");
  ir::Model m;
  m.graph = b.build();
  m.graph.opsets["peregrine"] = 1;
  m.ir_version = 8;
  m.producer_name = "exporter_test";
  return m;
}

TEST(Exporter, RoundTripKeepsStructureAndOutputs) {
  ir::Model before = make_model();
  char tmpl[] = "/tmp/peregrine_exporter_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string path = dir + "/model.onnx";
  ASSERT_TRUE(save_onnx_model(before, path, false).is_ok());
  // A second save refuses to replace the file unless asked to.
  EXPECT_FALSE(save_onnx_model(before, path, false).is_ok());
  EXPECT_TRUE(save_onnx_model(before, path, true).is_ok());
  auto after = load_onnx_model(path);
  fs::remove_all(dir);
  ASSERT_TRUE(after.is_ok()) << after.status().message();
  const ir::Graph& g = after->graph;

  EXPECT_EQ(g.inputs, before.graph.inputs);
  EXPECT_EQ(g.outputs, before.graph.outputs);
  EXPECT_EQ(g.opsets.count("peregrine"), 1u);
  ASSERT_EQ(g.nodes.size(), before.graph.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& a = *before.graph.nodes[i];
    const ir::Node& c = *g.nodes[i];
    EXPECT_EQ(c.op_type, a.op_type);
    EXPECT_EQ(c.domain, a.domain);
    EXPECT_EQ(c.inputs, a.inputs);
    EXPECT_EQ(c.outputs, a.outputs);
    ASSERT_EQ(c.attributes.size(), a.attributes.size()) << c.op_type;
    for (const auto& [key, attr] : a.attributes) {
      const ir::Attribute* got = c.attribute(key);
      ASSERT_NE(got, nullptr) << key;
      EXPECT_EQ(got->type, attr.type) << key;
      EXPECT_EQ(got->s, attr.s) << key;
      EXPECT_EQ(got->ints, attr.ints) << key;
      if (attr.type == ir::Attribute::Type::kGraph) {
        ASSERT_TRUE(got->g);
        ASSERT_EQ(got->g->nodes.size(), 1u);
        EXPECT_EQ(got->g->nodes[0]->op_type, attr.g->nodes[0]->op_type);
        EXPECT_EQ(got->g->nodes[0]->inputs, std::vector<std::string>{"y"});
        EXPECT_EQ(got->g->outputs, attr.g->outputs);
      }
    }
  }
  // Initializers: same names and bytes.
  for (const char* name : {"w", "bias", "cond"}) {
    ASSERT_TRUE(g.is_initializer(name)) << name;
    const Tensor& x = *before.graph.find_value(name)->initializer;
    const Tensor& y = *g.find_value(name)->initializer;
    ASSERT_EQ(x.shape(), y.shape()) << name;
    ASSERT_EQ(x.dtype(), y.dtype()) << name;
    EXPECT_EQ(std::memcmp(x.raw(), y.raw(), x.nbytes()), 0) << name;
  }
  // value_info carries the intermediate's type.
  const ir::Value* y = g.find_value("y");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->type.dims, (Shape{1, 3, 3, 3}));

  expect_close(run_graph(g), run_graph(before.graph), 0);
}

}  // namespace
}  // namespace peregrine::testing
