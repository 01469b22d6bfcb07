// layout_nhwc: conv chains -> peregrine.ConvNhwc with transposes only at the chain's edges;
// numerics equal to the unconverted graph (reference backend); the cases left alone.
#include <functional>

#include "backends/reference/evaluate.h"
#include "graph_builder.h"
#include "passes/pass_list.h"
#include "passes/pass_manager.h"
#include "passes/pipelines.h"

namespace peregrine::testing {
namespace {

using BuildFn = std::function<ir::Graph()>;

ir::Graph layout_and_compare(const BuildFn& build, double tol = 1e-4) {
  ir::Graph before = build();
  ir::Graph after = build();
  passes::PassManager pm;
  pm.add(passes::make_layout_nhwc());
  Status st = pm.run(after);
  EXPECT_TRUE(st.is_ok()) << st.message();
  Status verified = ir::verify_and_sort(after);
  EXPECT_TRUE(verified.is_ok()) << verified.message();
  auto typed = infer_graph_types(after, reference_evaluator());
  EXPECT_TRUE(typed.is_ok()) << typed.status().message();
  expect_close(run_graph(after), run_graph(before), tol);
  return after;
}

int count_domain_op(const ir::Graph& g, const std::string& op) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const auto& n) {
    return n->op_type == op && n->domain == "peregrine";
  }));
}

// x[1,8,9,7] -> Conv 3x3 pad 1 -> Relu -> FusedConv 1x1 (Relu, residual = the Relu output)
//   -> depthwise Conv 3x3 stride 2 -> y (graph output)
BuildFn chain(DType dtype = DType::kFloat32, bool runtime_weight = false) {
  return [=] {
    GraphBuilder b;
    b.input("x", {1, 8, 9, 7}, dtype);
    auto weight = [&](const std::string& name, Shape dims, uint64_t seed) {
      if (dtype == DType::kFloat32) return b.random(name, dims, seed);
      return b.constant(name, random_tensor(dims, seed, dtype));
    };
    if (runtime_weight)
      b.input("w1", {8, 8, 3, 3}, dtype);
    else
      weight("w1", {8, 8, 3, 3}, 1);
    weight("b1", {8}, 2);
    weight("w2", {8, 8, 1, 1}, 3);
    weight("w3", {8, 1, 3, 3}, 4);
    ir::Node& c1 = b.node("Conv", {"x", "w1", "b1"}, {"c1"});
    c1.attributes["pads"] = ints_attr("pads", {1, 1, 1, 1});
    b.node("Relu", {"c1"}, {"r1"});
    ir::Node& c2 = b.node("FusedConv", {"r1", "w2", "", "r1"}, {"c2"}, "peregrine");
    c2.opset = 1;
    c2.attributes["activation"] = string_attr("activation", "Relu");
    ir::Node& c3 = b.node("Conv", {"c2", "w3"}, {"y"});
    c3.attributes["group"] = int_attr("group", 8);
    c3.attributes["strides"] = ints_attr("strides", {2, 2});
    c3.attributes["pads"] = ints_attr("pads", {1, 1, 1, 1});
    b.output("y");
    ir::Graph g = b.build();
    g.opsets["peregrine"] = 1;
    return g;
  };
}

TEST(LayoutNhwc, ConvChainRunsInNhwcWithTransposesAtTheEdges) {
  ir::Graph g = layout_and_compare(chain());
  EXPECT_EQ(count_domain_op(g, "ConvNhwc"), 3);
  EXPECT_EQ(count_op(g, "Conv"), 0);
  EXPECT_EQ(count_op(g, "Relu"), 1);       // layout-free: stays, on the NHWC value
  EXPECT_EQ(count_op(g, "Transpose"), 2);  // graph input in, graph output out
  // The graph keeps its interface: same input and output names and NCHW shapes.
  EXPECT_EQ(g.outputs, std::vector<std::string>{"y"});
  EXPECT_EQ(g.find_value("y")->type.dims, (Shape{1, 8, 5, 4}));
}

TEST(LayoutNhwc, ValueReadOutsideTheChainGetsOneTransposeBack) {
  auto build = [] {
    ir::Graph g = chain()();
    // r1 also feeds an NCHW-only op and is a graph output.
    auto n = std::make_unique<ir::Node>();
    n->name = "gap";
    n->op_type = "GlobalAveragePool";
    n->opset = 18;
    n->inputs = {"r1"};
    n->outputs = {"pooled"};
    g.nodes.push_back(std::move(n));
    g.outputs.push_back("pooled");
    g.outputs.push_back("r1");
    EXPECT_TRUE(ir::verify_and_sort(g).is_ok());
    EXPECT_TRUE(infer_graph_types(g, reference_evaluator()).is_ok());
    return g;
  };
  ir::Graph g = layout_and_compare(build);
  EXPECT_EQ(count_domain_op(g, "ConvNhwc"), 3);
  EXPECT_EQ(count_op(g, "Transpose"), 3);  // x in; r1 out (shared by GAP and the output); y out
  EXPECT_EQ(count_op(g, "GlobalAveragePool"), 1);
}

// x -> Conv -> Split(axis 1, 2 + 6) -> Conv on each half -> Concat(axis -3) -> Conv -> y
TEST(LayoutNhwc, SplitAndConcatMoveTheirAxis) {
  auto build = [] {
    GraphBuilder b;
    b.input("x", {1, 4, 7, 6});
    b.random("w0", {8, 4, 3, 3}, 1);
    b.random("wa", {5, 2, 1, 1}, 2);
    b.random("wb", {3, 6, 3, 3}, 3);
    b.random("w3", {4, 8, 1, 1}, 4);
    b.ints("sizes", {2, 6});
    ir::Node& c0 = b.node("Conv", {"x", "w0"}, {"c0"});
    c0.attributes["pads"] = ints_attr("pads", {1, 1, 1, 1});
    b.node("Split", {"c0", "sizes"}, {"s0", "s1"}).attributes["axis"] = int_attr("axis", 1);
    b.node("Conv", {"s0", "wa"}, {"a"});
    ir::Node& cb = b.node("Conv", {"s1", "wb"}, {"bb"});
    cb.attributes["pads"] = ints_attr("pads", {1, 1, 1, 1});
    b.node("Concat", {"a", "bb"}, {"cat"}).attributes["axis"] = int_attr("axis", -3);
    b.node("Conv", {"cat", "w3"}, {"y"});
    b.output("y");
    b.output("s1");  // a Split output that also leaves the graph
    return b.build();
  };
  ir::Graph g = layout_and_compare(build);
  EXPECT_EQ(count_domain_op(g, "ConvNhwc"), 4);
  EXPECT_EQ(count_op(g, "Transpose"), 3);  // x in; y and s1 out
  for (const auto& n : g.nodes)
    if (n->op_type == "Split" || n->op_type == "Concat") {
      EXPECT_EQ(n->attribute("axis")->i, 3) << n->op_type;
    }
}

TEST(LayoutNhwc, LeavesAnIsolatedConvAlone) {
  auto build = [] {
    GraphBuilder b;
    b.input("x", {1, 3, 8, 8});
    b.random("w", {4, 3, 3, 3}, 1);
    b.node("Conv", {"x", "w"}, {"c"});
    b.node("Relu", {"c"}, {"r"});
    b.node("GlobalAveragePool", {"r"}, {"y"});
    b.output("y");
    return b.build();
  };
  ir::Graph g = layout_and_compare(build);
  EXPECT_EQ(count_op(g, "Conv"), 1);
  EXPECT_EQ(count_op(g, "Transpose"), 0);
}

TEST(LayoutNhwc, LeavesFloat64AndRuntimeWeightsAlone) {
  ir::Graph f64 = layout_and_compare(chain(DType::kFloat64));
  EXPECT_EQ(count_domain_op(f64, "ConvNhwc"), 0);
  EXPECT_EQ(count_op(f64, "Transpose"), 0);
  // w1 is a graph input: the first conv stays NCHW; the other two still form a chain.
  ir::Graph rt = layout_and_compare(chain(DType::kFloat32, true));
  EXPECT_EQ(count_op(rt, "Conv"), 1);
  EXPECT_EQ(count_domain_op(rt, "ConvNhwc"), 2);
}

TEST(LayoutNhwc, LeavesGroupedNonDepthwiseConvsAlone) {
  auto build = [] {
    GraphBuilder b;
    b.input("x", {1, 4, 6, 6});
    b.random("w1", {4, 2, 3, 3}, 1);
    b.random("w2", {4, 2, 1, 1}, 2);
    ir::Node& c1 = b.node("Conv", {"x", "w1"}, {"c1"});
    c1.attributes["group"] = int_attr("group", 2);
    ir::Node& c2 = b.node("Conv", {"c1", "w2"}, {"y"});
    c2.attributes["group"] = int_attr("group", 2);
    b.output("y");
    return b.build();
  };
  ir::Graph g = layout_and_compare(build);
  EXPECT_EQ(count_op(g, "Conv"), 2);
  EXPECT_EQ(count_op(g, "Transpose"), 0);
}

TEST(LayoutNhwc, OnlyAtO3) {
  auto o2 = passes::pipeline_pass_names(2, {});
  auto o3 = passes::pipeline_pass_names(3, {});
  ASSERT_TRUE(o2.is_ok() && o3.is_ok());
  EXPECT_EQ(std::count(o2->begin(), o2->end(), "layout_nhwc"), 0);
  EXPECT_EQ(o3->back(), "layout_nhwc");
  EXPECT_EQ(o3->size(), o2->size() + 1);
  auto disabled = passes::pipeline_pass_names(3, {"layout_nhwc"});
  ASSERT_TRUE(disabled.is_ok());
  EXPECT_EQ(*disabled, *o2);
}

}  // namespace
}  // namespace peregrine::testing
