// Weights a kernel has packed are freed after session creation (peak memory holds one copy),
// and only those: a constant some other reader needs keeps its data, and outputs match the
// reference backend, which packs nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/ukernels/f32_conv2d_grouped_ukernels.h"
#include "importer/onnx/onnx_exporter.h"
#include "passes/graph_builder.h"
#include "peregrine/session.h"
#include "runtime/session_internals.h"

namespace peregrine {
namespace {

std::string save(ir::Graph g, const std::string& tag) {
  ir::Model model;
  model.ir_version = 8;
  model.graph = std::move(g);
  std::string path = (std::filesystem::temp_directory_path() /
                      ("peregrine_weights_test_" + tag + std::to_string(::getpid()) + ".onnx"))
                         .string();
  Status st = save_onnx_model(model, path, /*overwrite=*/true);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return path;
}

std::unique_ptr<Session> load(const std::string& path, const std::string& backend) {
  SessionOptions options;
  options.backend = backend;
  options.opt_level = 0;  // the ops as written
  auto s = Session::load(path, options);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return s.is_ok() ? std::move(s).value() : nullptr;
}

const std::optional<Tensor>& initializer(const Session& s, const std::string& name) {
  return session_model(s).graph.values.at(name).initializer;
}

// Saves `g` (peregrine-domain ops at opset 1), loads it on the CPU and reference backends,
// expects the CPU session to have freed initializer `freed`, and compares one run of each.
void expect_freed_and_matching(ir::Graph g, const std::string& tag, const std::string& freed,
                               const std::map<std::string, Tensor>& feeds) {
  g.opsets["peregrine"] = 1;
  const std::string path = save(std::move(g), tag);
  auto cpu = load(path, "cpu");
  auto ref = load(path, "reference");
  std::filesystem::remove(path);
  ASSERT_TRUE(cpu && ref);
  EXPECT_EQ(initializer(*cpu, freed)->data<float>(), nullptr) << "packed weight kept";
  auto got = cpu->run(feeds);
  auto want = ref->run(feeds);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  ASSERT_TRUE(want.is_ok()) << want.status().message();
  testing::expect_close({got->begin()->second}, {want->begin()->second}, 1e-4f);
}

// y = MatMul(MatMul(x, W1), W2): both weights are packed by their kernels and freed.
TEST(SessionWeights, PackedWeightsAreFreedOthersKept) {
  testing::GraphBuilder b;
  std::string x = b.input("x", {5, 24});
  std::string w1 = b.constant("W1", testing::random_tensor({24, 24}, 3));
  std::string w2 = b.constant("W2", testing::random_tensor({24, 24}, 4));
  std::string h = b.op("MatMul", {x, w1});
  std::string y = b.op("MatMul", {h, w2});
  b.output(y);
  const std::string path = save(b.build(), "a");
  auto cpu = load(path, "cpu");
  auto ref = load(path, "reference");
  std::filesystem::remove(path);
  ASSERT_TRUE(cpu && ref);

  EXPECT_EQ(initializer(*cpu, "W1")->data<float>(), nullptr) << "packed weight kept";
  EXPECT_EQ(initializer(*cpu, "W2")->data<float>(), nullptr) << "packed weight kept";
  EXPECT_EQ(initializer(*cpu, "W1")->shape(), (Shape{24, 24})) << "shape must stay readable";
  EXPECT_NE(initializer(*ref, "W1")->data<float>(), nullptr);

  const Tensor in = testing::random_tensor({5, 24}, 9);
  for (int run = 0; run < 2; ++run) {  // a second run reads nothing freed either
    auto got = cpu->run({{"x", in}});
    auto want = ref->run({{"x", in}});
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    ASSERT_TRUE(want.is_ok()) << want.status().message();
    testing::expect_close({got->begin()->second}, {want->begin()->second}, 1e-4f);
  }
}

// A freed weight still serves the reference fallback: a FusedMatMul whose Z is neither a
// residual of the output's shape nor a row of biases (here a column, (M, 1)) runs the reference
// kernel on B unpacked from the packed copy.
TEST(SessionWeights, FallbackAfterFreeingUnpacksTheWeight) {
  testing::GraphBuilder b;
  std::string x = b.input("x", {5, 24});
  std::string w = b.constant("W", testing::random_tensor({24, 20}, 6));
  std::string z = b.input("z", {5, 1});
  b.node("FusedMatMul", {x, w, z}, {"y"}, "peregrine").opset = 1;
  b.output("y");
  expect_freed_and_matching(
      b.build(), "c", "W",
      {{"x", testing::random_tensor({5, 24}, 12)}, {"z", testing::random_tensor({5, 1}, 13)}});
}

// The same for a convolution's weights (a 1x1 conv: GEMM path, no Winograd copy): freed, and a
// FusedConv whose Z broadcasts (1, Cout, 1, 1) falls back on weights unpacked per group (or,
// for the direct grouped kernel, on W kept).
TEST(SessionWeights, ConvFallbackAfterFreeingUnpacksTheWeights) {
  for (int64_t group : {1, 2}) {
    SCOPED_TRACE("group=" + std::to_string(group));
    testing::GraphBuilder b;
    std::string x = b.input("x", {1, 6, 5, 7});
    std::string w = b.constant("W", testing::random_tensor({10, 6 / group, 1, 1}, 7));
    std::string bias = b.constant("B", testing::random_tensor({10}, 8));
    std::string z = b.input("z", {1, 10, 1, 1});
    ir::Node& n = b.node("FusedConv", {x, w, bias, z}, {"y"}, "peregrine");
    n.opset = 1;
    n.attributes["group"] = testing::int_attr("group", group);
    b.output("y");
    ir::Graph g = b.build();
    g.opsets["peregrine"] = 1;
    const std::string path = save(std::move(g), "d");
    auto cpu = load(path, "cpu");
    auto ref = load(path, "reference");
    std::filesystem::remove(path);
    ASSERT_TRUE(cpu && ref);
    // Narrow groups on the direct grouped kernel read W as it is: nothing packed, W kept.
    const bool direct =
        group > 1 && cpu::f32_conv2d_grouped_ukernel_for(cpu::f32_gemm_kernel().isa);
    if (direct)
      EXPECT_NE(initializer(*cpu, "W")->data<float>(), nullptr) << "the direct kernel's W freed";
    else
      EXPECT_EQ(initializer(*cpu, "W")->data<float>(), nullptr) << "packed weight kept";
    EXPECT_NE(initializer(*cpu, "B")->data<float>(), nullptr) << "the bias is read as data";
    const Tensor in = testing::random_tensor({1, 6, 5, 7}, 14);
    const Tensor zv = testing::random_tensor({1, 10, 1, 1}, 15);
    auto got = cpu->run({{"x", in}, {"z", zv}});
    auto want = ref->run({{"x", in}, {"z", zv}});
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    ASSERT_TRUE(want.is_ok()) << want.status().message();
    testing::expect_close({got->begin()->second}, {want->begin()->second}, 1e-4f);
  }
}

// The same for Gemm (transB = 0 and 1): the packed op(B) replaces B, and a FusedGemm whose Z
// (no C) broadcasts as a column (M, 1) falls back on B restored in its stored layout.
TEST(SessionWeights, GemmFallbackAfterFreeingRestoresB) {
  for (int64_t trans_b : {0, 1}) {
    SCOPED_TRACE("transB=" + std::to_string(trans_b));
    testing::GraphBuilder b;
    std::string x = b.input("x", {5, 24});
    std::string w =
        b.constant("W", testing::random_tensor(trans_b ? Shape{20, 24} : Shape{24, 20}, 6));
    std::string z = b.input("z", {5, 1});
    ir::Node& n = b.node("FusedGemm", {x, w, "", z}, {"y"}, "peregrine");
    n.opset = 1;
    n.attributes["transB"] = testing::int_attr("transB", trans_b);
    b.output("y");
    expect_freed_and_matching(
        b.build(), "e", "W",
        {{"x", testing::random_tensor({5, 24}, 12)}, {"z", testing::random_tensor({5, 1}, 13)}});
  }
}

// A weight that another kernel reads as data (here a Sub) is not freed.
TEST(SessionWeights, WeightWithAnotherReaderKeepsItsData) {
  testing::GraphBuilder b;
  std::string x = b.input("x", {24, 24});
  std::string w = b.constant("W", testing::random_tensor({24, 24}, 5));
  std::string m = b.op("MatMul", {x, w});
  std::string d = b.op("Sub", {m, w});
  b.output(d);
  const std::string path = save(b.build(), "b");
  auto cpu = load(path, "cpu");
  auto ref = load(path, "reference");
  std::filesystem::remove(path);
  ASSERT_TRUE(cpu && ref);
  EXPECT_NE(initializer(*cpu, "W")->data<float>(), nullptr);
  const Tensor in = testing::random_tensor({24, 24}, 11);
  auto got = cpu->run({{"x", in}});
  auto want = ref->run({{"x", in}});
  ASSERT_TRUE(got.is_ok() && want.is_ok());
  testing::expect_close({got->begin()->second}, {want->begin()->second}, 1e-4f);
}

}  // namespace
}  // namespace peregrine
