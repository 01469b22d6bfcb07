// Pass tests: small graphs before -> after, structure asserted, numerics equal to the
// unoptimized graph, and negative cases that must be left alone.
#include <functional>

#include "backends/cpu/cpu_backend.h"
#include "backends/reference/evaluate.h"
#include "graph_builder.h"
#include "passes/pass_list.h"
#include "passes/pass_manager.h"
#include "passes/pipelines.h"

namespace peregrine::testing {
namespace {

using BuildFn = std::function<ir::Graph()>;

// Runs `passes` (names) on a fresh graph; checks verify + numerics vs the original.
ir::Graph optimize_and_compare(const BuildFn& build, const std::vector<std::string>& names,
                               double tol = 1e-5) {
  ir::Graph before = build();
  ir::Graph after = build();
  passes::PassManager pm;
  for (const auto& n : names) {
    auto all = passes::make_pipeline(2, reference_evaluator());
    EXPECT_TRUE(all.is_ok());
    for (auto& p : const_cast<std::vector<std::unique_ptr<passes::Pass>>&>(all->passes()))
      if (p->name() == n) {
        pm.add(std::move(p));
        break;
      }
  }
  EXPECT_EQ(pm.passes().size(), names.size());
  Status st = pm.run(after);
  EXPECT_TRUE(st.is_ok()) << st.message();
  EXPECT_TRUE(ir::verify_and_sort(after).is_ok());
  expect_close(run_graph(before), run_graph(after), tol);
  return after;
}

ir::Graph optimize_level(const BuildFn& build, int level, double tol = 1e-5) {
  ir::Graph before = build();
  ir::Graph after = build();
  Status st = passes::optimize_graph(after, level, reference_evaluator());
  EXPECT_TRUE(st.is_ok()) << st.message();
  expect_close(run_graph(before), run_graph(after), tol);
  return after;
}

// --- cleanup ---------------------------------------------------------------

TEST(ConstantFolding, ShapeGatherConcatReshapeChain) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {2, 3, 4});
    auto shape = b.op("Shape", {x});
    auto& g0 = b.node("Gather", {shape, b.ints("i0", {0})});
    g0.attributes["axis"] = int_attr("axis", 0);
    auto concat_in = b.op("Unsqueeze", {b.op("Squeeze", {g0.outputs[0]}), b.ints("ax", {0})});
    auto& cat = b.node("Concat", {concat_in, b.ints("minus1", {-1})});
    cat.attributes["axis"] = int_attr("axis", 0);
    b.output(b.op("Reshape", {x, cat.outputs[0]}));
    return b.build();
  };
  ir::Graph g = optimize_and_compare(build, {"constant_folding", "dead_code_elimination"});
  EXPECT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0]->op_type, "Reshape");
  EXPECT_TRUE(g.is_initializer(g.nodes[0]->inputs[1]));
}

TEST(ConstantFolding, LeavesRuntimeValuesAlone) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {4});
    b.output(b.op("Add", {b.op("Relu", {x}), b.scalar("one", 1)}));
    return b.build();
  };
  ir::Graph g = optimize_and_compare(build, {"constant_folding"});
  EXPECT_EQ(g.nodes.size(), 2u);
}

TEST(DeadCodeElimination, RemovesUnreadChains) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {4});
    b.op("Exp", {b.op("Neg", {x})});  // dead
    b.output(b.op("Relu", {x}));
    return b.build();
  };
  ir::Graph g = optimize_and_compare(build, {"dead_code_elimination"});
  EXPECT_EQ(g.nodes.size(), 1u);
}

TEST(CommonSubexpressionElimination, MergesTwins) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {4});
    b.output(b.op("Add", {b.op("Relu", {x}), b.op("Relu", {x})}));
    return b.build();
  };
  ir::Graph g = optimize_and_compare(
      build, {"common_subexpression_elimination", "dead_code_elimination"});
  EXPECT_EQ(count_op(g, "Relu"), 1);
}

TEST(CommonSubexpressionElimination, KeepsGraphOutputs) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {4});
    b.output(b.op("Relu", {x}));
    b.output(b.op("Relu", {x}));
    return b.build();
  };
  ir::Graph g = optimize_and_compare(build, {"common_subexpression_elimination"});
  EXPECT_EQ(count_op(g, "Relu"), 2);
}

TEST(RemoveIdentityOps, IdentityDropoutCastReshape) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {2, 3});
    auto y = b.op("Identity", {b.op("Relu", {x})});
    y = b.op("Dropout", {y});
    auto& cast = b.node("Cast", {y});
    cast.attributes["to"] = int_attr("to", static_cast<int64_t>(DType::kFloat32));
    y = b.op("Reshape", {cast.outputs[0], b.ints("s", {2, 3})});
    b.output(b.op("Identity", {b.op("Exp", {y})}));  // output through Identity
    return b.build();
  };
  ir::Graph g = optimize_and_compare(build, {"remove_identity_ops"});
  EXPECT_EQ(g.nodes.size(), 2u);  // Relu, Exp
  EXPECT_EQ(g.nodes.back()->outputs[0], g.outputs[0]);
}

TEST(RemoveIdentityOps, KeepsDropoutWithMaskAndInputToOutputIdentity) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {2, 3});
    b.output(b.op("Identity", {x}));  // graph input -> graph output: must stay
    return b.build();
  };
  ir::Graph g = optimize_and_compare(build, {"remove_identity_ops"});
  EXPECT_EQ(g.nodes.size(), 1u);
}

TEST(CollapseTransposeChains, CancelsAndComposes) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {2, 3, 4});
    auto& t1 = b.node("Transpose", {x});
    t1.attributes["perm"] = ints_attr("perm", {0, 2, 1});
    auto& t2 = b.node("Transpose", {t1.outputs[0]});
    t2.attributes["perm"] = ints_attr("perm", {0, 2, 1});
    auto& t3 = b.node("Transpose", {b.op("Relu", {t2.outputs[0]})});
    t3.attributes["perm"] = ints_attr("perm", {1, 0, 2});
    auto& t4 = b.node("Transpose", {t3.outputs[0]});
    t4.attributes["perm"] = ints_attr("perm", {2, 1, 0});
    b.output(t4.outputs[0]);
    return b.build();
  };
  ir::Graph g =
      optimize_and_compare(build, {"collapse_transpose_chains", "dead_code_elimination"});
  EXPECT_EQ(count_op(g, "Transpose"), 1);
}

TEST(CollapseReshapeChains, OneReshape) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {2, 3, 4});
    auto y = b.op("Reshape", {x, b.ints("s1", {6, 4})});
    b.output(b.op("Reshape", {y, b.ints("s2", {4, -1})}));
    return b.build();
  };
  ir::Graph g = optimize_and_compare(build, {"collapse_reshape_chains", "dead_code_elimination"});
  EXPECT_EQ(count_op(g, "Reshape"), 1);
}

// --- fusion ----------------------------------------------------------------

void add_conv(GraphBuilder& b, ir::Node& conv) {
  conv.attributes["pads"] = ints_attr("pads", {1, 1, 1, 1});
}

BuildFn conv_bn_graph(bool conv_is_output, DType dtype = DType::kFloat32) {
  return [=] {
    GraphBuilder b;
    auto x = b.input("x", {1, 3, 5, 5}, dtype);
    auto& conv = b.node("Conv", {x, b.random("w", {4, 3, 3, 3}, 1), b.random("cb", {4}, 2)});
    add_conv(b, conv);
    Tensor var = random_tensor({4}, 6);
    for (int i = 0; i < 4; ++i) var.data<float>()[i] = std::fabs(var.data<float>()[i]) + 0.5f;
    auto& bn = b.node("BatchNormalization", {conv.outputs[0], b.random("s", {4}, 3),
                                             b.random("bb", {4}, 4), b.random("m", {4}, 5),
                                             b.constant("v", var)});
    b.output(b.op("Relu", {bn.outputs[0]}));
    if (conv_is_output) b.output(conv.outputs[0]);
    return b.build();
  };
}

TEST(ConvBatchNormFolding, Folds) {
  ir::Graph g = optimize_and_compare(conv_bn_graph(false), {"conv_batchnorm_folding"}, 1e-4);
  EXPECT_EQ(count_op(g, "BatchNormalization"), 0);
  EXPECT_EQ(count_op(g, "Conv"), 1);
}

TEST(ConvBatchNormFolding, NotWhenConvOutputIsGraphOutput) {
  ir::Graph g = optimize_and_compare(conv_bn_graph(true), {"conv_batchnorm_folding"});
  EXPECT_EQ(count_op(g, "BatchNormalization"), 1);
}

TEST(MatMulAddToGemm, TwoDimensional) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {3, 4});
    b.output(b.op("Add", {b.op("MatMul", {x, b.random("w", {4, 5})}), b.random("bias", {5}, 2)}));
    return b.build();
  };
  ir::Graph g = optimize_and_compare(build, {"matmul_add_to_gemm"});
  EXPECT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0]->op_type, "Gemm");
}

TEST(MatMulAddToGemm, NotForThreeDimensionalOrSharedOutputs) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {2, 3, 4});
    b.output(b.op("Add", {b.op("MatMul", {x, b.random("w", {4, 5})}), b.random("bias", {5}, 2)}));
    auto y = b.input("y", {3, 4});
    auto mm = b.op("MatMul", {y, b.random("w2", {4, 5})});
    b.output(b.op("Add", {mm, b.random("bias2", {5}, 3)}));
    b.output(b.op("Relu", {mm}));  // a second consumer
    return b.build();
  };
  ir::Graph g = optimize_and_compare(build, {"matmul_add_to_gemm"});
  EXPECT_EQ(count_op(g, "Gemm"), 0);
}

// MatMul(A, Transpose(W)) with A of the given shape and W (5, 4): a tied output projection.
BuildFn matmul_transposed_weight_graph(Shape a_dims, bool perm_attr = true) {
  return [=] {
    GraphBuilder b;
    auto x = b.input("x", a_dims);
    auto& t = b.node("Transpose", {b.random("w", {5, 4})});
    if (perm_attr) t.attributes["perm"] = ints_attr("perm", {1, 0});
    b.output(b.op("MatMul", {x, t.outputs[0]}));
    return b.build();
  };
}

TEST(MatMulTransposedWeight, TwoDimensionalBecomesGemmTransB) {
  for (bool perm_attr : {true, false}) {
    ir::Graph g = optimize_and_compare(matmul_transposed_weight_graph({3, 4}, perm_attr),
                                       {"matmul_transposed_weight", "dead_code_elimination"});
    ASSERT_EQ(g.nodes.size(), 1u);
    EXPECT_EQ(g.nodes[0]->op_type, "Gemm");
    EXPECT_EQ(g.nodes[0]->inputs[1], "w");
    EXPECT_EQ(ir::AttrView(*g.nodes[0]).get_int("transB", 0).value(), 1);
  }
}

TEST(MatMulTransposedWeight, HigherRankRowsThroughReshapes) {
  ir::Graph g = optimize_and_compare(matmul_transposed_weight_graph({2, 3, 1, 4}),
                                     {"matmul_transposed_weight", "dead_code_elimination"});
  EXPECT_EQ(count_op(g, "Transpose"), 0);
  EXPECT_EQ(count_op(g, "Gemm"), 1);
  EXPECT_EQ(count_op(g, "Reshape"), 2);
  EXPECT_EQ(g.find_value(g.outputs[0])->type.dims, (Shape{2, 3, 1, 5}));
}

TEST(MatMulTransposedWeight, NotForActivationsOrOtherLayouts) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {3, 4});
    auto k = b.input("k", {5, 4});  // an activation: attention's K^T stays a MatMul
    auto& t = b.node("Transpose", {k});
    t.attributes["perm"] = ints_attr("perm", {1, 0});
    b.output(b.op("MatMul", {x, t.outputs[0]}));
    auto y = b.input("y", {2, 3, 4});  // a 3-D weight transposed on its last two axes
    auto& t3 = b.node("Transpose", {b.random("w3", {2, 5, 4})});
    t3.attributes["perm"] = ints_attr("perm", {0, 2, 1});
    b.output(b.op("MatMul", {y, t3.outputs[0]}));
    return b.build();
  };
  ir::Graph g = optimize_and_compare(build, {"matmul_transposed_weight"});
  EXPECT_EQ(count_op(g, "Gemm"), 0);
  EXPECT_EQ(count_op(g, "Transpose"), 2);
}

BuildFn conv_residual_relu(DType dtype) {
  return [=] {
    GraphBuilder b;
    auto x = b.input("x", {1, 3, 5, 5}, dtype);
    Tensor w = random_tensor({3, 3, 3, 3}, 1, dtype);
    auto& conv = b.node("Conv", {x, b.constant("w", w)});
    add_conv(b, conv);
    b.output(b.op("Relu", {b.op("Add", {conv.outputs[0], x})}));
    return b.build();
  };
}

TEST(FuseActivation, ConvResidualRelu) {
  ir::Graph g = optimize_and_compare(conv_residual_relu(DType::kFloat32), {"fuse_activation"});
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0]->op_type, "FusedConv");
  EXPECT_EQ(g.nodes[0]->domain, "peregrine");
  EXPECT_EQ(g.nodes[0]->inputs.size(), 4u);
}

TEST(FuseActivation, NotForFloat64) {
  ir::Graph g = optimize_and_compare(conv_residual_relu(DType::kFloat64), {"fuse_activation"});
  EXPECT_EQ(g.nodes.size(), 3u);
}

TEST(FuseActivation, GemmSiLUAndLeakyRelu) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {3, 4});
    auto y = b.op("Gemm", {x, b.random("w", {4, 5}), b.random("c", {5}, 2)});
    auto s = b.op("Mul", {y, b.op("Sigmoid", {y})});
    auto mm = b.op("MatMul", {s, b.random("w2", {5, 2}, 3)});
    auto& lr = b.node("LeakyRelu", {mm});
    lr.attributes["alpha"] = float_attr("alpha", 0.2f);
    b.output(lr.outputs[0]);
    return b.build();
  };
  ir::Graph g = optimize_and_compare(build, {"fuse_activation"});
  EXPECT_EQ(count_op(g, "FusedGemm"), 1);
  EXPECT_EQ(count_op(g, "FusedMatMul"), 1);
  EXPECT_EQ(g.nodes.size(), 2u);
}

TEST(FuseActivation, NotWhenIntermediateHasSecondConsumer) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {3, 4});
    auto y = b.op("MatMul", {x, b.random("w", {4, 5})});
    b.output(b.op("Relu", {y}));
    b.output(b.op("Exp", {y}));
    return b.build();
  };
  ir::Graph g = optimize_and_compare(build, {"fuse_activation"});
  EXPECT_EQ(count_op(g, "MatMul"), 1);
}

BuildFn layer_norm_graph(bool mean_is_output) {
  return [=] {
    GraphBuilder b;
    auto x = b.input("x", {2, 3, 8});
    auto& mean = b.node("ReduceMean", {x, b.ints("axes", {-1})});
    auto d = b.op("Sub", {x, mean.outputs[0]});
    auto& var = b.node("ReduceMean", {b.op("Pow", {d, b.scalar("two", 2)}), b.ints("axes2", {-1})});
    auto sd = b.op("Sqrt", {b.op("Add", {var.outputs[0], b.scalar("eps", 1e-5f)})});
    auto n = b.op("Div", {d, sd});
    b.output(b.op("Add", {b.op("Mul", {n, b.random("gamma", {8}, 3)}), b.random("beta", {8}, 4)}));
    if (mean_is_output) b.output(mean.outputs[0]);
    return b.build();
  };
}

TEST(LayerNormFusion, Fuses) {
  ir::Graph g = optimize_and_compare(layer_norm_graph(false), {"layer_norm_fusion"}, 1e-4);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0]->op_type, "LayerNormalization");
}

TEST(LayerNormFusion, NotWhenIntermediateIsGraphOutput) {
  ir::Graph g = optimize_and_compare(layer_norm_graph(true), {"layer_norm_fusion"});
  EXPECT_EQ(count_op(g, "LayerNormalization"), 0);
}

TEST(GeluFusion, ErfAndTanhForms) {
  auto build = [] {
    GraphBuilder b(20);
    auto x = b.input("x", {2, 8});
    auto e = b.op("Erf", {b.op("Div", {x, b.scalar("sqrt2", 1.4142135f)})});
    auto y = b.op("Mul", {b.op("Mul", {x, b.op("Add", {e, b.scalar("one", 1)})}),
                          b.scalar("half", 0.5f)});
    b.output(y);
    auto cube = b.op("Mul", {b.op("Pow", {y, b.scalar("three", 3)}), b.scalar("c", 0.044715f)});
    auto t = b.op("Tanh", {b.op("Mul", {b.op("Add", {y, cube}), b.scalar("k", 0.7978845608f)})});
    auto half = b.op("Mul", {y, b.scalar("half2", 0.5f)});
    b.output(b.op("Mul", {half, b.op("Add", {t, b.scalar("one2", 1)})}));
    return b.build();
  };
  ir::Graph g = optimize_and_compare(build, {"gelu_fusion"}, 1e-5);
  EXPECT_EQ(count_op(g, "Gelu"), 2);
  EXPECT_EQ(g.nodes.size(), 2u);
}

TEST(GeluFusion, OldOpsetUsesPeregrineDomain) {
  auto build = [] {
    GraphBuilder b(13);
    auto x = b.input("x", {2, 8});
    auto e = b.op("Erf", {b.op("Mul", {x, b.scalar("r", 0.70710678f)})});
    b.output(b.op("Mul", {b.op("Mul", {x, b.scalar("half", 0.5f)}),
                          b.op("Add", {e, b.scalar("one", 1)})}));
    return b.build();
  };
  ir::Graph g = optimize_and_compare(build, {"gelu_fusion"});
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0]->domain, "peregrine");
}

BuildFn attention_graph(bool with_heads) {
  return [=] {
    GraphBuilder b;
    const int64_t B = 2, S = 5, H = 2, D = 4;
    auto split = [&](const std::string& name, std::vector<int64_t> perm, uint64_t seed) {
      auto x = b.input(name, {B, S, H * D});
      auto proj = b.op("MatMul", {x, b.random(name + "_w", {H * D, H * D}, seed)});
      auto r = b.op("Reshape", {proj, b.ints(name + "_shape", {B, S, H, D})});
      auto& t = b.node("Transpose", {r});
      t.attributes["perm"] = ints_attr("perm", perm);
      return t.outputs[0];
    };
    auto q = split("q", {0, 2, 1, 3}, 1), k = split("k", {0, 2, 3, 1}, 2),
         v = split("v", {0, 2, 1, 3}, 3);
    auto mask = b.input("mask", {B, 1, 1, S});
    auto scores = b.op("Div", {b.op("MatMul", {q, k}), b.scalar("sqrt_d", 2.0f)});
    auto& sm = b.node("Softmax", {b.op("Add", {scores, mask})});
    sm.attributes["axis"] = int_attr("axis", -1);
    auto ctx = b.op("MatMul", {sm.outputs[0], v});
    if (!with_heads) {
      b.output(ctx);
      return b.build();
    }
    auto& t = b.node("Transpose", {ctx});
    t.attributes["perm"] = ints_attr("perm", {0, 2, 1, 3});
    b.output(b.op("Reshape", {t.outputs[0], b.ints("merge", {B, S, H * D})}));
    return b.build();
  };
}

TEST(AttentionFusion, WithHeadSplitAndMerge) {
  ir::Graph g = optimize_and_compare(attention_graph(true), {"attention_fusion"}, 1e-5);
  EXPECT_EQ(count_op(g, "Attention"), 1);
  EXPECT_EQ(count_op(g, "Softmax"), 0);
  EXPECT_EQ(count_op(g, "Transpose"), 0);
  EXPECT_EQ(g.nodes.size(), 4u);  // three projections + attention
}

TEST(AttentionFusion, CoreOnly) {
  ir::Graph g = optimize_and_compare(attention_graph(false), {"attention_fusion"}, 1e-5);
  EXPECT_EQ(count_op(g, "Attention"), 1);
  EXPECT_EQ(count_op(g, "Transpose"), 3);
}

// torch's export of scaled_dot_product_attention with a mask: Q and K^T each scaled by the
// square root of the scale, the mask added, and rows that saw no key (here query row 1, all
// -inf) zeroed after the softmax by Where(IsNaN(P), zero, P).
BuildFn torch_sdpa_graph(float guard_value) {
  return [=] {
    GraphBuilder b;
    const int64_t B = 2, H = 3, S = 6, D = 4;
    auto q = b.input("q", {B, H, S, D});
    auto kt = b.input("kt", {B, H, D, S});
    auto v = b.input("v", {B, H, S, D});
    Tensor mask = Tensor::zeros(DType::kFloat32, {S, S});
    for (int64_t j = 0; j < S; ++j) mask.data<float>()[S + j] = -INFINITY;
    mask.data<float>()[3 * S + 4] = -INFINITY;
    auto scores = b.op("MatMul", {b.op("Mul", {q, b.scalar("root_q", 0.7f)}),
                                  b.op("Mul", {kt, b.scalar("root_k", 0.7f)})});
    auto& sm = b.node("Softmax", {b.op("Add", {scores, b.constant("mask", mask)})});
    sm.attributes["axis"] = int_attr("axis", -1);
    auto p = sm.outputs[0];
    auto guarded = b.op("Where", {b.op("IsNaN", {p}), b.scalar("zero", guard_value), p});
    b.output(b.op("MatMul", {guarded, v}));
    return b.build();
  };
}

TEST(AttentionFusion, TorchScaledOperandsAndNanGuard) {
  ir::Graph g = optimize_and_compare(torch_sdpa_graph(0.0f), {"attention_fusion"}, 1e-5);
  ASSERT_EQ(count_op(g, "Attention"), 1);
  EXPECT_EQ(
      count_op(g, "IsNaN") + count_op(g, "Where") + count_op(g, "Mul") + count_op(g, "Softmax"), 0);
  const ir::Node& a = *g.nodes[0];
  EXPECT_EQ(a.attribute("empty_rows_zero")->i, 1);
  EXPECT_NEAR(a.attribute("scale")->f, 0.49f, 1e-6);
  // The fused kernel on the CPU backend gives the zero row too.
  expect_close(run_graph_on(cpu_backend(), g), run_graph(torch_sdpa_graph(0.0f)()), 1e-5);
}

// MaxViT's attention: both products as Einsum over three batch letters, K untransposed; an
// equation that is not one of the two forms stays.
BuildFn einsum_attention_graph(const std::string& qk_equation, Shape k_dims = {2, 3, 2, 5, 4}) {
  return [=] {
    GraphBuilder b;
    auto q = b.input("q", {2, 3, 2, 5, 4});
    auto k = b.input("k", k_dims);
    auto v = b.input("v", {2, 3, 2, 5, 6});
    auto& qk = b.node("Einsum", {b.op("Mul", {q, b.scalar("scale", 0.5f)}), k});
    qk.attributes["equation"] = string_attr("equation", qk_equation);
    auto& sm =
        b.node("Softmax", {b.op("Add", {qk.outputs[0], b.random("bias", {1, 1, 2, 5, 5}, 4)})});
    sm.attributes["axis"] = int_attr("axis", -1);
    auto& pv = b.node("Einsum", {sm.outputs[0], v});
    pv.attributes["equation"] = string_attr("equation", "B G H I J, B G H J D -> B G H I D");
    b.output(pv.outputs[0]);
    return b.build();
  };
}

TEST(AttentionFusion, EinsumProducts) {
  ir::Graph g = optimize_and_compare(einsum_attention_graph("B G H I D, B G H J D -> B G H I J"),
                                     {"attention_fusion"}, 1e-5);
  ASSERT_EQ(count_op(g, "Attention"), 1);
  EXPECT_EQ(count_op(g, "Einsum"), 0);
  EXPECT_EQ(g.nodes[0]->attribute("k_transposed")->i, 0);
  expect_close(run_graph_on(cpu_backend(), g),
               run_graph(einsum_attention_graph("B G H I D, B G H J D -> B G H I J")()), 1e-5);
  // Q times K with d and j swapped in K's term (K already transposed to (.., D, J)) is another
  // product: left alone.
  g = optimize_and_compare(einsum_attention_graph("bghid,bghdj->bghij", {2, 3, 2, 4, 5}),
                           {"attention_fusion"}, 1e-5);
  EXPECT_EQ(count_op(g, "Attention"), 0);
}

TEST(AttentionFusion, LeavesAGuardThatIsNotZero) {
  ir::Graph g = optimize_and_compare(torch_sdpa_graph(1.0f), {"attention_fusion"}, 1e-5);
  EXPECT_EQ(count_op(g, "Attention"), 0);
  EXPECT_EQ(count_op(g, "Softmax"), 1);
}

// --- fold_constant_adds ------------------------------------------------------

// Swin's shifted-window scores: MatMul + bias (1, H, N, N), then through (B, nW, H, N, N) for
// the window mask (1, nW, 1, N, N) and back; softmax; times V.
BuildFn shifted_window_graph(bool mask_read_twice) {
  return [=] {
    GraphBuilder b;
    const int64_t B = 2, W = 3, H = 2, N = 5, D = 4;
    auto q = b.input("q", {B * W, H, N, D});
    auto kt = b.input("kt", {B * W, H, D, N});
    auto v = b.input("v", {B * W, H, N, D});
    auto scores = b.op("Add", {b.op("MatMul", {q, kt}), b.random("bias", {1, H, N, N}, 5)});
    auto split = b.op("Reshape", {scores, b.ints("split", {B, W, H, N, N})});
    auto masked = b.op("Add", {split, b.random("window_mask", {1, W, 1, N, N}, 6)});
    auto merged = b.op("Reshape", {masked, b.ints("merge", {B * W, H, N, N})});
    auto& sm = b.node("Softmax", {merged});
    sm.attributes["axis"] = int_attr("axis", -1);
    b.output(b.op("MatMul", {sm.outputs[0], v}));
    if (mask_read_twice) b.output(split);
    return b.build();
  };
}

TEST(FoldConstantAdds, ShiftedWindowMaskBecomesOneConstantAndAttentionFuses) {
  ir::Graph g = optimize_and_compare(shifted_window_graph(false),
                                     {"fold_constant_adds", "attention_fusion"}, 1e-5);
  EXPECT_EQ(count_op(g, "Attention"), 1);
  EXPECT_EQ(count_op(g, "Reshape") + count_op(g, "Add") + count_op(g, "Softmax"), 0);
}

TEST(FoldConstantAdds, AddChainOfConstants) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {2, 3, 4});
    b.output(b.op("Add", {b.random("c2", {3, 1}, 2), b.op("Add", {x, b.random("c1", {4}, 1)})}));
    return b.build();
  };
  ir::Graph g = optimize_and_compare(build, {"fold_constant_adds"}, 1e-6);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0]->op_type, "Add");
}

TEST(FoldConstantAdds, LeavesWhatItMustNotTouch) {
  // The split scores are a graph output: the reshapes stay.
  ir::Graph g = optimize_and_compare(shifted_window_graph(true), {"fold_constant_adds"}, 1e-6);
  EXPECT_EQ(count_op(g, "Reshape"), 2);
  // A non-constant addend, and a constant that would grow X's shape.
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {2, 3});
    auto y = b.input("y", {2, 3});
    b.output(b.op("Add", {b.op("Add", {x, y}), b.random("c", {2, 3}, 1)}));
    b.output(
        b.op("Add", {b.op("Add", {x, b.random("c3", {1}, 2)}), b.random("grow", {4, 2, 3}, 3)}));
    return b.build();
  };
  g = optimize_and_compare(build, {"fold_constant_adds"}, 1e-6);
  EXPECT_EQ(count_op(g, "Add"), 4);
}

// --- rms_norm_fusion -------------------------------------------------------

struct RmsForm {
  int opset = 18;
  bool square_by_mul = false;  // Mul(x, x) instead of Pow(x, 2)
  bool rsqrt = false;          // Sqrt -> Reciprocal -> Mul instead of Div
  bool gamma = true;
  bool sqrt_is_output = false;
  bool mean_second_reader = false;
  DType dtype = DType::kFloat32;
};

BuildFn rms_norm_graph(RmsForm f) {
  return [=] {
    GraphBuilder b(f.opset);
    auto x = b.input("x", {2, 3, 13}, f.dtype);
    auto sq = f.square_by_mul
                  ? b.op("Mul", {x, x})
                  : b.op("Pow", {x, f.dtype == DType::kFloat32
                                        ? b.scalar("two", 2)
                                        : b.constant("two", Tensor::scalar<double>(2))});
    std::string ms;
    if (f.opset >= 18) {
      ms = b.op("ReduceMean", {sq, b.ints("axes", {-1})});
    } else {
      auto& mean = b.node("ReduceMean", {sq});
      mean.attributes["axes"] = ints_attr("axes", {2});
      ms = mean.outputs[0];
    }
    auto eps = f.dtype == DType::kFloat32 ? b.scalar("eps", 1e-6f)
                                          : b.constant("eps", Tensor::scalar<double>(1e-6));
    auto s = b.op("Sqrt", {b.op("Add", {eps, ms})});
    auto n = f.rsqrt ? b.op("Mul", {x, b.op("Reciprocal", {s})}) : b.op("Div", {x, s});
    if (f.gamma) n = b.op("Mul", {b.random("gamma", {13}, 3), n});
    b.output(n);
    if (f.sqrt_is_output) b.output(s);
    if (f.mean_second_reader) b.output(b.op("Exp", {ms}));
    return b.build();
  };
}

TEST(RmsNormFusion, DivFormWithGammaAndAxesInput) {
  ir::Graph g = optimize_and_compare(rms_norm_graph({}), {"rms_norm_fusion"}, 1e-5);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0]->op_type, "RMSNormalization");
  EXPECT_EQ(g.nodes[0]->domain, "peregrine");
  EXPECT_EQ(g.nodes[0]->attribute("axis")->i, -1);
  EXPECT_FLOAT_EQ(g.nodes[0]->attribute("epsilon")->f, 1e-6f);
}

TEST(RmsNormFusion, RsqrtFormMulSquareAxesAttributeNoGamma) {
  RmsForm f;
  f.opset = 13;
  f.square_by_mul = true;
  f.rsqrt = true;
  f.gamma = false;
  ir::Graph g = optimize_and_compare(rms_norm_graph(f), {"rms_norm_fusion"}, 1e-5);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0]->op_type, "RMSNormalization");
}

TEST(RmsNormFusion, NotWhenIntermediateIsReadElsewhere) {
  RmsForm out;
  out.sqrt_is_output = true;
  ir::Graph g = optimize_and_compare(rms_norm_graph(out), {"rms_norm_fusion"});
  EXPECT_EQ(count_op(g, "RMSNormalization"), 0);
  EXPECT_EQ(count_op(g, "Sqrt"), 1);
  RmsForm second;
  second.mean_second_reader = true;
  g = optimize_and_compare(rms_norm_graph(second), {"rms_norm_fusion"});
  EXPECT_EQ(count_op(g, "RMSNormalization"), 0);
  EXPECT_EQ(count_op(g, "ReduceMean"), 1);
}

TEST(RmsNormFusion, NotForFloat64) {
  RmsForm f;
  f.dtype = DType::kFloat64;
  f.gamma = false;
  ir::Graph g = optimize_and_compare(rms_norm_graph(f), {"rms_norm_fusion"});
  EXPECT_EQ(count_op(g, "RMSNormalization"), 0);
}

TEST(RmsNormFusion, LayerNormStaysLayerNormAtO2) {
  ir::Graph g = optimize_level(layer_norm_graph(false), 2, 1e-4);
  EXPECT_EQ(count_op(g, "LayerNormalization"), 1);
  EXPECT_EQ(count_op(g, "RMSNormalization"), 0);
  g = optimize_level(rms_norm_graph({}), 2, 1e-5);
  EXPECT_EQ(count_op(g, "RMSNormalization"), 1);
  EXPECT_EQ(g.nodes.size(), 1u);
}

// --- elementwise_chain_fusion ----------------------------------------------

ir::Node& clip(GraphBuilder& b, const std::string& x, float lo, float hi) {
  return b.node("Clip", {x, b.scalar("lo" + x, lo), b.scalar("hi" + x, hi)});
}

// Every step op, immediates on both sides, tensor operands (one read twice).
BuildFn long_chain_graph() {
  return [] {
    GraphBuilder b;
    auto x = b.input("x", {2, 3, 13});
    auto y = b.input("y", {2, 3, 13});
    auto z = b.input("z", {2, 3, 13});
    auto v = b.op("Mul", {x, b.scalar("half", 0.5f)});
    v = b.op("Add", {v, y});
    v = b.op("Sub", {b.scalar("one", 1.0f), v});
    v = clip(b, v, -0.75f, 6.0f).outputs[0];
    auto& leaky = b.node("LeakyRelu", {v});
    leaky.attributes["alpha"] = float_attr("alpha", 0.2f);
    v = b.op("HardSwish", {leaky.outputs[0]});
    v = b.op("Max", {v, b.scalar("floor", 0.05f)});
    v = b.op("Abs", {b.op("Neg", {v})});
    v = b.op("Div", {z, b.op("Sqrt", {v})});
    v = b.op("Erf", {b.op("Exp", {b.op("Sigmoid", {b.op("Tanh", {v})})})});
    v = b.op("Relu", {b.op("Min", {y, v})});
    b.output(v);
    return b.build();
  };
}

TEST(ElementwiseChainFusion, FusesEveryStepKindIntoOneNode) {
  // The fused reference kernel rounds each step as the unfused reference ops
  // do: exact.
  ir::Graph g = optimize_and_compare(long_chain_graph(), {"elementwise_chain_fusion"}, 0.0);
  ASSERT_EQ(g.nodes.size(), 1u);
  const ir::Node& n = *g.nodes[0];
  EXPECT_EQ(n.op_type, "ElementwiseChain");
  EXPECT_EQ(n.domain, "peregrine");
  EXPECT_EQ(n.inputs, (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(n.attribute("ops")->strings.size(), 17u);
}

BuildFn two_step_graph(bool relu_second_reader, bool relu_is_output, DType dtype) {
  return [=] {
    GraphBuilder b;
    auto x = b.input("x", {3, 7}, dtype);
    auto r = b.op("Relu", {x});
    b.output(b.op("Tanh", {b.op("Exp", {r})}));
    if (relu_second_reader) b.output(b.op("Neg", {r}));
    if (relu_is_output) b.output(r);
    return b.build();
  };
}

TEST(ElementwiseChainFusion, StopsAtSecondConsumerAndGraphOutput) {
  ir::Graph g = optimize_and_compare(two_step_graph(false, false, DType::kFloat32),
                                     {"elementwise_chain_fusion"});
  EXPECT_EQ(g.nodes.size(), 1u);
  for (bool second : {true, false}) {
    g = optimize_and_compare(two_step_graph(second, !second, DType::kFloat32),
                             {"elementwise_chain_fusion"});
    // Relu stays; Exp -> Tanh still fuse.
    EXPECT_EQ(count_op(g, "Relu"), 1);
    EXPECT_EQ(count_op(g, "ElementwiseChain"), 1);
    EXPECT_EQ(count_op(g, "Exp"), 0);
  }
}

TEST(ElementwiseChainFusion, NotForFloat64) {
  ir::Graph g = optimize_and_compare(two_step_graph(false, false, DType::kFloat64),
                                     {"elementwise_chain_fusion"});
  EXPECT_EQ(count_op(g, "ElementwiseChain"), 0);
  EXPECT_EQ(g.nodes.size(), 3u);
}

TEST(ElementwiseChainFusion, RefusesBroadcastOperandsAndUnknownShapes) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {2, 3, 4});
    // A per-channel constant: broadcast, refused.
    b.output(b.op("Relu", {b.op("Add", {x, b.random("bias", {4}, 2)})}));
    // A broadcast tensor input: refused.
    auto row = b.input("row", {1, 4});
    auto full = b.input("full", {3, 4});
    b.output(b.op("Sigmoid", {b.op("Mul", {row, full})}));
    // A one-element constant of higher rank than the chain would broadcast it
    // up: refused.
    auto v = b.input("v", {5});
    b.output(
        b.op("Exp", {b.op("Sub", {v, b.constant("c", Tensor::zeros(DType::kFloat32, {1, 1}))})}));
    // A dynamic dim: refused.
    auto d = b.input("d", {-1, 4});
    b.output(b.op("Tanh", {b.op("Relu", {d})}));
    return b.build();
  };
  ir::Graph before = build();
  ir::Graph g = build();
  auto pass = passes::make_elementwise_chain_fusion();
  auto changed = pass->run(g);
  ASSERT_TRUE(changed.is_ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(g.nodes.size(), before.nodes.size());
  EXPECT_EQ(count_op(g, "ElementwiseChain"), 0);
}

TEST(ElementwiseChainFusion, LeavesGeluAndFusedActivationsToTheirPassesAtO2) {
  auto build = [] {
    GraphBuilder b(20);
    auto x = b.input("x", {2, 8});
    auto e = b.op("Erf", {b.op("Div", {x, b.scalar("sqrt2", 1.4142135f)})});
    auto gelu = b.op(
        "Mul", {b.op("Mul", {x, b.op("Add", {e, b.scalar("one", 1)})}), b.scalar("half", 0.5f)});
    auto mm = b.op("MatMul", {gelu, b.random("w", {8, 8}, 5)});
    auto t = b.op("Tanh", {b.op("Relu", {mm})});  // Relu goes into the MatMul
    b.output(b.op("Exp", {b.op("Mul", {t, b.scalar("k", 0.5f)})}));
    return b.build();
  };
  ir::Graph g = optimize_level(build, 2, 1e-5);
  EXPECT_EQ(count_op(g, "Gelu"), 1);
  EXPECT_EQ(count_op(g, "FusedMatMul"), 1);
  ASSERT_EQ(count_op(g, "ElementwiseChain"), 1);
  EXPECT_EQ(g.nodes.size(), 3u);
}

// --- move_transposes ---------------------------------------------------------

ir::Node& transpose(GraphBuilder& b, const std::string& x, std::vector<int64_t> perm) {
  auto& t = b.node("Transpose", {x});
  t.attributes["perm"] = ints_attr("perm", std::move(perm));
  return t;
}

TEST(MoveTransposes, InversePairAroundReluCollapsesToRelu) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {2, 3, 5});
    auto r = b.op("Relu", {transpose(b, x, {0, 2, 1}).outputs[0]});
    auto s = b.op("Mul", {b.scalar("k", 0.5f), r});  // scalar binary: moves too
    b.output(transpose(b, s, {0, 2, 1}).outputs[0]);
    return b.build();
  };
  ir::Graph g = optimize_and_compare(
      build, {"move_transposes", "collapse_transpose_chains", "dead_code_elimination"}, 0.0);
  EXPECT_EQ(count_op(g, "Transpose"), 0);
  EXPECT_EQ(count_op(g, "Relu"), 1);
  EXPECT_EQ(g.nodes.size(), 2u);
  // At -O2 the Relu -> Mul run that is left becomes one chain.
  g = optimize_level(build, 2, 0.0);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0]->op_type, "ElementwiseChain");
}

TEST(MoveTransposes, ComposesNonInversePairs) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {2, 3, 5});
    auto r = b.op("Sigmoid", {transpose(b, x, {1, 0, 2}).outputs[0]});
    b.output(transpose(b, r, {2, 1, 0}).outputs[0]);
    return b.build();
  };
  ir::Graph g = optimize_and_compare(
      build, {"move_transposes", "collapse_transpose_chains", "dead_code_elimination"}, 0.0);
  EXPECT_EQ(count_op(g, "Transpose"), 1);
  EXPECT_EQ(g.nodes.size(), 2u);
}

TEST(MoveTransposes, LeavesSharedTransposesAndOtherReadersAlone) {
  auto build = [] {
    GraphBuilder b;
    auto x = b.input("x", {2, 3, 5});
    auto t = transpose(b, x, {0, 2, 1}).outputs[0];
    b.output(transpose(b, b.op("Relu", {t}), {0, 2, 1}).outputs[0]);
    b.output(b.op("Exp", {t}));  // a second reader of the transpose
    // A broadcast (non-scalar) operand and a Reshape reader: the transposes
    // stay.
    auto u = transpose(b, x, {2, 1, 0}).outputs[0];
    b.output(b.op("Add", {u, b.random("bias", {2}, 4)}));
    auto v = transpose(b, x, {1, 0, 2}).outputs[0];
    b.output(b.op("Reshape", {v, b.ints("shape", {30})}));
    return b.build();
  };
  ir::Graph before = build();
  ir::Graph g = optimize_and_compare(build, {"move_transposes"});
  EXPECT_EQ(count_op(g, "Transpose"), count_op(before, "Transpose"));
  for (const auto& n : g.nodes)
    if (n->op_type == "Relu" || n->op_type == "Exp") {
      EXPECT_NE(g.find_value(n->inputs[0])->type.dims, (Shape{2, 3, 5})) << n->op_type;
    }
}

// --- pipeline --------------------------------------------------------------

TEST(Pipelines, LevelsAndDisabling) {
  auto o0 = passes::pipeline_pass_names(0, {});
  ASSERT_TRUE(o0.is_ok());
  EXPECT_TRUE(o0->empty());
  auto o2 = passes::pipeline_pass_names(2, {"fuse_activation"});
  ASSERT_TRUE(o2.is_ok());
  EXPECT_EQ(std::count(o2->begin(), o2->end(), "fuse_activation"), 0);
  EXPECT_GT(std::count(o2->begin(), o2->end(), "gelu_fusion"), 0);
  EXPECT_FALSE(passes::pipeline_pass_names(2, {"no_such_pass"}).is_ok());
  EXPECT_FALSE(passes::pipeline_pass_names(7, {}).is_ok());
}

TEST(Pipelines, O2OnResidualBlock) {
  ir::Graph g = optimize_level(conv_bn_graph(false), 2, 1e-4);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0]->op_type, "FusedConv");
}

}  // namespace
}  // namespace peregrine::testing
