// Conv, MatMul and Gemm through the CPU backend against the reference backend, on odd
// shapes: groups, depthwise, strides, pads, dilations, 1x1; constant and run-time weights;
// 1, 2 and 3 threads, at every ISA level is covered by the GEMM tests (these use the selected one).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/reference/reference_backend.h"
#include "cpu_one_node_graph.h"
#include "cpu_test_util.h"
#include "ir/graph.h"
#include "ops/type_inference.h"
#include "runtime/executor.h"

namespace peregrine {
namespace {

using cpu::testing::expect_close;
using cpu::testing::float_attr;
using cpu::testing::int_attr;
using cpu::testing::ints_attr;
using cpu::testing::OneNodeGraph;
using cpu::testing::random_floats;
using cpu::testing::random_tensor;
using cpu::testing::ScopedConvAlgo;

// Runs `g` on the CPU backend at 1..3 threads and on the reference backend; compares. The
// kernel's name must start with `prefix`.
void compare_backends(OneNodeGraph& g, float tol = 1e-4f, const std::string& prefix = "cpu/") {
  compare_with_reference(g, cpu_backend(), prefix, tol);
}

struct ConvCase {
  int64_t n, c, h, w, out_c, kh, kw, group;
  std::vector<int64_t> strides = {1, 1}, pads = {0, 0, 0, 0}, dilations = {1, 1};
  bool bias = true;
  bool constant_weights = true;
  std::string auto_pad;
};

void check_conv(const ConvCase& cc) {
  SCOPED_TRACE("conv n=" + std::to_string(cc.n) + " c=" + std::to_string(cc.c) +
               " hw=" + std::to_string(cc.h) + "x" + std::to_string(cc.w) +
               " oc=" + std::to_string(cc.out_c) + " k=" + std::to_string(cc.kh) + "x" +
               std::to_string(cc.kw) + " group=" + std::to_string(cc.group) +
               " const=" + std::to_string(cc.constant_weights));
  std::vector<std::pair<std::string, Tensor>> inputs = {
      {"X", random_tensor({cc.n, cc.c, cc.h, cc.w}, 1)},
      {"W", random_tensor({cc.out_c, cc.c / cc.group, cc.kh, cc.kw}, 2)}};
  std::vector<bool> constant = {false, cc.constant_weights};
  if (cc.bias) {
    inputs.push_back({"B", random_tensor({cc.out_c}, 3)});
    constant.push_back(true);
  }
  std::vector<ir::Attribute> attrs = {ints_attr("strides", cc.strides),
                                      ints_attr("dilations", cc.dilations),
                                      int_attr("group", cc.group)};
  if (cc.auto_pad.empty()) {
    attrs.push_back(ints_attr("pads", cc.pads));
  } else {
    ir::Attribute a;
    a.name = "auto_pad";
    a.type = ir::Attribute::Type::kString;
    a.s = cc.auto_pad;
    attrs.push_back(a);
  }
  OneNodeGraph g("Conv", inputs, constant, attrs);
  compare_backends(g);
}

TEST(CpuConv, MatchesReference) {
  // 1x1 stride 1 (direct GEMM), with and without bias / constant weights.
  check_conv({1, 8, 7, 9, 13, 1, 1, 1});
  check_conv({2, 3, 5, 5, 7, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, false, false});
  // 1x1 strided and padded: im2col.
  check_conv({1, 5, 9, 8, 6, 1, 1, 1, {2, 2}});
  check_conv({1, 5, 6, 6, 4, 1, 1, 1, {1, 1}, {1, 0, 0, 1}});
  // 3x3 with pads, strides, dilations, odd sizes.
  check_conv({1, 3, 13, 11, 17, 3, 3, 1, {1, 1}, {1, 1, 1, 1}});
  check_conv({2, 4, 15, 14, 7, 3, 3, 1, {2, 2}, {1, 1, 1, 1}});
  check_conv({1, 3, 16, 13, 5, 3, 3, 1, {1, 2}, {2, 1, 0, 2}, {2, 3}});
  check_conv({1, 2, 9, 9, 3, 5, 3, 1, {3, 1}, {0, 0, 0, 0}, {1, 1}, true, false});
  check_conv({1, 3, 10, 10, 4, 3, 3, 1, {2, 2}, {}, {1, 1}, true, true, "SAME_UPPER"});
  check_conv({1, 3, 10, 10, 4, 4, 4, 1, {3, 3}, {}, {1, 1}, true, true, "SAME_LOWER"});
  // Grouped.
  check_conv({1, 6, 9, 7, 9, 3, 3, 3, {1, 1}, {1, 1, 1, 1}});
  check_conv({2, 8, 8, 8, 4, 1, 1, 2});
  check_conv({1, 4, 7, 7, 6, 3, 3, 2, {2, 1}, {0, 1, 1, 0}, {1, 1}, false, false});
  // Depthwise (multiplier 1 and 2), strides, pads, dilations.
  check_conv({1, 7, 11, 13, 7, 3, 3, 7, {1, 1}, {1, 1, 1, 1}});
  check_conv({2, 5, 12, 9, 5, 3, 3, 5, {2, 2}, {1, 1, 1, 1}});
  check_conv({1, 4, 10, 10, 8, 3, 3, 4, {1, 1}, {2, 2, 2, 2}, {2, 2}, false, false});
  check_conv({1, 3, 9, 17, 3, 5, 5, 3, {2, 3}, {2, 1, 0, 2}});
  check_conv({1, 3, 5, 5, 3, 5, 5, 3, {1, 1}, {0, 0, 0, 0}});
  // 1x1 depthwise: a per-channel scale and shift.
  check_conv({2, 21, 9, 13, 21, 1, 1, 21});
  check_conv({1, 16, 14, 14, 16, 1, 1, 16});
  // Bigger: K above the GEMM's K block, several M blocks.
  check_conv({1, 40, 12, 12, 160, 3, 3, 1, {1, 1}, {1, 1, 1, 1}});
  // im2col in several column chunks that split output rows (K * pixels above the bound).
  check_conv({1, 64, 40, 50, 8, 3, 3, 1, {1, 1}, {1, 1, 1, 1}});
  check_conv({1, 64, 81, 79, 3, 3, 3, 1, {2, 2}, {1, 0, 2, 1}});
}

TEST(CpuMatMul, MatchesReference) {
  struct Case {
    Shape a, b;
    bool constant_b;
  };
  for (const Case& c :
       {Case{{7, 13}, {13, 17}, true}, Case{{2, 3, 5, 64}, {64, 33}, true},
        Case{{13}, {13, 9}, true}, Case{{4, 13}, {13}, false}, Case{{3, 7, 19}, {3, 19, 5}, false},
        Case{{2, 1, 6, 8}, {3, 8, 4}, false}, Case{{1, 300}, {300, 40}, true},
        Case{{130, 65}, {65, 70}, false}, Case{{0, 5}, {5, 3}, true}, Case{{4, 0}, {0, 3}, true}}) {
    SCOPED_TRACE("matmul " + shape_to_string(c.a) + " x " + shape_to_string(c.b));
    OneNodeGraph g("MatMul", {{"A", random_tensor(c.a, 1)}, {"Bm", random_tensor(c.b, 2)}},
                   {false, c.constant_b}, {});
    compare_backends(g, 2e-4f);
  }
}

TEST(CpuGemm, MatchesReference) {
  struct Case {
    int64_t m, n, k;
    bool ta, tb;
    float alpha, beta;
    Shape c;
    bool constant_b;
  };
  for (const Case& c :
       {Case{7, 13, 5, false, false, 1, 1, {13}, true},
        Case{7, 13, 5, true, true, 0.5f, 2, {7, 13}, false},
        Case{20, 3, 31, false, true, 1, 1, {20, 1}, true},
        Case{20, 3, 31, true, false, -1, 0.25f, {1, 3}, true},
        Case{5, 6, 7, false, false, 1, 0, {5, 6}, false},
        Case{5, 6, 7, false, false, 2, 1, {}, true}, Case{5, 6, 7, false, false, 1, 1, {1}, true},
        Case{150, 70, 40, false, true, 1, 1, {70}, true}}) {
    SCOPED_TRACE("gemm " + std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
                 std::to_string(c.k) + " C=" + shape_to_string(c.c));
    Shape sa = c.ta ? Shape{c.k, c.m} : Shape{c.m, c.k};
    Shape sb = c.tb ? Shape{c.n, c.k} : Shape{c.k, c.n};
    std::vector<std::pair<std::string, Tensor>> inputs = {{"A", random_tensor(sa, 1)},
                                                          {"Bm", random_tensor(sb, 2)}};
    std::vector<bool> constant = {false, c.constant_b};
    if (!c.c.empty() || c.beta != 0) {
      inputs.push_back({"C", random_tensor(c.c, 3)});
      constant.push_back(true);
    }
    OneNodeGraph g("Gemm", inputs, constant,
                   {int_attr("transA", c.ta), int_attr("transB", c.tb),
                    float_attr("alpha", c.alpha), float_attr("beta", c.beta)});
    compare_backends(g, 2e-4f);
  }
}

ir::Attribute activation_attrs(const std::string& act, std::vector<float> params,
                               std::vector<ir::Attribute>& attrs) {
  ir::Attribute a;
  a.name = "activation";
  a.type = ir::Attribute::Type::kString;
  a.s = act;
  attrs.push_back(a);
  ir::Attribute p;
  p.name = "activation_params";
  p.type = ir::Attribute::Type::kFloats;
  p.floats = std::move(params);
  attrs.push_back(p);
  return a;
}

struct FusedAct {
  std::string name;
  std::vector<float> params;
};
const FusedAct kActs[] = {{"", {}},         {"Relu", {}},          {"Clip", {0.0f, 6.0f}},
                          {"Clip", {}},     {"LeakyRelu", {0.2f}}, {"Sigmoid", {}},
                          {"SiLU", {}},     {"HardSwish", {}},     {"Gelu", {}},
                          {"GeluTanh", {}}, {"Tanh", {}}};

// peregrine.FusedConv = act(Conv + Z): Z of the output's shape is the epilogue's residual;
// a broadcast Z falls back to the reference kernel.
TEST(CpuFusedConv, MatchesReference) {
  struct Case {
    int64_t c, out_c, k, group;
    std::vector<int64_t> strides, pads;
  };
  for (const Case& cc :
       {Case{6, 10, 3, 1, {1, 1}, {1, 1, 1, 1}}, Case{8, 12, 1, 1, {1, 1}, {0, 0, 0, 0}},
        Case{7, 7, 3, 7, {2, 2}, {1, 1, 1, 1}}}) {
    const int64_t h = 11, w = 9;
    const int64_t oh = (h + cc.pads[0] + cc.pads[2] - cc.k) / cc.strides[0] + 1;
    const int64_t ow = (w + cc.pads[1] + cc.pads[3] - cc.k) / cc.strides[1] + 1;
    for (const FusedAct& act : kActs)
      for (int z_kind : {0, 1, 2}) {  // none, full shape, broadcast per channel
        SCOPED_TRACE("fused conv act=" + act.name + " z=" + std::to_string(z_kind) +
                     " group=" + std::to_string(cc.group));
        std::vector<std::pair<std::string, Tensor>> inputs = {
            {"X", random_tensor({2, cc.c, h, w}, 1)},
            {"W", random_tensor({cc.out_c, cc.c / cc.group, cc.k, cc.k}, 2)},
            {"B", random_tensor({cc.out_c}, 3)}};
        std::vector<bool> constant = {false, true, true};
        if (z_kind == 1) inputs.push_back({"Z", random_tensor({2, cc.out_c, oh, ow}, 4)});
        if (z_kind == 2) inputs.push_back({"Z", random_tensor({cc.out_c, 1, 1}, 4)});
        if (z_kind) constant.push_back(false);
        std::vector<ir::Attribute> attrs = {ints_attr("strides", cc.strides),
                                            ints_attr("pads", cc.pads),
                                            int_attr("group", cc.group)};
        activation_attrs(act.name, act.params, attrs);
        OneNodeGraph g("FusedConv", inputs, constant, attrs, "peregrine");
        compare_backends(g, 1e-4f, z_kind == 2 ? "reference (fallback of cpu/conv" : "cpu/");
      }
  }
}

// Column-stride-2 convs forced onto the indirect GEMM (where the selected GEMM kernel has one:
// AVX-512): odd channel counts (partial row tiles), K over several K blocks, output rows of
// 1-41 pixels (column tiles of one or two masked vectors and of single columns), pads, row
// strides, dilations, groups, batches, bias / residual / activations, 1-3 threads.
TEST(CpuConv, IndirectStrideTwoMatchesReference) {
  ScopedConvAlgo algo("indirect");
  const bool has_indirect = cpu::f32_gemm_kernel().indirect_ukernel != nullptr;
  int indirect_runs = 0;
  struct Case {
    int64_t n, c, h, w, out_c, kh, kw, group;
    std::vector<int64_t> strides, pads, dilations;
    std::string act;
    std::vector<float> params;
    bool z;
  };
  for (const Case& cc : {
           Case{1, 3, 33, 81, 17, 7, 7, 1, {2, 2}, {3, 3, 3, 3}, {1, 1}, "Relu", {}, false},
           Case{2, 40, 12, 31, 30, 3, 3, 1, {2, 2}, {1, 1, 1, 1}, {1, 1}, "", {}, true},
           Case{1, 9, 9, 64, 29, 3, 3, 1, {1, 2}, {0, 2, 1, 0}, {1, 1}, "Clip", {0.0f, 6.0f}, true},
           Case{1, 5, 11, 30, 14, 3, 3, 1, {2, 2}, {1, 0, 1, 1}, {2, 3}, "SiLU", {}, false},
           Case{1, 8, 10, 20, 6, 1, 1, 2, {2, 2}, {0, 0, 0, 0}, {1, 1}, "", {}, false},
           Case{1, 4, 3, 2, 3, 3, 3, 1, {2, 2}, {1, 1, 1, 1}, {1, 1}, "Gelu", {}, true},
       }) {
    const int64_t oh =
        (cc.h + cc.pads[0] + cc.pads[2] - (cc.kh - 1) * cc.dilations[0] - 1) / cc.strides[0] + 1;
    const int64_t ow =
        (cc.w + cc.pads[1] + cc.pads[3] - (cc.kw - 1) * cc.dilations[1] - 1) / cc.strides[1] + 1;
    SCOPED_TRACE("indirect conv c=" + std::to_string(cc.c) + " oc=" + std::to_string(cc.out_c) +
                 " out=" + std::to_string(oh) + "x" + std::to_string(ow) + " act=" + cc.act);
    std::vector<std::pair<std::string, Tensor>> inputs = {
        {"X", random_tensor({cc.n, cc.c, cc.h, cc.w}, 1)},
        {"W", random_tensor({cc.out_c, cc.c / cc.group, cc.kh, cc.kw}, 2)},
        {"B", random_tensor({cc.out_c}, 3)}};
    std::vector<bool> constant = {false, true, true};
    if (cc.z) {
      inputs.push_back({"Z", random_tensor({cc.n, cc.out_c, oh, ow}, 4)});
      constant.push_back(false);
    }
    std::vector<ir::Attribute> attrs = {
        ints_attr("strides", cc.strides), ints_attr("pads", cc.pads),
        ints_attr("dilations", cc.dilations), int_attr("group", cc.group)};
    activation_attrs(cc.act, cc.params, attrs);
    OneNodeGraph g("FusedConv", inputs, constant, attrs, "peregrine");
    Tensor want = g.run(reference_backend(), 1, nullptr);
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE("threads=" + std::to_string(threads));
      std::string kernel;
      Tensor got = g.run(cpu_backend(), threads, &kernel);
      if (kernel.find("indirect") != std::string::npos) ++indirect_runs;
      expect_close(got, want, 1e-4f);
    }
  }
  if (has_indirect) EXPECT_GT(indirect_runs, 0);
}

// Convs forced onto the phase-plane GEMM (kernels/conv_phase_planes.h, where the selected GEMM
// kernel has an indirect variant): C written straight into Y (no column padding or stride) and
// through scratch and compaction; 1-3 strides per axis (1-9 phase planes), dilations, asymmetric
// pads, groups (wider than the direct grouped kernel takes), batches, odd channel counts, K
// over several K blocks, outputs from 1x1 up, a small map whose C rows are split among threads;
// bias, residual (applied after compaction) and activations fused in the tile or not.
TEST(CpuConv, PhasePlanesMatchesReference) {
  ScopedConvAlgo algo("planes");
  const bool has_indirect = cpu::f32_gemm_kernel().indirect_ukernel != nullptr;
  int planes_runs = 0;
  struct Case {
    int64_t n, c, h, w, out_c, kh, kw, group;
    std::vector<int64_t> strides, pads, dilations;
    std::string act;
    std::vector<float> params;
    bool z;
  };
  for (const Case& cc : {
           Case{1, 5, 13, 11, 17, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, "Relu", {}, false},
           Case{2, 7, 9, 10, 15, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, "", {}, true},
           Case{1,
                12,
                17,
                17,
                19,
                7,
                1,
                1,
                {1, 1},
                {3, 0, 3, 0},
                {1, 1},
                "Clip",
                {0.0f, 6.0f},
                true},
           Case{1, 12, 17, 17, 9, 1, 7, 1, {1, 1}, {0, 3, 0, 3}, {1, 1}, "SiLU", {}, true},
           Case{1, 40, 12, 12, 30, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, "Gelu", {}, false},
           Case{1, 6, 15, 14, 11, 5, 5, 1, {1, 1}, {2, 1, 0, 2}, {1, 1}, "", {}, true},
           Case{1, 4, 16, 13, 5, 3, 3, 1, {1, 2}, {2, 1, 0, 2}, {2, 3}, "Relu", {}, false},
           Case{2, 3, 19, 23, 8, 3, 3, 1, {2, 2}, {1, 1, 1, 1}, {1, 1}, "", {}, true},
           Case{1, 5, 20, 17, 6, 4, 5, 1, {3, 2}, {1, 2, 2, 0}, {1, 2}, "", {}, false},
           Case{1, 8, 9, 9, 68, 3, 3, 2, {1, 1}, {1, 1, 1, 1}, {1, 1}, "Relu", {}, true},
           Case{1, 3, 3, 3, 4, 3, 3, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, "", {}, false},
           Case{1, 9, 8, 8, 40, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, "Relu", {}, true},
           Case{1, 2, 2, 3, 3, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, "Tanh", {}, true},
           // Grid rows a tile wide and more: tiles across two grid rows (some starting in a
           // row's non-pixel columns), K over two blocks, residual and activation in the tile
           // or after it.
           Case{1, 30, 23, 41, 17, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, "Relu", {}, true},
           Case{2, 7, 19, 37, 15, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, "SiLU", {}, true},
           Case{1, 5, 21, 70, 9, 3, 3, 1, {2, 2}, {1, 1, 1, 1}, {1, 1}, "", {}, true},
           Case{1, 6, 9, 40, 70, 1, 7, 2, {1, 1}, {0, 3, 0, 3}, {1, 1}, "Clip", {0.0f, 6.0f}, true},
           Case{1, 4, 12, 36, 8, 3, 3, 1, {1, 1}, {2, 2, 2, 2}, {2, 2}, "Gelu", {}, false},
       }) {
    const int64_t oh =
        (cc.h + cc.pads[0] + cc.pads[2] - (cc.kh - 1) * cc.dilations[0] - 1) / cc.strides[0] + 1;
    const int64_t ow =
        (cc.w + cc.pads[1] + cc.pads[3] - (cc.kw - 1) * cc.dilations[1] - 1) / cc.strides[1] + 1;
    SCOPED_TRACE("phase-plane conv c=" + std::to_string(cc.c) + " oc=" + std::to_string(cc.out_c) +
                 " k=" + std::to_string(cc.kh) + "x" + std::to_string(cc.kw) +
                 " out=" + std::to_string(oh) + "x" + std::to_string(ow) + " act=" + cc.act);
    std::vector<std::pair<std::string, Tensor>> inputs = {
        {"X", random_tensor({cc.n, cc.c, cc.h, cc.w}, 1)},
        {"W", random_tensor({cc.out_c, cc.c / cc.group, cc.kh, cc.kw}, 2)},
        {"B", random_tensor({cc.out_c}, 3)}};
    std::vector<bool> constant = {false, true, true};
    if (cc.z) {
      inputs.push_back({"Z", random_tensor({cc.n, cc.out_c, oh, ow}, 4)});
      constant.push_back(false);
    }
    std::vector<ir::Attribute> attrs = {
        ints_attr("strides", cc.strides), ints_attr("pads", cc.pads),
        ints_attr("dilations", cc.dilations), int_attr("group", cc.group)};
    activation_attrs(cc.act, cc.params, attrs);
    OneNodeGraph g("FusedConv", inputs, constant, attrs, "peregrine");
    Tensor want = g.run(reference_backend(), 1, nullptr);
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE("threads=" + std::to_string(threads));
      std::string kernel;
      Tensor got = g.run(cpu_backend(), threads, &kernel);
      if (kernel.find("phase_planes") != std::string::npos) ++planes_runs;
      expect_close(got, want, 1e-4f);
    }
  }
  if (has_indirect) EXPECT_EQ(planes_runs, 54);
}

TEST(CpuFusedGemmAndMatMul, MatchesReference) {
  for (const FusedAct& act : kActs)
    for (bool z : {false, true}) {
      SCOPED_TRACE("act=" + act.name + " z=" + std::to_string(z));
      {
        std::vector<std::pair<std::string, Tensor>> inputs = {{"A", random_tensor({9, 14}, 1)},
                                                              {"Bm", random_tensor({20, 14}, 2)},
                                                              {"C", random_tensor({20}, 3)}};
        std::vector<bool> constant = {false, true, true};
        if (z) {
          inputs.push_back({"Z", random_tensor({9, 20}, 4)});
          constant.push_back(false);
        }
        std::vector<ir::Attribute> attrs = {int_attr("transB", 1)};
        activation_attrs(act.name, act.params, attrs);
        OneNodeGraph g("FusedGemm", inputs, constant, attrs, "peregrine");
        compare_backends(g, 2e-4f);
      }
      // Z: a residual of the output's shape, or a row vector (MatMul + bias: per-column bias).
      for (const Shape& z_shape : {Shape{2, 3, 7, 11}, Shape{11}, Shape{1, 1, 11}})
        for (bool constant_b : {false, true}) {
          if (!z && z_shape.size() != 4) continue;
          SCOPED_TRACE("Z=" + shape_to_string(z_shape) +
                       " constant_b=" + std::to_string(constant_b));
          std::vector<std::pair<std::string, Tensor>> inputs = {
              {"A", random_tensor({2, 3, 7, 16}, 1)}, {"Bm", random_tensor({16, 11}, 2)}};
          std::vector<bool> constant = {false, constant_b};
          if (z) {
            inputs.push_back({"Z", random_tensor(z_shape, 4)});
            constant.push_back(z_shape.size() != 4);
          }
          std::vector<ir::Attribute> attrs;
          activation_attrs(act.name, act.params, attrs);
          OneNodeGraph g("FusedMatMul", inputs, constant, attrs, "peregrine");
          compare_backends(g, 2e-4f);
        }
    }
}

}  // namespace
}  // namespace peregrine
