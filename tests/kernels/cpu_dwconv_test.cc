// Depthwise conv on NCHW planes (ukernels/f32_dwconv2d_ukernels.h, kernels/conv_depthwise_chw.h):
//   - the plane micro-kernel at every ISA level this machine has against a naive loop in double,
//     over odd plane sizes (1, 7, 13, 127 wide: below, between and above the 8-wide vector),
//     3x3 / 5x5 / 1x1 / 2x4 / 7x1 kernels, strides 1 and 2, pads 0..3, dilations, with bias,
//     residual, clamp and a row epilogue, the output and residual ending at a guard page;
//   - Conv / peregrine.FusedConv with group == C_in through the CPU backend against the reference
//     backend (the selected ISA; run with PEREGRINE_ISA=scalar for the scalar level), including
//     the stride-3 shape that falls back to the generic loop.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/kernels/conv_depthwise_chw.h"
#include "backends/cpu/ukernels/f32_dwconv2d_ukernels.h"
#include "cpu_one_node_graph.h"
#include "cpu_test_util.h"

namespace peregrine {
namespace {

using cpu::DwConv2dGeometry;
using cpu::DwConv2dPlane;
using cpu::testing::GuardedBuffer;
using cpu::testing::random_floats;

std::vector<const cpu::DwConv2dUkernelInfo *> available_kernels() {
  std::vector<const cpu::DwConv2dUkernelInfo *> out;
  for (cpu::Isa isa : cpu::testing::isa_levels(cpu::Isa::kAvx2))
    if (const auto *k = cpu::f32_dwconv2d_chw_ukernel_for(isa)) out.push_back(k);
  return out;
}

struct PlaneCase {
  int64_t h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
};

DwConv2dGeometry geometry_of(const PlaneCase &c) {
  const int64_t oh = (c.h + c.pt + c.pb - ((c.kh - 1) * c.dh + 1)) / c.sh + 1;
  const int64_t ow = (c.w + c.pl + c.pr - ((c.kw - 1) * c.dw + 1)) / c.sw + 1;
  return {c.h, c.w, oh, ow, c.kh, c.kw, c.sh, c.sw, c.dh, c.dw, c.pt, c.pl};
}

// Row epilogue for the test: v -> 0.5 v (a stand-in for an activation, checkable exactly).
void halve_rows(float *c, size_t ldc, size_t rows, size_t cols, size_t, size_t,
                const cpu::GemmEpilogue &) {
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) c[i * ldc + j] *= 0.5f;
}

void check_plane(const cpu::DwConv2dUkernelInfo &kernel, const PlaneCase &c, bool residual,
                 float lo, float hi, bool row_epilogue) {
  const DwConv2dGeometry g = geometry_of(c);
  SCOPED_TRACE(std::string(kernel.name) + " in=" + std::to_string(c.h) + "x" + std::to_string(c.w) +
               " k=" + std::to_string(c.kh) + "x" + std::to_string(c.kw) + " s=" +
               std::to_string(c.sh) + "," + std::to_string(c.sw) + " d=" + std::to_string(c.dh) +
               "," + std::to_string(c.dw) + " pads=" + std::to_string(c.pt) + "," +
               std::to_string(c.pl) + "," + std::to_string(c.pb) + "," + std::to_string(c.pr) +
               " residual=" + std::to_string(residual) + " clamp=" + std::to_string(lo) + "," +
               std::to_string(hi) + " row_epilogue=" + std::to_string(row_epilogue));
  ASSERT_GE(g.out_h, 1);
  ASSERT_GE(g.out_w, 1);
  ASSERT_TRUE(cpu::depthwise_chw_supported(g));
  const size_t out_n = static_cast<size_t>(g.out_h * g.out_w);
  // Input and residual end at a guard page too: a read past the plane faults.
  GuardedBuffer x(static_cast<size_t>(c.h * c.w)), z(out_n), y(out_n);
  const std::vector<float> xv = random_floats(x.size(), 1, -2, 2);
  const std::vector<float> wv = random_floats(static_cast<size_t>(c.kh * c.kw), 2);
  const std::vector<float> zv = random_floats(out_n, 3);
  std::copy(xv.begin(), xv.end(), x.data());
  std::copy(zv.begin(), zv.end(), z.data());
  std::fill(y.data(), y.data() + out_n, std::numeric_limits<float>::quiet_NaN());
  const float bias = 0.375f;
  cpu::GemmEpilogue unused;
  DwConv2dPlane p{x.data(), wv.data(), bias, residual ? z.data() : nullptr,
                  y.data(), lo,        hi,   row_epilogue ? halve_rows : nullptr,
                  &unused};
  std::vector<float> scratch(static_cast<size_t>(cpu::f32_dwconv2d_chw_scratch_floats(g)) + 8);
  float *aligned = reinterpret_cast<float *>((reinterpret_cast<uintptr_t>(scratch.data()) + 31) &
                                             ~uintptr_t{31});
  // Garbage in the scratch must not matter.
  std::fill(aligned, aligned + cpu::f32_dwconv2d_chw_scratch_floats(g), 1e30f);
  kernel.plane(g, p, aligned);
  for (int64_t oh = 0; oh < g.out_h; ++oh)
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      double acc = bias;
      for (int64_t ki = 0; ki < c.kh; ++ki)
        for (int64_t kj = 0; kj < c.kw; ++kj) {
          const int64_t ih = oh * c.sh - c.pt + ki * c.dh, iw = ow * c.sw - c.pl + kj * c.dw;
          if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
          acc += double(wv[size_t(ki * c.kw + kj)]) * xv[size_t(ih * c.w + iw)];
        }
      if (residual) acc += zv[size_t(oh * g.out_w + ow)];
      acc = std::min<double>(std::max<double>(acc, lo), hi);
      if (row_epilogue) acc *= 0.5;
      ASSERT_NEAR(y.data()[oh * g.out_w + ow], acc, 1e-5 * (1 + std::fabs(acc)))
          << "at (" << oh << ", " << ow << ")";
    }
}

TEST(CpuDwConvUkernel, MatchesNaiveLoop) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const std::vector<PlaneCase> cases = {
      // 3x3 pad 1, strides 1 and 2, widths 1, 7, 8, 13, 16, 127 (below / at / above a vector).
      {1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {5, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {13, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {6, 127, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {1, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
      {7, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
      {14, 14, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1},  // TF-style SAME: pad only at the end
      {13, 13, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
      {5, 127, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
      {8, 34, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
      // No padding, asymmetric pads, large pads.
      {7, 13, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0},
      {9, 11, 3, 3, 1, 2, 1, 1, 2, 0, 1, 3},
      {3, 4, 3, 3, 1, 1, 1, 1, 3, 3, 3, 3},
      // Other kernels, dilations, stride_h above KH (rows skipped).
      {13, 17, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},
      {13, 17, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2},
      {7, 9, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      {7, 9, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0},
      {11, 19, 2, 4, 1, 2, 1, 1, 1, 2, 0, 1},
      {11, 21, 7, 1, 1, 1, 1, 1, 3, 0, 3, 0},
      {15, 23, 3, 3, 1, 1, 2, 3, 2, 3, 2, 3},
      {15, 23, 3, 3, 2, 2, 3, 2, 2, 2, 2, 2},
      {16, 18, 3, 3, 4, 1, 1, 1, 1, 1, 1, 1},
  };
  for (const auto *kernel : available_kernels())
    for (const PlaneCase &c : cases) {
      check_plane(*kernel, c, false, -kInf, kInf, false);
      check_plane(*kernel, c, true, 0.0f, 6.0f, false);
      check_plane(*kernel, c, true, -kInf, kInf, true);
    }
}

TEST(CpuDwConvUkernel, NanPropagatesWithoutClamp) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const PlaneCase c{3, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  const DwConv2dGeometry g = geometry_of(c);
  for (const auto *kernel : available_kernels()) {
    std::vector<float> x(27, 1.0f), w(9, 1.0f), y(27, 0.0f);
    x[4] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> scratch(size_t(cpu::f32_dwconv2d_chw_scratch_floats(g)) + 8);
    float *aligned = reinterpret_cast<float *>((reinterpret_cast<uintptr_t>(scratch.data()) + 31) &
                                               ~uintptr_t{31});
    cpu::GemmEpilogue unused;
    DwConv2dPlane p{x.data(), w.data(), 0.0f, nullptr, y.data(), -kInf, kInf, nullptr, &unused};
    kernel->plane(g, p, aligned);
    EXPECT_TRUE(std::isnan(y[4])) << kernel->name;  // (0, 4) sees (0..1, 3..5)
    EXPECT_FALSE(std::isnan(y[0])) << kernel->name;
  }
}

using cpu::testing::compare_with_reference;
using cpu::testing::int_attr;
using cpu::testing::ints_attr;
using cpu::testing::OneNodeGraph;
using cpu::testing::random_tensor;
using cpu::testing::string_attr;

struct DwCase {
  int64_t n, c, h, w, mult, k;
  std::vector<int64_t> strides, pads, dilations;
};

// Conv / FusedConv with group == C: every case through the CPU backend vs the reference.
TEST(CpuDepthwiseConv, MatchesReference) {
  const std::vector<DwCase> cases = {
      {1, 7, 13, 13, 1, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {2, 5, 7, 127, 1, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      {1, 3, 1, 1, 1, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {1, 9, 14, 14, 1, 3, {2, 2}, {0, 0, 1, 1}, {1, 1}},
      {1, 4, 11, 12, 2, 3, {1, 1}, {2, 2, 2, 2}, {2, 2}},  // multiplier 2,
                                                           // dilation 2
      {1, 3, 9, 17, 1, 5, {2, 2}, {2, 1, 0, 2}, {1, 1}},
      {1, 3, 9, 17, 1, 5, {2, 3}, {2, 1, 0, 2}, {1, 1}},  // stride_w 3: the
                                                          // generic loop
      {1, 2, 8, 8, 1, 3, {1, 1}, {0, 0, 0, 0}, {1, 1}},
  };
  struct Act {
    std::string name;
    std::vector<float> params;
  };
  const std::vector<Act> acts = {
      {"", {}},        {"Relu", {}},      {"Clip", {0.0f, 6.0f}}, {"Clip", {-0.5f, 0.25f}},
      {"Sigmoid", {}}, {"HardSwish", {}}, {"LeakyRelu", {0.1f}}};
  for (const DwCase &dc : cases) {
    const int64_t oc = dc.c * dc.mult;
    const int64_t kext = (dc.k - 1) * dc.dilations[0] + 1, kextw = (dc.k - 1) * dc.dilations[1] + 1;
    const int64_t oh = (dc.h + dc.pads[0] + dc.pads[2] - kext) / dc.strides[0] + 1;
    const int64_t ow = (dc.w + dc.pads[1] + dc.pads[3] - kextw) / dc.strides[1] + 1;
    for (const Act &act : acts)
      for (bool z : {false, true}) {
        SCOPED_TRACE("dw c=" + std::to_string(dc.c) + " hw=" + std::to_string(dc.h) + "x" +
                     std::to_string(dc.w) + " k=" + std::to_string(dc.k) + " mult=" +
                     std::to_string(dc.mult) + " act=" + act.name + " z=" + std::to_string(z));
        std::vector<std::pair<std::string, Tensor>> inputs = {
            {"X", random_tensor({dc.n, dc.c, dc.h, dc.w}, 1, -2, 2)},
            {"W", random_tensor({oc, 1, dc.k, dc.k}, 2)},
            {"B", random_tensor({oc}, 3)}};
        std::vector<bool> constant = {false, true, true};
        if (z) {
          inputs.push_back({"Z", random_tensor({dc.n, oc, oh, ow}, 4)});
          constant.push_back(false);
        }
        std::vector<ir::Attribute> attrs = {
            ints_attr("strides", dc.strides), ints_attr("pads", dc.pads),
            ints_attr("dilations", dc.dilations), int_attr("group", dc.c)};
        const bool plain = act.name.empty() && !z;
        if (!plain) {
          attrs.push_back(string_attr("activation", act.name));
          ir::Attribute p;
          p.name = "activation_params";
          p.type = ir::Attribute::Type::kFloats;
          p.floats = act.params;
          attrs.push_back(p);
        }
        OneNodeGraph g(plain ? "Conv" : "FusedConv", inputs, constant, attrs,
                       plain ? "" : "peregrine");
        // The AVX2 Sigmoid is an approximation (ukernels/f32_vmath_avx2.h): a few ulp.
        compare_with_reference(g, cpu_backend(), "cpu/conv", 2e-5f, 2e-5f);
      }
  }
}

}  // namespace
}  // namespace peregrine
