// Channel-blocked depthwise conv (ukernels/f32-dwconv2d-c8-avx2.cc, f32-dwconv2d-c16-avx512.cc,
// f32-dwconv2d-rows-avx512.cc, kernels/conv_depthwise_chw.h):
//   - every block kernel of every ISA level that has one (8 or 16 channels, and partial blocks
//     of 1, 5 and 15 channels where it takes them; the row-vector kernel on the cases it takes,
//     at least ten) against a naive loop in double:
//     widths around the 8-pixel blocks and the 4-pixel compute step (1, 3, 7, 8, 9, 13, 17, 127),
//     3x3 / 5x5 / 1x3 / 3x1 / 2x4 / 7x7 kernels, strides 1..3 on either axis, pads 0..3 asymmetric,
//     dilations, bias or none, residual, clamp, an epilogue, bands of output rows (rows outside
//     the band stay untouched), input / output / residual ending at a guard page;
//   - depthwise_chw() at every ISA level, both algorithms forced and the rule, over channels 1, 8,
//     13, 24 (blocks plus plane-kernel leftovers), batch 2, multiplier 2, 1..3 threads (bands);
//   - Conv / peregrine.FusedConv through the CPU backend against the reference backend (the
//     selected ISA; PEREGRINE_ISA=scalar for the scalar level), asserting which kernel ran;
//   - the rule routes MobileNetV2's depthwise layers to the c8 kernel.
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
using cpu::testing::GuardedBuffer;
using cpu::testing::random_floats;

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Case {
  int64_t h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
};

DwConv2dGeometry geometry_of(const Case &c) {
  const int64_t oh = (c.h + c.pt + c.pb - ((c.kh - 1) * c.dh + 1)) / c.sh + 1;
  const int64_t ow = (c.w + c.pl + c.pr - ((c.kw - 1) * c.dw + 1)) / c.sw + 1;
  return {c.h, c.w, oh, ow, c.kh, c.kw, c.sh, c.sw, c.dh, c.dw, c.pt, c.pl};
}

std::string describe(const Case &c) {
  auto s = [](int64_t v) { return std::to_string(v); };
  return "in=" + s(c.h) + "x" + s(c.w) + " k=" + s(c.kh) + "x" + s(c.kw) + " s=" + s(c.sh) + "," +
         s(c.sw) + " d=" + s(c.dh) + "," + s(c.dw) + " pads=" + s(c.pt) + "," + s(c.pl) + "," +
         s(c.pb) + "," + s(c.pr);
}

// Naive depthwise conv of one output plane in double: bias + taps (+ residual), clamped.
std::vector<double> naive_plane(const Case &c, const DwConv2dGeometry &g, const float *x,
                                const float *w, double bias, const float *res, float lo, float hi) {
  std::vector<double> out(static_cast<size_t>(g.out_h * g.out_w));
  for (int64_t oh = 0; oh < g.out_h; ++oh)
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      double acc = bias;
      for (int64_t ki = 0; ki < c.kh; ++ki)
        for (int64_t kj = 0; kj < c.kw; ++kj) {
          const int64_t ih = oh * c.sh - c.pt + ki * c.dh, iw = ow * c.sw - c.pl + kj * c.dw;
          if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
          acc += double(w[ki * c.kw + kj]) * x[ih * c.w + iw];
        }
      const int64_t i = oh * g.out_w + ow;
      if (res) acc += res[i];
      out[static_cast<size_t>(i)] = std::min<double>(std::max<double>(acc, lo), hi);
    }
  return out;
}

// Epilogue for the ukernel test: v -> 0.5 v + 1 (a stand-in for an activation, exact in float).
void halve_plus_one(float *c, size_t ldc, size_t rows, size_t cols, size_t, size_t,
                    const cpu::GemmEpilogue &) {
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) c[i * ldc + j] = 0.5f * c[i * ldc + j] + 1.0f;
}

std::vector<const cpu::DwConv2dUkernelInfo *> c8_kernels() {
  std::vector<const cpu::DwConv2dUkernelInfo *> out;
  for (cpu::Isa isa : cpu::testing::isa_levels())
    for (const auto *k = cpu::f32_dwconv2d_chw_ukernel_for(isa); k; k = k->otherwise)
      if (k->c8 && k->isa == isa) out.push_back(k);
  return out;
}

// One call of the channel-blocked kernel on `channels` planes (0: a whole block of
// kernel.block_channels).
void check_c8_block(const cpu::DwConv2dUkernelInfo &kernel, const Case &c, bool bias, bool residual,
                    float lo, float hi, bool epilogue, int64_t oh_begin, int64_t oh_end,
                    int64_t channels = 0) {
  const DwConv2dGeometry g = geometry_of(c);
  const int64_t lanes = kernel.block_channels, planes = channels > 0 ? channels : lanes;
  SCOPED_TRACE(std::string(kernel.c8_name) + " channels=" + std::to_string(planes) + " " +
               describe(c) + " bias=" + std::to_string(bias) +
               " residual=" + std::to_string(residual) + " clamp=" + std::to_string(lo) + "," +
               std::to_string(hi) + " epilogue=" + std::to_string(epilogue) + " rows=[" +
               std::to_string(oh_begin) + "," + std::to_string(oh_end) + ")");
  ASSERT_GE(g.out_h, 1);
  ASSERT_GE(g.out_w, 1);
  ASSERT_TRUE(kernel.c8_supported(g));
  const int64_t in_plane = c.h * c.w, plane = g.out_h * g.out_w;
  // Input, residual and output end at a guard page: a read or write past the last plane faults.
  GuardedBuffer x(static_cast<size_t>(planes * in_plane)), z(static_cast<size_t>(planes * plane)),
      y(static_cast<size_t>(planes * plane));
  const std::vector<float> xv = random_floats(x.size(), 1, -2, 2);
  const std::vector<float> wv = random_floats(static_cast<size_t>(planes * c.kh * c.kw), 2);
  const std::vector<float> bv = random_floats(size_t(planes), 5);
  const std::vector<float> zv = random_floats(z.size(), 3);
  std::copy(xv.begin(), xv.end(), x.data());
  std::copy(zv.begin(), zv.end(), z.data());
  std::fill(y.data(), y.data() + y.size(), std::numeric_limits<float>::quiet_NaN());
  cpu::GemmEpilogue unused;
  cpu::DwConv2dC8Block b{x.data(),
                         wv.data(),
                         bias ? bv.data() : nullptr,
                         residual ? z.data() : nullptr,
                         y.data(),
                         oh_begin,
                         oh_end,
                         lo,
                         hi,
                         epilogue ? halve_plus_one : nullptr,
                         &unused,
                         channels};
  const size_t scratch_n = static_cast<size_t>(kernel.c8_scratch_floats(g, lanes));
  std::vector<float> scratch(scratch_n + 8);
  float *aligned = reinterpret_cast<float *>((reinterpret_cast<uintptr_t>(scratch.data()) + 31) &
                                             ~uintptr_t{31});
  std::fill(aligned, aligned + scratch_n, std::numeric_limits<float>::quiet_NaN());  // unused
  kernel.c8(g, b, aligned);
  for (int64_t ch = 0; ch < planes; ++ch) {
    const std::vector<double> want = naive_plane(
        c, g, xv.data() + ch * in_plane, wv.data() + ch * c.kh * c.kw, bias ? bv[size_t(ch)] : 0.0,
        residual ? zv.data() + ch * plane : nullptr, lo, hi);
    for (int64_t i = 0; i < plane; ++i) {
      const float got = y.data()[ch * plane + i];
      const int64_t oh = i / g.out_w;
      if (oh < oh_begin || oh >= oh_end) {
        ASSERT_TRUE(std::isnan(got))
            << "written outside the band: channel " << ch << " pixel " << i;
        continue;
      }
      const double e = epilogue ? 0.5 * want[size_t(i)] + 1.0 : want[size_t(i)];
      ASSERT_NEAR(got, e, 1e-5 * (1 + std::fabs(e))) << "channel " << ch << " pixel " << i;
    }
  }
}

const std::vector<Case> &ukernel_cases() {
  static const std::vector<Case> cases = {
      // 3x3 pad 1: widths 1, 3, 7, 8, 9, 13, 17, 127 around the 8-pixel block and 4-pixel step.
      {1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {2, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {5, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {4, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {13, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {3, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {3, 127, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      // Stride 2 and 3, both axes and mixed; TF-style SAME (pads only at the end).
      {7, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
      {14, 14, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1},
      {5, 9, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1},
      {5, 9, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1},
      {11, 35, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1},
      {16, 18, 3, 3, 4, 1, 1, 1, 1, 1, 1, 1},  // stride_h above KH: input rows skipped
      // No padding, asymmetric pads, pads as large as the input.
      {7, 13, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0},
      {9, 11, 3, 3, 1, 2, 1, 1, 2, 0, 1, 2},
      {3, 4, 3, 3, 1, 1, 1, 1, 3, 3, 3, 3},
      // Other kernels, dilations.
      {13, 17, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},
      {13, 17, 5, 5, 2, 2, 1, 1, 2, 1, 2, 2},
      {3, 17, 1, 3, 1, 1, 1, 1, 0, 1, 0, 1},
      {9, 5, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0},
      {11, 19, 2, 4, 1, 2, 1, 1, 1, 2, 0, 1},
      {10, 12, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3},
      {15, 23, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},
      {15, 23, 3, 3, 2, 2, 3, 2, 2, 2, 2, 2},
      {7, 9, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      // Padded rows of exactly 16 (the row-vector kernel's limit), 5x5 and 7x7 that fit one.
      {14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {6, 14, 3, 3, 1, 1, 1, 1, 0, 2, 2, 0},
      {9, 7, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},
      {8, 6, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3},
  };
  return cases;
}

TEST(CpuDwConvC8Ukernel, MatchesNaiveLoop) {
  const auto kernels = c8_kernels();
  if (kernels.empty()) GTEST_SKIP() << "no ISA level with a c8 kernel on this CPU";
  for (const auto *kernel : kernels) {
    int supported = 0;
    for (const Case &c : ukernel_cases()) {
      // The row-vector kernel takes stride 1 and padded rows of up to 16 only.
      if (!kernel->c8_supported(geometry_of(c))) continue;
      ++supported;
      const int64_t out_h = geometry_of(c).out_h;
      check_c8_block(*kernel, c, true, false, -kInf, kInf, false, 0, out_h);
      check_c8_block(*kernel, c, false, true, 0.0f, 6.0f, false, 0, out_h);
      check_c8_block(*kernel, c, true, true, -0.5f, 0.25f, true, 0, out_h);
      // Bands: a middle band, one row, the last row.
      if (out_h > 2) check_c8_block(*kernel, c, true, true, 0.0f, kInf, false, 1, out_h - 1);
      check_c8_block(*kernel, c, true, false, -kInf, kInf, true, out_h / 2, out_h / 2 + 1);
      check_c8_block(*kernel, c, true, true, -kInf, kInf, false, out_h - 1, out_h);
      // A last block of fewer channels, where the kernel takes one.
      if (kernel->partial_blocks)
        for (int64_t channels : {int64_t{1}, int64_t{5}, kernel->block_channels - 1})
          check_c8_block(*kernel, c, true, true, 0.0f, kInf, true, 0, out_h, channels);
    }
    EXPECT_GE(supported, 10) << kernel->c8_name;
  }
}

TEST(CpuDwConvC8Ukernel, NanPropagatesWithoutClamp) {
  const Case c{3, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  const DwConv2dGeometry g = geometry_of(c);
  for (const auto *kernel : c8_kernels()) {
    const size_t lanes = size_t(kernel->block_channels);
    std::vector<float> x(lanes * 27, 1.0f), w(lanes * 9, 1.0f), y(lanes * 27, 0.0f);
    x[3 * 27 + 4] = std::numeric_limits<float>::quiet_NaN();  // channel 3, (0, 4)
    std::vector<float> scratch(size_t(kernel->c8_scratch_floats(g, kernel->block_channels)) + 8);
    float *aligned = reinterpret_cast<float *>((reinterpret_cast<uintptr_t>(scratch.data()) + 31) &
                                               ~uintptr_t{31});
    cpu::GemmEpilogue unused;
    cpu::DwConv2dC8Block b{x.data(), w.data(), nullptr, nullptr, y.data(), 0,
                           3,        -kInf,    kInf,    nullptr, &unused};
    kernel->c8(g, b, aligned);
    EXPECT_TRUE(std::isnan(y[3 * 27 + 4])) << kernel->c8_name;  // (0, 4) sees (0..1, 3..5)
    EXPECT_FALSE(std::isnan(y[3 * 27 + 0])) << kernel->c8_name;
    EXPECT_FALSE(std::isnan(y[2 * 27 + 4])) << kernel->c8_name;  // other channels
  }
}

// depthwise_chw() at every ISA level: both algorithms and the rule, against the naive loop.
TEST(CpuDwConvC8Driver, MatchesNaiveLoopAtEveryIsa) {
  struct DriverCase {
    int64_t n, c, mult;
    Case geo;
  };
  const std::vector<DriverCase> cases = {
      {2, 13, 1, {7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}},
      {1, 24, 1, {14, 14, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1}},
      {2, 8, 1, {5, 9, 5, 5, 1, 2, 1, 1, 2, 2, 1, 2}},
      {1, 1, 1, {3, 17, 1, 3, 1, 1, 1, 1, 0, 1, 0, 1}},
      {2, 8, 2, {7, 7, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2}},  // multiplier 2: the plane kernel
      {1, 16, 1, {1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}},
      {1, 8, 1, {28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}},   // 1 block: bands over threads
      {1, 21, 1, {6, 45, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1}},   // wide: AVX-512 takes the AVX2 c8
      {2, 19, 1, {14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}},  // AVX-512: the row-vector kernel
  };
  struct Act {
    cpu::Activation act;
    float p0, p1;
  };
  const std::vector<Act> acts = {{cpu::Activation::kNone, 0, 0},
                                 {cpu::Activation::kClip, 0.0f, 6.0f},
                                 {cpu::Activation::kHardSwish, 0, 0}};
  for (cpu::Isa isa : cpu::testing::isa_levels()) {
    const cpu::DwConv2dUkernelInfo *kernel = cpu::f32_dwconv2d_chw_ukernel_for(isa);
    const cpu::GemmKernelInfo *gemm = cpu::f32_gemm_kernel_for(isa);
    if (!kernel || !gemm) continue;
    for (const DriverCase &dc : cases)
      for (cpu::DwConvAlgo algo :
           {cpu::DwConvAlgo::kPlane, cpu::DwConvAlgo::kC8, cpu::DwConvAlgo::kAuto})
        for (const Act &act : acts)
          for (bool residual : {false, true})
            for (int threads : {1, 2, 3}) {
              const Case &c = dc.geo;
              const DwConv2dGeometry g = geometry_of(c);
              const int64_t oc = dc.c * dc.mult, in_plane = c.h * c.w;
              const int64_t plane = g.out_h * g.out_w;
              SCOPED_TRACE(std::string(kernel->name) + " n=" + std::to_string(dc.n) +
                           " c=" + std::to_string(dc.c) + " mult=" + std::to_string(dc.mult) + " " +
                           describe(c) + " algo=" + std::to_string(int(algo)) + " act=" +
                           std::to_string(int(act.act)) + " residual=" + std::to_string(residual) +
                           " threads=" + std::to_string(threads));
              const std::vector<float> x = random_floats(size_t(dc.n * dc.c * in_plane), 1, -2, 2);
              const std::vector<float> w = random_floats(size_t(oc * c.kh * c.kw), 2);
              const std::vector<float> bias = random_floats(size_t(oc), 3);
              const std::vector<float> z = random_floats(size_t(dc.n * oc * plane), 4);
              std::vector<float> y(z.size(), std::numeric_limits<float>::quiet_NaN());
              cpu::FusedEpilogue fused;
              fused.activation = act.act;
              fused.p0 = act.p0;
              fused.p1 = act.p1;
              const cpu::DepthwiseChwArgs args{
                  x.data(), w.data(), bias.data(), residual ? z.data() : nullptr,
                  y.data(), dc.n,     dc.c,        oc,
                  g};
              const std::string ran =
                  cpu::depthwise_chw(*kernel, args, fused, gemm->epilogue, threads, algo);
              cpu::DwConvAlgo chosen = algo;  // kAuto: PEREGRINE_DWCONV_ALGO, else the rule
              if (chosen == cpu::DwConvAlgo::kAuto) chosen = cpu::dwconv_algo_from_env();
              if (chosen == cpu::DwConvAlgo::kAuto && cpu::use_dwconv2d_c8(g))
                chosen = cpu::DwConvAlgo::kC8;
              // Some channels in a (whole or, where the kernel takes one, partial) block.
              const int64_t min_c =
                  cpu::dwconv2d_ukernel_for_plane(*kernel, g).partial_blocks
                      ? 1
                      : cpu::dwconv2d_ukernel_for_plane(*kernel, g).block_channels;
              const bool want_c8 =
                  kernel->c8 && dc.mult == 1 && dc.c >= min_c && chosen == cpu::DwConvAlgo::kC8;
              const cpu::DwConv2dUkernelInfo &runs = cpu::dwconv2d_ukernel_for_plane(*kernel, g);
              EXPECT_EQ(ran, want_c8 ? runs.c8_name : runs.name);
              for (int64_t n = 0; n < dc.n; ++n)
                for (int64_t o = 0; o < oc; ++o) {
                  const int64_t yp = (n * oc + o) * plane;
                  const std::vector<double> want =
                      naive_plane(c, g, x.data() + (n * dc.c + o / dc.mult) * in_plane,
                                  w.data() + o * c.kh * c.kw, bias[size_t(o)],
                                  residual ? z.data() + yp : nullptr, -kInf, kInf);
                  for (int64_t i = 0; i < plane; ++i) {
                    double e = want[size_t(i)];
                    if (act.act == cpu::Activation::kClip)
                      e = std::min<double>(std::max(e, 0.0), 6.0);
                    if (act.act == cpu::Activation::kHardSwish)
                      e = e * std::min(std::max(e / 6.0 + 0.5, 0.0), 1.0);
                    ASSERT_NEAR(y[size_t(yp + i)], e, 1e-5 * (1 + std::fabs(e)))
                        << "image " << n << " channel " << o << " pixel " << i;
                  }
                }
            }
  }
}

using cpu::testing::compare_with_reference;
using cpu::testing::int_attr;
using cpu::testing::ints_attr;
using cpu::testing::OneNodeGraph;
using cpu::testing::random_tensor;
using cpu::testing::string_attr;

// The kernel name a Conv with this depthwise geometry reports on the selected ISA (one channel:
// group 1, a plain conv, which only the prefix checks).
std::string expected_kernel(int64_t c, int64_t mult, const DwConv2dGeometry &g) {
  if (c == 1) return "cpu/conv-";
  const cpu::DwConv2dUkernelInfo &k =
      cpu::dwconv2d_ukernel_for_plane(cpu::f32_dwconv2d_chw_ukernel(), g);
  const cpu::DwConvAlgo forced = cpu::dwconv_algo_from_env();
  const bool rule =
      forced == cpu::DwConvAlgo::kAuto ? cpu::use_dwconv2d_c8(g) : forced == cpu::DwConvAlgo::kC8;
  const bool c8 = k.c8 && mult == 1 && c >= (k.partial_blocks ? 1 : k.block_channels) && rule;
  return std::string("cpu/conv-") + (c8 ? k.c8_name : k.name);
}

// Conv / FusedConv with group == C through the CPU backend vs the reference backend, on the shapes
// that take the c8 kernel and its edges.
TEST(CpuDepthwiseConvC8, MatchesReference) {
  struct GraphCase {
    int64_t n, c, mult, kh, kw;
    Case geo;  // h, w, (kh, kw from above), strides, dilations, pads
  };
  auto gc = [](int64_t n, int64_t c, int64_t mult, int64_t h, int64_t w, int64_t kh, int64_t kw,
               int64_t sh, int64_t sw, int64_t d, int64_t pt, int64_t pl, int64_t pb, int64_t pr) {
    return GraphCase{n, c, mult, kh, kw, Case{h, w, kh, kw, sh, sw, d, d, pt, pl, pb, pr}};
  };
  const std::vector<GraphCase> cases = {
      gc(1, 8, 1, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1),
      gc(2, 13, 1, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1),  // batch 2, one block + 5 planes
      gc(1, 24, 1, 14, 14, 3, 3, 2, 2, 1, 0, 0, 1, 1),  // stride 2, pads at the end only
      gc(1, 1, 1, 5, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1),     // 1 channel: group 1, the GEMM
      gc(1, 8, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1),     // 1x1 plane
      gc(1, 13, 1, 5, 9, 3, 3, 1, 2, 1, 2, 0, 1, 2),    // mixed strides, asymmetric pads
      gc(1, 8, 1, 5, 9, 3, 3, 2, 1, 1, 0, 1, 2, 0),     // the other mix
      gc(1, 24, 1, 3, 17, 5, 5, 1, 1, 1, 2, 2, 2, 2),   // 5x5
      gc(2, 8, 1, 3, 17, 1, 3, 1, 2, 1, 0, 1, 0, 0),    // 1x3, batch 2
      gc(1, 13, 1, 14, 14, 3, 3, 1, 1, 2, 2, 2, 2, 2),  // dilation 2
      gc(1, 8, 2, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1),     // multiplier 2: the plane kernel
      gc(1, 16, 1, 28, 28, 3, 3, 2, 2, 1, 1, 1, 1, 1),  // MobileNetV2-like stride 2
  };
  struct Act {
    std::string name;
    std::vector<float> params;
  };
  const std::vector<Act> acts = {
      {"", {}}, {"Relu", {}}, {"Clip", {0.0f, 6.0f}}, {"HardSwish", {}}, {"Sigmoid", {}}};
  for (const GraphCase &c : cases) {
    const DwConv2dGeometry g = geometry_of(c.geo);
    const int64_t oc = c.c * c.mult;
    for (const Act &act : acts)
      for (bool z : {false, true}) {
        SCOPED_TRACE("dw n=" + std::to_string(c.n) + " c=" + std::to_string(c.c) +
                     " mult=" + std::to_string(c.mult) + " " + describe(c.geo) +
                     " act=" + act.name + " z=" + std::to_string(z));
        std::vector<std::pair<std::string, Tensor>> inputs = {
            {"X", random_tensor({c.n, c.c, c.geo.h, c.geo.w}, 1, -2, 2)},
            {"W", random_tensor({oc, 1, c.kh, c.kw}, 2)},
            {"B", random_tensor({oc}, 3)}};
        std::vector<bool> constant = {false, true, true};
        if (z) {
          inputs.push_back({"Z", random_tensor({c.n, oc, g.out_h, g.out_w}, 4)});
          constant.push_back(false);
        }
        std::vector<ir::Attribute> attrs = {
            ints_attr("strides", {c.geo.sh, c.geo.sw}),
            ints_attr("pads", {c.geo.pt, c.geo.pl, c.geo.pb, c.geo.pr}),
            ints_attr("dilations", {c.geo.dh, c.geo.dw}), int_attr("group", c.c)};
        const bool plain = act.name.empty() && !z;
        if (!plain) {
          attrs.push_back(string_attr("activation", act.name));
          ir::Attribute p;
          p.name = "activation_params";
          p.type = ir::Attribute::Type::kFloats;
          p.floats = act.params;
          attrs.push_back(p);
        }
        OneNodeGraph graph(plain ? "Conv" : "FusedConv", inputs, constant, attrs,
                           plain ? "" : "peregrine");
        // The AVX2 Sigmoid is an approximation (ukernels/f32_vmath_avx2.h): a few ulp.
        compare_with_reference(graph, cpu_backend(), expected_kernel(c.c, c.mult, g), 2e-5f, 2e-5f);
      }
  }
}

// An unknown PEREGRINE_DWCONV_ALGO is an error naming the variable when a conv is prepared,
// not silently the rule.
TEST(CpuDepthwiseConvC8, UnknownAlgoEnvIsAnError) {
  const char *old = std::getenv("PEREGRINE_DWCONV_ALGO");
  const std::string saved = old ? old : "";
  setenv("PEREGRINE_DWCONV_ALGO", "c32", 1);
  ir::Node node;
  node.op_type = "Conv";
  node.inputs = {"X", "W"};
  node.outputs = {"Y"};
  auto prepared = cpu::prepare_conv(node, {nullptr, nullptr}, cpu::FusedEpilogue{});
  if (old)
    setenv("PEREGRINE_DWCONV_ALGO", saved.c_str(), 1);
  else
    unsetenv("PEREGRINE_DWCONV_ALGO");
  ASSERT_FALSE(prepared.is_ok());
  EXPECT_NE(prepared.status().message().find("PEREGRINE_DWCONV_ALGO='c32'"), std::string::npos)
      << prepared.status().message();
  setenv("PEREGRINE_DWCONV_ALGO", "plane", 1);
  EXPECT_TRUE(cpu::prepare_conv(node, {nullptr, nullptr}, cpu::FusedEpilogue{}).is_ok());
  if (old)
    setenv("PEREGRINE_DWCONV_ALGO", saved.c_str(), 1);
  else
    unsetenv("PEREGRINE_DWCONV_ALGO");
}

// The rule sends every MobileNetV2 depthwise layer to the c8 kernel (where the ISA has one), and
// a Conv on such a shape reports it: the new path is what runs, not silently bypassed.
TEST(CpuDepthwiseConvC8, RuleRoutesSmallPlanesToC8) {
  struct Layer {
    int64_t c, in, stride;
  };
  const Layer layers[] = {{32, 112, 1}, {96, 112, 2}, {144, 56, 1}, {144, 56, 2}, {192, 28, 1},
                          {192, 28, 2}, {384, 14, 1}, {576, 14, 1}, {576, 14, 2}, {960, 7, 1}};
  for (const Layer &l : layers) {
    const Case c{l.in, l.in, 3, 3, l.stride, l.stride, 1, 1, 1, 1, 1, 1};
    EXPECT_TRUE(cpu::use_dwconv2d_c8(geometry_of(c))) << describe(c);
  }
  const cpu::DwConv2dUkernelInfo &k = cpu::f32_dwconv2d_chw_ukernel();  // 14 wide: no fallback
  if (!k.c8 || cpu::dwconv_algo_from_env() == cpu::DwConvAlgo::kPlane)
    GTEST_SKIP() << "no c8 kernel selected";
  OneNodeGraph graph("Conv",
                     {{"X", random_tensor({1, 24, 14, 14}, 1)},
                      {"W", random_tensor({24, 1, 3, 3}, 2)},
                      {"B", random_tensor({24}, 3)}},
                     {false, true, true}, {ints_attr("pads", {1, 1, 1, 1}), int_attr("group", 24)});
  compare_with_reference(graph, cpu_backend(), std::string("cpu/conv-") + k.c8_name, 1e-5f, 1e-5f);
}

}  // namespace
}  // namespace peregrine
