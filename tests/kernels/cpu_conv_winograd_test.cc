// Winograd F(4x4, 3x3) and F(2x2, 3x3) convolution (kernels/conv_winograd_f4x3.h,
// kernels/conv_winograd_f2x3.h):
//   - each driver at every ISA level this machine has (scalar and AVX2
//   transforms, each with its
//     own GEMM) against a direct convolution in double, on odd shapes (1..57
//     pixels, pads 0..2 and asymmetric, channels 1..512, batch 1 and 2), with
//     bias, residual and Relu / Clip / LeakyRelu, 1..3 threads, the output ending at a
//     guard page; the error bounds are stated below;
//   - the auto rule's choice on ResNet-50-like layers (the kernel name);
//   - Conv / peregrine.FusedConv through the CPU backend with
//   PEREGRINE_CONV_ALGO forcing each
//     path, against the reference backend (at the selected ISA);
//   - the PEREGRINE_CONV_ALGO parser.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/conv_winograd_f2x3.h"
#include "backends/cpu/kernels/conv_winograd_f4x3.h"
#include "cpu_one_node_graph.h"
#include "cpu_test_util.h"

namespace peregrine::cpu {
namespace {

using testing::GuardedBuffer;
using testing::random_floats;

struct Case {
  int64_t n, c, h, w, out_c;
  int64_t pt, pl, pb, pr;
};

std::string describe(const Case &c) {
  return "n=" + std::to_string(c.n) + " c=" + std::to_string(c.c) + " hw=" + std::to_string(c.h) +
         "x" + std::to_string(c.w) + " oc=" + std::to_string(c.out_c) +
         " pads=" + std::to_string(c.pt) + "," + std::to_string(c.pl) + "," + std::to_string(c.pb) +
         "," + std::to_string(c.pr);
}

// Error of the Winograd result relative to the sum of |terms| of each output's
// dot product (the scale float rounding works at), worst over the output.
// Points 0, +-1, +-2, measured (scalar and AVX2 alike): 1.6e-7 .. 1.9e-6 on the
// small cases, 2.3e-6 .. 4.0e-6 on the 56x56x64 ones, and 1.2e-5 on the
// 1-channel 1x7 plane, where an edge output has only a few taps in range while
// the transform mixes the whole tile into it. The bound is 4x the worst
// measured, and a wrong tap or a missing epilogue term gives an O(1) error.
constexpr double kMaxRelError = 5e-5;
// F(2x2) (points 0, +-1), measured the same way (scalar and AVX2 alike): 4.5e-8 .. 1.4e-7 with
// 7 or more channels (6.3e-8 .. 7.0e-8 on 7x7x512), up to 1.03e-6 on 1-channel planes with pads
// 1..2 (edge outputs with few taps in range). The bound is 5x the worst measured: a wrong tap or
// a missing epilogue term still gives an O(1) error.
constexpr double kMaxRelErrorF2x3 = 5e-6;

struct Epi {
  bool bias, residual;
  Activation act;
  float p0, p1;
};

using UkernelsFor = const WinogradUkernels *(*)(Isa);

std::vector<Isa> isas(UkernelsFor ukernels_for) {
  std::vector<Isa> out;
  for (Isa isa : testing::isa_levels(Isa::kAvx2))
    if (f32_gemm_kernel_for(isa) && ukernels_for(isa)) out.push_back(isa);
  return out;
}

// The direct convolution in double, without bias: per output its sum and sum of
// |terms|.
struct Reference {
  std::vector<double> sum, mag;
};
Reference direct_conv(const Case &c, const std::vector<float> &x, const std::vector<float> &w,
                      int64_t oh, int64_t ow) {
  Reference r;
  r.sum.resize(size_t(c.n * c.out_c * oh * ow));
  r.mag.resize(r.sum.size());
  size_t at = 0;
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t o = 0; o < c.out_c; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j, ++at) {
          double sum = 0, mag = 0;
          for (int64_t ci = 0; ci < c.c; ++ci)
            for (int64_t ki = 0; ki < 3; ++ki)
              for (int64_t kj = 0; kj < 3; ++kj) {
                const int64_t ih = i - c.pt + ki, iw = j - c.pl + kj;
                if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
                const double t = double(x[size_t(((n * c.c + ci) * c.h + ih) * c.w + iw)]) *
                                 w[size_t(((o * c.c + ci) * 3 + ki) * 3 + kj)];
                sum += t;
                mag += std::fabs(t);
              }
          r.sum[at] = sum;
          r.mag[at] = mag;
        }
  return r;
}

// Runs every ISA level's driver (Conv: WinogradF4x3Conv or WinogradF2x3Conv, transforms from
// ukernels_for) on `c` with each epilogue and each thread count; returns the worst relative
// error per ISA level (index: position in `levels`).
template <typename Conv>
void check_case(const std::vector<Isa> &levels, UkernelsFor ukernels_for, double bound,
                std::initializer_list<int> thread_counts, const Case &c,
                std::vector<double> &worst) {
  const int64_t oh = c.h + c.pt + c.pb - 2, ow = c.w + c.pl + c.pr - 2;
  std::vector<float> x = random_floats(size_t(c.n * c.c * c.h * c.w), 1);
  std::vector<float> w = random_floats(size_t(c.out_c * c.c * 9), 2);
  std::vector<float> b = random_floats(size_t(c.out_c), 3);
  std::vector<float> z = random_floats(size_t(c.n * c.out_c * oh * ow), 4);
  const Reference ref = direct_conv(c, x, w, oh, ow);
  const WinogradConvShape s{c.n, c.c, c.h, c.w, c.out_c, oh, ow, c.pt, c.pl};
  const Epi epis[] = {{false, false, Activation::kNone, 0, 0},
                      {true, false, Activation::kRelu, 0, 0},
                      {true, true, Activation::kClip, 0.0f, 0.5f},
                      {false, true, Activation::kNone, 0, 0},
                      {true, true, Activation::kLeakyRelu, 0.1f, 0}};
  for (size_t li = 0; li < levels.size(); ++li) {
    const GemmKernelInfo &gemm = *f32_gemm_kernel_for(levels[li]);
    const WinogradUkernels &tr = *ukernels_for(levels[li]);
    Conv conv(gemm, tr, w.data(), c.out_c, c.c);
    for (size_t ei = 0; ei < std::size(epis); ++ei)
      for (int threads : thread_counts) {
        const Epi &e = epis[ei];
        SCOPED_TRACE(std::string(tr.name) + " " + describe(c) + " epilogue " + std::to_string(ei) +
                     " threads=" + std::to_string(threads));
        GuardedBuffer y(ref.sum.size());
        std::fill(y.data(), y.data() + y.size(),
                  NAN);  // every output must be written
        GemmEpilogue ep;
        ep.activation = e.act;
        ep.act_alpha = e.p0;
        ep.act_beta = e.p1;
        ep.residual = e.residual ? z.data() : nullptr;
        conv.run(x.data(), s, e.bias ? b.data() : nullptr, ep, y.data(), threads);
        const int64_t plane = oh * ow;
        for (size_t at = 0; at < ref.sum.size(); ++at) {
          const size_t o = size_t(int64_t(at) / plane % c.out_c);
          double want = ref.sum[at], mag = ref.mag[at];
          if (e.bias) want += b[o], mag += std::fabs(b[o]);
          if (e.residual) want += z[at], mag += std::fabs(z[at]);
          if (e.act == Activation::kRelu) want = std::max(want, 0.0);
          if (e.act == Activation::kClip) want = std::clamp<double>(want, e.p0, e.p1);
          if (e.act == Activation::kLeakyRelu && want < 0) want *= e.p0;
          const double err = std::fabs(y.data()[at] - want) / std::max(mag, 1e-3);
          if (!(err <= bound)) {  // NaN too: an output never written
            ADD_FAILURE() << "at " << at << ": got " << y.data()[at] << " want " << want;
            break;
          }
          worst[li] = std::max(worst[li], err);
        }
      }
  }
}

TEST(WinogradF4x3Driver, MatchesDirectConvAtEveryIsa) {
  const Case cases[] = {
      // Tiny planes: a single, partial tile (H, W in 1, 2, 5, 7).
      {1, 1, 1, 1, 1, 1, 1, 1, 1},
      {1, 3, 2, 2, 3, 1, 1, 1, 1},
      {2, 3, 5, 7, 17, 1, 1, 1, 1},
      {1, 17, 7, 5, 3, 0, 0, 0, 0},
      {1, 1, 1, 7, 1, 2, 1, 0, 2},
      {2, 17, 13, 13, 17, 1, 1, 1, 1},
      // Asymmetric pads (0..2), widths that are not a multiple of 4 or 32
      // output columns.
      {1, 3, 13, 14, 17, 2, 0, 1, 2},
      {1, 17, 14, 13, 64, 0, 2, 2, 1},
      {2, 64, 14, 14, 17, 1, 1, 1, 1},
      {1, 3, 7, 37, 3, 1, 2, 0, 1},
      // ResNet-sized: 56x56x64 (several tile groups of 8 per row, several K
      // blocks).
      {1, 64, 56, 56, 64, 1, 1, 1, 1},
      {1, 64, 57, 55, 64, 2, 1, 0, 2},
      // Cin > 256: V's packed panels span two K blocks (KC = 256); tile counts
      // per block
      // (9, 24, 14) not multiples of NR (16 AVX2, 8 scalar), and tile rows that
      // start
      // inside a panel and cross its edge (12 and 7 tiles per row).
      {1, 300, 9, 11, 19, 1, 1, 1, 1},
      {1, 260, 23, 45, 20, 1, 1, 1, 1},
      {2, 270, 10, 26, 9, 1, 1, 1, 1},
      // 9 tiles per row, 4 rows per block (36 columns): no room to pad rows to 8-tile groups,
      // so transform groups end partial and cross panel edges.
      {1, 64, 20, 34, 64, 1, 1, 1, 1},
  };
  std::vector<Isa> levels = isas(winograd_f4x3_ukernels_for);
  for (const Case &c : cases) {
    std::vector<double> worst(levels.size(), 0.0);
    check_case<WinogradF4x3Conv>(levels, winograd_f4x3_ukernels_for, kMaxRelError, {1, 3}, c,
                                 worst);
    for (size_t li = 0; li < levels.size(); ++li)
      std::printf("  %-6s %-40s worst error / sum|terms| = %.3g\n", isa_name(levels[li]),
                  describe(c).c_str(), worst[li]);
  }
}

TEST(WinogradF2x3Driver, MatchesDirectConvAtEveryIsa) {
  const Case cases[] = {
      // Odd maps (1x1 .. 9x4: a single, partial 2x2 tile up to odd tile counts), pads 0..2,
      // channels 1, 7, 13.
      {1, 1, 1, 1, 1, 1, 1, 1, 1},
      {1, 7, 2, 2, 7, 1, 1, 1, 1},
      {2, 13, 3, 3, 7, 1, 1, 1, 1},
      {1, 7, 5, 7, 13, 1, 1, 1, 1},
      {2, 13, 7, 7, 13, 1, 1, 1, 1},
      {1, 7, 9, 4, 7, 0, 0, 0, 0},
      {1, 1, 9, 4, 1, 2, 2, 2, 2},
      {1, 13, 5, 7, 7, 2, 0, 1, 2},
      {1, 1, 1, 7, 1, 2, 1, 0, 2},
      {2, 1, 3, 3, 13, 0, 0, 0, 0},
      // 64 channels: 7x7; 4x6 (3 tiles per row padded to an 8-tile pitch); 30x30 (several
      // blocks, one per thread).
      {1, 64, 7, 7, 64, 1, 1, 1, 1},
      {1, 64, 4, 6, 64, 1, 1, 1, 1},
      {1, 64, 30, 30, 64, 1, 1, 1, 1},
      // Cin > 256: two K blocks (KC = 256); ResNet-50 layer4 (7x7x512), batch 2.
      {1, 300, 7, 7, 19, 1, 1, 1, 1},
      {1, 512, 7, 7, 512, 1, 1, 1, 1},
      {2, 512, 7, 7, 64, 1, 1, 1, 1},
  };
  std::vector<Isa> levels = isas(winograd_f2x3_ukernels_for);
  ASSERT_FALSE(levels.empty());
  for (const Case &c : cases) {
    std::vector<double> worst(levels.size(), 0.0);
    check_case<WinogradF2x3Conv>(levels, winograd_f2x3_ukernels_for, kMaxRelErrorF2x3, {1, 2, 3}, c,
                                 worst);
    for (size_t li = 0; li < levels.size(); ++li)
      std::printf("  %-6s %-40s worst error / sum|terms| = %.3g\n", isa_name(levels[li]),
                  describe(c).c_str(), worst[li]);
  }
}

using testing::ScopedConvAlgo;

TEST(WinogradF4x3Conv, ConvAlgoFromEnv) {
  {
    ScopedConvAlgo env("im2col");
    ASSERT_TRUE(conv_algo_from_env().is_ok());
    EXPECT_EQ(conv_algo_from_env().value(), ConvAlgoChoice::kIm2col);
  }
  {
    ScopedConvAlgo env("winograd");
    EXPECT_EQ(conv_algo_from_env().value(), ConvAlgoChoice::kWinograd);
  }
  {
    ScopedConvAlgo env("winograd_f2x3");
    EXPECT_EQ(conv_algo_from_env().value(), ConvAlgoChoice::kWinogradF2x3);
  }
  {
    ScopedConvAlgo env("indirect");
    EXPECT_EQ(conv_algo_from_env().value(), ConvAlgoChoice::kIndirect);
  }
  {
    ScopedConvAlgo env("auto");
    EXPECT_EQ(conv_algo_from_env().value(), ConvAlgoChoice::kAuto);
  }
  {
    ScopedConvAlgo env("fft");
    EXPECT_FALSE(conv_algo_from_env().is_ok());
  }
}

// Conv and FusedConv (bias, residual Z, Relu / Clip) through the CPU backend,
// each path forced, against the reference backend.
TEST(WinogradF4x3Conv, BackendMatchesReferenceWithEachAlgo) {
  using testing::int_attr;
  using testing::ints_attr;
  using testing::OneNodeGraph;
  using testing::random_tensor;
  struct GraphCase {
    int64_t n, c, h, w, out_c;
    std::vector<int64_t> pads;
    std::string act;
    std::vector<float> params;
    bool z;
  };
  const GraphCase cases[] = {
      {1, 3, 13, 11, 17, {1, 1, 1, 1}, "", {}, false},
      {2, 17, 7, 14, 3, {0, 2, 1, 0}, "Relu", {}, true},
      {1, 64, 14, 14, 64, {1, 1, 1, 1}, "Clip", {0.0f, 6.0f}, true},
      {2, 1, 5, 2, 1, {2, 2, 2, 2}, "Relu", {}, false},
      {1, 13, 9, 4, 7, {1, 0, 2, 1}, "Sigmoid", {}, true},
      {2, 64, 7, 7, 64, {1, 1, 1, 1}, "LeakyRelu", {0.1f}, false},
  };
  for (const char *algo : {"winograd", "winograd_f2x3", "im2col"}) {
    ScopedConvAlgo env(algo);
    for (const GraphCase &gc : cases) {
      SCOPED_TRACE(std::string(algo) + " c=" + std::to_string(gc.c) +
                   " oc=" + std::to_string(gc.out_c) + " act=" + gc.act);
      const int64_t oh = gc.h + gc.pads[0] + gc.pads[2] - 2,
                    ow = gc.w + gc.pads[1] + gc.pads[3] - 2;
      std::vector<std::pair<std::string, Tensor>> inputs = {
          {"X", random_tensor({gc.n, gc.c, gc.h, gc.w}, 1)},
          {"W", random_tensor({gc.out_c, gc.c, 3, 3}, 2)},
          {"B", random_tensor({gc.out_c}, 3)}};
      std::vector<bool> constant = {false, true, true};
      if (gc.z) {
        inputs.push_back({"Z", random_tensor({gc.n, gc.out_c, oh, ow}, 4)});
        constant.push_back(false);
      }
      std::vector<ir::Attribute> attrs = {ints_attr("pads", gc.pads), int_attr("group", 1)};
      const bool fused = !gc.act.empty() || gc.z;
      if (fused) {
        attrs.push_back(testing::string_attr("activation", gc.act));
        ir::Attribute p;
        p.name = "activation_params";
        p.type = ir::Attribute::Type::kFloats;
        p.floats = gc.params;
        attrs.push_back(p);
      }
      OneNodeGraph g(fused ? "FusedConv" : "Conv", inputs, constant, attrs,
                     fused ? "peregrine" : "");
      const std::string want_kernel = std::string(algo) == "winograd" ? "cpu/conv-winograd_f4x3"
                                      : std::string(algo) == "winograd_f2x3"
                                          ? "cpu/conv-winograd_f2x3"
                                          : "cpu/conv-f32_gemm";
      // 5e-4: the 64-channel case sums 576 terms (sum |terms| ~150); Winograd's
      // measured ~2e-6 of that (driver test above) is up to ~3e-4 in absolute
      // terms.
      testing::compare_with_reference(g, cpu_backend(), want_kernel, 5e-4f, 1e-4f);
    }
  }
}

// The auto rule (PEREGRINE_CONV_ALGO unset) on ResNet-50's stride-1 3x3 layers, by the kernel
// that ran: layer4 (7x7x512) takes F(2x2), so that path is not silently unused; layer3
// (14x14x256) keeps F(4x4); a VGG-style 14x14x512 layer, whose F(4x4) weights would outgrow
// the cache, takes F(2x2); narrow layers (64 channels on 7x7, 32 on 28x28, 8) take no Winograd.
// Winograd's GEMM columns are tiles of a block: 16 on a 7x7 map with F(2x2) and on a 14x14 map
// with F(4x4). A kernel that computes edge columns only in whole 32-column tiles would double
// that (the pitch rounding to 8-tile groups too), so the choice takes one whose column step is
// at most 16: the 6x16 AVX2 tile, or the AVX-512 tile with its partial kernel.
TEST(WinogradGemmKernel, FewTilesTakeAKernelThatDoesNotPadThem) {
  const WinogradConvShape small{1, 512, 7, 7, 512, 7, 7, 1, 1};
  const WinogradConvShape mid{1, 256, 14, 14, 256, 14, 14, 1, 1};
  const WinogradConvShape large{1, 64, 56, 56, 64, 56, 56, 1, 1};
  for (const WinogradConvShape &s : {small, mid, large}) {
    const GemmKernelInfo &chosen = winograd_gemm_kernel(WinogradF2x3Conv::kTile, s);
    EXPECT_LE(static_cast<int>(chosen.isa), static_cast<int>(f32_gemm_kernel().isa));
  }
  EXPECT_LE(f32_gemm_column_step(winograd_gemm_kernel(WinogradF2x3Conv::kTile, small)), 16);
  EXPECT_LE(f32_gemm_column_step(winograd_gemm_kernel(WinogradF4x3Conv::kTile, mid)), 16);
}

TEST(WinogradF2x3Conv, AutoRuleRoutesSmallMapsToF2x3) {
  using testing::int_attr;
  using testing::ints_attr;
  using testing::OneNodeGraph;
  using testing::random_tensor;
  ScopedConvAlgo env("auto");
  struct RuleCase {
    int64_t c, hw;
    const char *want;
  };
  // Narrow layers, where Winograd's transforms cost more than they save, take the phase-plane
  // GEMM where the GEMM kernel has an indirect variant (AVX-512); without it, Winograd by the
  // channel rules alone, and im2col below 32 channels.
  const bool planes = f32_gemm_kernel().indirect_ukernel != nullptr;
  const RuleCase cases[] = {{512, 7, "cpu/conv-winograd_f2x3"},
                            {256, 14, "cpu/conv-winograd_f4x3"},
                            {512, 14, "cpu/conv-winograd_f2x3"},
                            {64, 7, planes ? "cpu/conv-phase_planes" : "cpu/conv-winograd_f2x3"},
                            {32, 28, planes ? "cpu/conv-phase_planes" : "cpu/conv-winograd_f4x3"},
                            {8, 7, planes ? "cpu/conv-phase_planes" : "cpu/conv-f32_gemm"}};
  for (const RuleCase &rc : cases) {
    SCOPED_TRACE("c=" + std::to_string(rc.c) + " hw=" + std::to_string(rc.hw));
    OneNodeGraph g("Conv",
                   {{"X", random_tensor({1, rc.c, rc.hw, rc.hw}, 1)},
                    {"W", random_tensor({rc.c, rc.c, 3, 3}, 2)},
                    {"B", random_tensor({rc.c}, 3)}},
                   {false, true, true}, {ints_attr("pads", {1, 1, 1, 1}), int_attr("group", 1)});
    std::string kernel;
    g.run(cpu_backend(), 1, &kernel);
    EXPECT_EQ(kernel.rfind(rc.want, 0), 0u) << kernel;
  }
}

}  // namespace
}  // namespace peregrine::cpu
