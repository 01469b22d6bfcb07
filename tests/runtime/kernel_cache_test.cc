// Sessions of one model compiled for different input shapes share prepared kernels through a
// KernelCache: the second session reuses every kernel whose node and constants match, and
// computes what the reference backend computes; different weights or a subgraph never match.
#include "runtime/kernel_cache.h"

#include <gtest/gtest.h>

#include "passes/graph_builder.h"
#include "passes/pass_util.h"
#include "peregrine/session.h"
#include "runtime/session_internals.h"

namespace peregrine {
namespace {

// y = Relu(Conv3x3(x, W, B)) + C, with x's batch and spatial dims symbolic.
ir::Model conv_model(uint64_t weight_seed) {
  testing::GraphBuilder b;
  std::string x = b.input("x", {-1, 3, -1, -1});
  std::string w = b.constant("W", testing::random_tensor({8, 3, 3, 3}, weight_seed));
  std::string bias = b.constant("B", testing::random_tensor({8}, 2));
  ir::Node& conv = b.node("Conv", {x, w, bias});
  conv.attributes["kernel_shape"] = passes::ints_attr("kernel_shape", {3, 3});
  conv.attributes["pads"] = passes::ints_attr("pads", {1, 1, 1, 1});
  std::string r = b.op("Relu", {conv.outputs[0]});
  std::string c = b.constant("C", testing::random_tensor({1, 8, 1, 1}, 3));
  b.output(b.op("Add", {r, c}));
  ir::Model m;
  m.ir_version = 8;
  m.graph = b.build();
  return m;
}

std::unique_ptr<Session> compile(ir::Model model, Shape x_shape, const std::string& backend,
                                 std::shared_ptr<KernelCache> cache) {
  SessionOptions options;
  options.backend = backend;
  options.input_shapes["x"] = std::move(x_shape);
  options.kernel_cache = std::move(cache);
  auto s = session_from_model(std::move(model), options);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return s.is_ok() ? std::move(s).value() : nullptr;
}

void expect_matches_reference(Session& s, Shape x_shape) {
  auto ref = compile(conv_model(1), x_shape, "reference", nullptr);
  ASSERT_TRUE(ref);
  const std::map<std::string, Tensor> feeds = {{"x", testing::random_tensor(x_shape, 9)}};
  auto got = s.run(feeds);
  auto want = ref->run(feeds);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  ASSERT_TRUE(want.is_ok()) << want.status().message();
  testing::expect_close({got->begin()->second}, {want->begin()->second}, 1e-4f);
}

TEST(KernelCache, SecondShapeReusesEveryKernel) {
  std::shared_ptr<KernelCache> cache = make_kernel_cache();
  auto first = compile(conv_model(1), {1, 3, 9, 7}, "cpu", cache);
  ASSERT_TRUE(first);
  const int64_t kernels = cache->kernels();
  EXPECT_GE(kernels, 2);  // the fused conv and the Add
  EXPECT_EQ(cache->hits(), 0);
  auto second = compile(conv_model(1), {2, 3, 13, 6}, "cpu", cache);
  ASSERT_TRUE(second);
  EXPECT_EQ(cache->hits(), kernels) << "every node of the second plan matches one of the first";
  EXPECT_EQ(cache->kernels(), kernels);
  // Runs of either plan, in any order, on the one set of kernels.
  expect_matches_reference(*second, {2, 3, 13, 6});
  expect_matches_reference(*first, {1, 3, 9, 7});
  expect_matches_reference(*second, {2, 3, 13, 6});
}

TEST(KernelCache, DifferentWeightsDoNotMatch) {
  std::shared_ptr<KernelCache> cache = make_kernel_cache();
  auto first = compile(conv_model(1), {1, 3, 8, 8}, "cpu", cache);
  auto other = compile(conv_model(5), {1, 3, 8, 8}, "cpu", cache);
  ASSERT_TRUE(first && other);
  // The conv's weights differ; the Add (same constant C) is shared.
  EXPECT_EQ(cache->hits(), 1);
  expect_matches_reference(*first, {1, 3, 8, 8});
}

TEST(KernelCache, KernelsOfDroppedSessionsAreReleased) {
  std::shared_ptr<KernelCache> cache = make_kernel_cache();
  auto first = compile(conv_model(1), {1, 3, 8, 8}, "cpu", cache);
  ASSERT_TRUE(first);
  const int64_t kernels = cache->kernels();
  first.reset();
  auto other = compile(conv_model(5), {1, 3, 8, 8}, "cpu", cache);
  ASSERT_TRUE(other);
  EXPECT_EQ(cache->hits(), 0);
  EXPECT_EQ(cache->kernels(), kernels) << "the first model's kernels stayed cached";
}

TEST(KernelCache, KeysTellNodesApart) {
  ir::Node node;
  node.op_type = "Relu";
  node.inputs = {"x"};
  node.outputs = {"y"};
  const std::vector<ir::ValueType> types = {ir::ValueType::tensor(DType::kFloat32, {2, 3})};
  const auto relu = KernelCache::key_of("cpu", node, types, {nullptr});
  ASSERT_TRUE(relu.has_value());
  // Shapes of non-constant inputs do not matter; dtypes, backends and attributes do.
  EXPECT_EQ(
      KernelCache::key_of("cpu", node, {ir::ValueType::tensor(DType::kFloat32, {7})}, {nullptr}),
      relu);
  EXPECT_NE(
      KernelCache::key_of("cpu", node, {ir::ValueType::tensor(DType::kFloat64, {2, 3})}, {nullptr}),
      relu);
  EXPECT_NE(KernelCache::key_of("reference", node, types, {nullptr}), relu);
  node.op_type = "LeakyRelu";
  const auto leaky = KernelCache::key_of("cpu", node, types, {nullptr});
  node.attributes["alpha"] = passes::float_attr("alpha", 0.2f);
  EXPECT_NE(KernelCache::key_of("cpu", node, types, {nullptr}), leaky);
  // A node with a subgraph is never shared.
  ir::Attribute body;
  body.name = "then_branch";
  body.type = ir::Attribute::Type::kGraph;
  body.g = std::make_shared<ir::Graph>();
  node.attributes["then_branch"] = body;
  EXPECT_FALSE(KernelCache::key_of("cpu", node, types, {nullptr}).has_value());
}

TEST(KernelCache, DigestSeesEveryByte) {
  std::vector<uint8_t> bytes(1037);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  const std::string base = digest_bytes(bytes.data(), bytes.size());
  EXPECT_EQ(base, digest_bytes(bytes.data(), bytes.size()));
  EXPECT_NE(base, digest_bytes(bytes.data(), bytes.size() - 1));
  for (size_t i : {size_t{0}, size_t{511}, size_t{1032}, size_t{1036}}) {
    bytes[i] ^= 1;
    EXPECT_NE(base, digest_bytes(bytes.data(), bytes.size())) << "byte " << i;
    bytes[i] ^= 1;
  }
}

}  // namespace
}  // namespace peregrine
