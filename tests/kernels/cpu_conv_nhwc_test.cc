// peregrine.ConvNhwc and the NCHW <-> NHWC Transposes through the CPU backend against the
// reference backend, on odd shapes: 1x1 (one GEMM), strided / padded / dilated (im2col),
// depthwise, residual Z, activations, channel counts off the vector width (1, 7, 13, 127),
// empty batches; 1, 2 and 3 threads. The kernels use the selected ISA: run the suite again with
// PEREGRINE_ISA=scalar for the scalar level.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/reference/reference_backend.h"
#include "cpu_one_node_graph.h"
#include "cpu_test_util.h"
#include "ir/graph.h"
#include "ops/type_inference.h"
#include "runtime/executor.h"

namespace peregrine {
namespace {

using cpu::testing::compare_with_reference;
using cpu::testing::OneNodeGraph;
using cpu::testing::random_tensor;

ir::Attribute ints(const std::string& name, std::vector<int64_t> v) {
  return cpu::testing::ints_attr(name, std::move(v));
}

void compare_backends(OneNodeGraph& g, const std::string& kernel_prefix, float tol = 1e-4f) {
  compare_with_reference(g, cpu_backend(), kernel_prefix, tol);
}

struct Case {
  int64_t n, h, w, c, out_c, kh, kw, group;
  std::vector<int64_t> strides = {1, 1}, pads = {0, 0, 0, 0}, dilations = {1, 1};
  bool bias = true;
  bool residual = false;
  std::string activation;
};

void check(const Case& cc) {
  SCOPED_TRACE("n=" + std::to_string(cc.n) + " hw=" + std::to_string(cc.h) + "x" +
               std::to_string(cc.w) + " c=" + std::to_string(cc.c) +
               " oc=" + std::to_string(cc.out_c) + " k=" + std::to_string(cc.kh) + "x" +
               std::to_string(cc.kw) + " group=" + std::to_string(cc.group) +
               " act=" + cc.activation + " z=" + std::to_string(cc.residual));
  const int64_t oh =
      (cc.h + cc.pads[0] + cc.pads[2] - cc.dilations[0] * (cc.kh - 1) - 1) / cc.strides[0] + 1;
  const int64_t ow =
      (cc.w + cc.pads[1] + cc.pads[3] - cc.dilations[1] * (cc.kw - 1) - 1) / cc.strides[1] + 1;
  std::vector<std::pair<std::string, Tensor>> inputs = {
      {"X", random_tensor({cc.n, cc.h, cc.w, cc.c}, 1)},
      {"W", random_tensor({cc.out_c, cc.c / cc.group, cc.kh, cc.kw}, 2)}};
  std::vector<bool> constant = {false, true};
  inputs.push_back({cc.bias ? "B" : "", cc.bias ? random_tensor({cc.out_c}, 3) : Tensor()});
  constant.push_back(true);
  if (cc.residual) {
    inputs.push_back({"Z", random_tensor({cc.n, oh, ow, cc.out_c}, 4)});
    constant.push_back(false);
  }
  if (!cc.bias && !cc.residual) {
    inputs.pop_back();
    constant.pop_back();
  }
  std::vector<ir::Attribute> attrs = {ints("strides", cc.strides), ints("pads", cc.pads),
                                      ints("dilations", cc.dilations)};
  ir::Attribute group;
  group.name = "group";
  group.type = ir::Attribute::Type::kInt;
  group.i = cc.group;
  attrs.push_back(group);
  if (!cc.activation.empty()) {
    ir::Attribute act;
    act.name = "activation";
    act.type = ir::Attribute::Type::kString;
    act.s = cc.activation;
    attrs.push_back(act);
    if (cc.activation == "Clip") {
      ir::Attribute p;
      p.name = "activation_params";
      p.type = ir::Attribute::Type::kFloats;
      p.floats = {0.0f, 6.0f};
      attrs.push_back(p);
    }
  }
  OneNodeGraph g("ConvNhwc", inputs, constant, attrs, "peregrine");
  compare_backends(g, cc.group > 1 ? "cpu/conv_nhwc_depthwise" : "cpu/conv_nhwc");
}

TEST(CpuConvNhwc, PointwiseMatchesReference) {
  check({1, 7, 9, 8, 13, 1, 1, 1});
  check({2, 5, 3, 1, 7, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, false});
  check({1, 13, 13, 127, 17, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, true, true, "Relu"});
  check({1, 6, 5, 33, 130, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, true, false, "Clip"});
  check({0, 4, 4, 3, 5, 1, 1, 1});  // empty batch
}

TEST(CpuConvNhwc, Im2colMatchesReference) {
  check({1, 9, 8, 5, 6, 1, 1, 1, {2, 2}});  // strided 1x1
  check({1, 6, 6, 5, 4, 1, 1, 1, {1, 1}, {1, 0, 0, 1}});
  check({1, 13, 11, 3, 17, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, true, "Relu"});
  check({2, 15, 14, 4, 7, 3, 3, 1, {2, 2}, {1, 1, 1, 1}});
  check({1, 16, 13, 3, 5, 3, 3, 1, {1, 2}, {2, 1, 0, 2}, {2, 3}, false, false, "SiLU"});
  check({1, 9, 9, 2, 3, 5, 3, 1, {3, 1}});
  check({1, 12, 12, 40, 160, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, true, "LeakyRelu"});
  // Several im2col blocks: K * pixels above the 1 Mi-float bound.
  check({1, 40, 50, 64, 8, 3, 3, 1, {1, 1}, {1, 1, 1, 1}});
}

TEST(CpuConvNhwc, DepthwiseMatchesReference) {
  check({1, 11, 13, 7, 7, 3, 3, 7, {1, 1}, {1, 1, 1, 1}});
  check({2, 12, 9, 13, 13, 3, 3, 13, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, false, "Clip"});
  check({1, 10, 10, 1, 1, 3, 3, 1});  // one channel: group 1, the GEMM path
  check({1, 10, 10, 8, 8, 3, 3, 8, {1, 1}, {2, 2, 2, 2}, {2, 2}, false, true, "Relu"});
  check({1, 9, 17, 127, 127, 5, 5, 127, {2, 3}, {2, 1, 0, 2}});
  check({1, 5, 5, 3, 3, 5, 5, 3, {1, 1}, {0, 0, 0, 0}, {1, 1}, true, true, "HardSwish"});
}

TEST(CpuTransposeNchwNhwc, MatchesReference) {
  for (const Shape& s : {Shape{1, 1, 1, 1}, Shape{1, 7, 13, 5}, Shape{2, 33, 9, 40},
                         Shape{1, 127, 3, 1}, Shape{0, 3, 4, 5}, Shape{3, 64, 33, 31}}) {
    for (std::vector<int64_t> perm : {std::vector<int64_t>{0, 2, 3, 1}, {0, 3, 1, 2}}) {
      SCOPED_TRACE(shape_to_string(s) + (perm[1] == 2 ? " to nhwc" : " to nchw"));
      OneNodeGraph g("Transpose", {{"X", random_tensor(s, 5)}}, {false}, {ints("perm", perm)});
      compare_backends(g, "cpu/transpose_", 0.0f);
    }
  }
}

}  // namespace
}  // namespace peregrine
