// Grouped conv on the direct kernel (ukernels/f32-conv2d-grouped-avx512.cc,
// kernels/conv_grouped.h):
//   - conv2d_grouped() at every ISA level that has the kernel, against a naive loop in double:
//     channels per group 1..7, 13 and 32 (partial channel tiles), output rows 1..13 (partial row
//     tiles, bands over threads), widths around the 16-column vector (1, 15, 16, 17, 33),
//     1x1 / 3x3 / 5x5 / 1x7 / 7x1 / 2x2 kernels, strides 1..3 on either axis, asymmetric pads,
//     dilations, bias, residual and activation or none, 1..3 threads, the input ending at a
//     guard page and the output starting as NaN (every element must be written);
//   - Conv / peregrine.FusedConv through the CPU backend against the reference backend, asserting
//     which kernel ran, and PEREGRINE_CONV_ALGO=im2col keeping the GEMM per group.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/kernels/conv_grouped.h"
#include "backends/reference/reference_backend.h"
#include "cpu_one_node_graph.h"
#include "cpu_test_util.h"

namespace peregrine {
namespace {

using cpu::GroupedConv2dGeometry;
using cpu::testing::GuardedBuffer;
using cpu::testing::random_floats;

struct Case {
  int64_t group, in_c_g, out_c_g, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
};

GroupedConv2dGeometry geometry_of(const Case &c) {
  const int64_t oh = (c.h + c.pt + c.pb - ((c.kh - 1) * c.dh + 1)) / c.sh + 1;
  const int64_t ow = (c.w + c.pl + c.pr - ((c.kw - 1) * c.dw + 1)) / c.sw + 1;
  return {c.in_c_g, c.out_c_g, c.h, c.w, oh, ow, c.kh, c.kw, c.sh, c.sw, c.dh, c.dw, c.pt, c.pl};
}

std::string describe(const Case &c) {
  auto s = [](int64_t v) { return std::to_string(v); };
  return "group=" + s(c.group) + " c_g=" + s(c.in_c_g) + "->" + s(c.out_c_g) + " in=" + s(c.h) +
         "x" + s(c.w) + " k=" + s(c.kh) + "x" + s(c.kw) + " s=" + s(c.sh) + "," + s(c.sw) +
         " d=" + s(c.dh) + "," + s(c.dw) + " pads=" + s(c.pt) + "," + s(c.pl) + "," + s(c.pb) +
         "," + s(c.pr);
}

// act(conv + bias + residual) of every output, in double; act: none, Relu or Clip(-0.5, 0.5).
std::vector<double> naive(const Case &c, const GroupedConv2dGeometry &g, int64_t n, const float *x,
                          const float *w, const float *bias, const float *res,
                          cpu::Activation act) {
  const int64_t in_c = c.group * c.in_c_g, out_c = c.group * c.out_c_g;
  std::vector<double> y(static_cast<size_t>(n * out_c * g.out_h * g.out_w));
  size_t i = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < out_c; ++oc)
      for (int64_t oh = 0; oh < g.out_h; ++oh)
        for (int64_t ow = 0; ow < g.out_w; ++ow, ++i) {
          const int64_t grp = oc / c.out_c_g;
          double acc = bias ? bias[oc] : 0.0;
          for (int64_t ic = 0; ic < c.in_c_g; ++ic)
            for (int64_t ki = 0; ki < c.kh; ++ki)
              for (int64_t kj = 0; kj < c.kw; ++kj) {
                const int64_t ih = oh * c.sh - c.pt + ki * c.dh, iw = ow * c.sw - c.pl + kj * c.dw;
                if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
                acc += double(w[((oc * c.in_c_g + ic) * c.kh + ki) * c.kw + kj]) *
                       x[((b * in_c + grp * c.in_c_g + ic) * c.h + ih) * c.w + iw];
              }
          if (res) acc += res[i];
          if (act == cpu::Activation::kRelu) acc = std::max(acc, 0.0);
          if (act == cpu::Activation::kClip) acc = std::min(std::max(acc, -0.5), 0.5);
          y[i] = acc;
        }
  return y;
}

TEST(CpuConvGrouped, MatchesNaiveLoopAtEveryIsa) {
  const std::vector<Case> cases = {
      // group, in_c_g, out_c_g, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr
      {32, 4, 4, 9, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},  // ResNeXt-like, 17 columns
      {3, 2, 5, 13, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},  // stride 2, partial channel tile
      {2, 7, 7, 7, 15, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   // 7 rows: two row tiles
      {4, 3, 13, 5, 33, 5, 5, 1, 2, 1, 1, 2, 2, 2, 2},  // 5x5, column stride 2, 13 channels
      {2, 5, 3, 11, 9, 1, 7, 1, 1, 1, 1, 0, 3, 0, 3},   // 1x7
      {2, 3, 6, 12, 6, 7, 1, 2, 1, 1, 1, 3, 0, 3, 0},   // 7x1, row stride 2
      {3, 2, 2, 14, 14, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},  // dilation 2
      {2, 4, 32, 6, 8, 3, 3, 3, 3, 1, 1, 1, 0, 2, 1},   // stride 3, 32 per group
      {2, 6, 1, 8, 8, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0},    // 2x2 stride 2, one channel per group
      {5, 2, 4, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},    // 1x1 plane
      {2, 8, 8, 4, 20, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},   // 1x1 kernel
      {2, 2, 3, 10, 40, 3, 5, 1, 2, 1, 3, 0, 4, 1, 0},  // dilated columns, asymmetric pads
      // Two output rows per vector (strides 1 or 2, pitch + OW <= 16):
      {25, 16, 16, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},  // RegNet's 7x7 stage, odd rows
      {2, 3, 5, 6, 6, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},     // 5x5 on 6x6: 16 lanes exactly
      {2, 4, 3, 9, 5, 3, 3, 1, 1, 2, 2, 2, 2, 1, 2},     // dilation 2
      {3, 2, 4, 5, 7, 3, 2, 1, 1, 1, 1, 0, 1, 2, 0},     // asymmetric pads
      {2, 3, 4, 14, 14, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},   // stride 2 to 7x7: four phase planes
      {3, 2, 5, 13, 11, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},   // stride 2, odd input
      {2, 4, 2, 12, 9, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2},    // 5x5 stride 2
      {2, 3, 3, 10, 6, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1},    // row stride 2 only
      {2, 3, 3, 6, 14, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1},    // column stride 2 only
  };
  const std::vector<cpu::Activation> acts = {cpu::Activation::kNone, cpu::Activation::kRelu,
                                             cpu::Activation::kClip};
  int isas = 0;
  for (cpu::Isa isa : cpu::testing::isa_levels()) {
    const cpu::F32Conv2dGroupedFn kernel = cpu::f32_conv2d_grouped_ukernel_for(isa);
    const cpu::GemmKernelInfo *gemm = cpu::f32_gemm_kernel_for(isa);
    if (!kernel || !gemm) continue;
    ++isas;
    for (const Case &c : cases) {
      const GroupedConv2dGeometry g = geometry_of(c);
      ASSERT_TRUE(cpu::use_conv2d_grouped(g)) << describe(c);
      const int64_t n = 2, in_c = c.group * c.in_c_g, out_c = c.group * c.out_c_g;
      const size_t out_count = static_cast<size_t>(n * out_c * g.out_h * g.out_w);
      const std::vector<float> xv = random_floats(size_t(n * in_c * c.h * c.w), 1, -2, 2);
      GuardedBuffer x(xv.size());
      std::copy(xv.begin(), xv.end(), x.data());
      const std::vector<float> w = random_floats(size_t(out_c * c.in_c_g * c.kh * c.kw), 2);
      const std::vector<float> bias = random_floats(size_t(out_c), 3);
      const std::vector<float> z = random_floats(out_count, 4);
      for (bool with_bias : {false, true})
        for (bool residual : {false, true})
          for (cpu::Activation act : acts)
            for (int threads : {1, 2, 3}) {
              SCOPED_TRACE(
                  std::string(cpu::isa_name(isa)) + " " + describe(c) +
                  " bias=" + std::to_string(with_bias) + " residual=" + std::to_string(residual) +
                  " act=" + std::to_string(int(act)) + " threads=" + std::to_string(threads));
              std::vector<float> y(out_count, std::numeric_limits<float>::quiet_NaN());
              cpu::FusedEpilogue fused;
              fused.activation = act;
              fused.p0 = -0.5f;
              fused.p1 = 0.5f;
              const cpu::GroupedConvArgs args{x.data(),
                                              w.data(),
                                              with_bias ? bias.data() : nullptr,
                                              residual ? z.data() : nullptr,
                                              y.data(),
                                              n,
                                              c.group,
                                              g};
              cpu::conv2d_grouped(kernel, args, fused, gemm->epilogue, threads);
              const std::vector<double> want =
                  naive(c, g, n, x.data(), w.data(), with_bias ? bias.data() : nullptr,
                        residual ? z.data() : nullptr, act);
              for (size_t i = 0; i < out_count; ++i)
                ASSERT_NEAR(y[i], want[i], 1e-4 * (1.0 + std::abs(want[i]))) << "at " << i;
            }
    }
  }
  if (isas == 0) GTEST_SKIP() << "no ISA level with a grouped conv kernel on this CPU";
}

// Through the backend: narrow groups take the direct kernel where the selected ISA has it, wide
// groups and depthwise convs do not, and PEREGRINE_CONV_ALGO=im2col keeps the GEMM per group.
TEST(CpuConvGrouped, BackendChoosesAndMatchesReference) {
  const bool has_kernel = cpu::f32_conv2d_grouped_ukernel_for(cpu::f32_gemm_kernel().isa);
  struct BackendCase {
    int64_t c, out_c, group, k;
    bool direct;  // expected on an ISA with the kernel
  };
  for (const BackendCase &bc : {BackendCase{32, 32, 8, 3, true}, BackendCase{12, 18, 3, 3, true},
                                BackendCase{8, 80, 2, 3, false}, BackendCase{8, 8, 8, 3, false}})
    for (const char *algo : {"auto", "im2col"}) {
      SCOPED_TRACE("c=" + std::to_string(bc.c) + " oc=" + std::to_string(bc.out_c) +
                   " group=" + std::to_string(bc.group) + " algo=" + algo);
      setenv("PEREGRINE_CONV_ALGO", algo, 1);
      cpu::testing::OneNodeGraph g(
          "Conv",
          {{"X", cpu::testing::random_tensor({2, bc.c, 11, 19}, 1)},
           {"W", cpu::testing::random_tensor({bc.out_c, bc.c / bc.group, bc.k, bc.k}, 2)},
           {"B", cpu::testing::random_tensor({bc.out_c}, 3)}},
          {false, true, true},
          {cpu::testing::ints_attr("pads", {1, 1, 1, 1}),
           cpu::testing::int_attr("group", bc.group)});
      Tensor want = g.run(reference_backend(), 1, nullptr);
      for (int threads : {1, 2}) {
        std::string kernel;
        Tensor got = g.run(cpu_backend(), threads, &kernel);
        const bool direct = kernel.find("conv2d_grouped") != std::string::npos;
        EXPECT_EQ(direct, has_kernel && bc.direct && std::string(algo) == "auto") << kernel;
        cpu::testing::expect_close(got, want, 1e-4f);
      }
      unsetenv("PEREGRINE_CONV_ALGO");
    }
}

}  // namespace
}  // namespace peregrine
