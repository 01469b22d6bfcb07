// Winograd F(2x2, 3x3) convolution (algorithm and assumptions: kernels/conv_winograd_f2x3.h;
// tile transforms: ukernels/f32_winograd_ukernels.h): G, the rule, and the shared driver
// (kernels/conv_winograd_driver.h) with 2x2 output tiles.
#include "backends/cpu/kernels/conv_winograd_f2x3.h"

#include "core/int_math.h"

namespace peregrine::cpu {
namespace {

constexpr int64_t kTile = WinogradF2x3Conv::kTile;

// G of F(2, 3): U = G g G^T.
constexpr double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};

}  // namespace

// Measured with bench/kernels/conv_bench.cc (AMD EPYC Zen 3, AVX2, 1 and 2 threads) against
// im2col and F(4x4) on 7x7 maps of 64 to 512 channels (ResNet-50 layer4 among them) and on
// 5x5 and 3x3 maps of 512: F(2x2) wins from 16 tiles (one full NR = 16 GEMM panel) at 64
// channels and up, and loses below, where its 16 U matrices (16/9 of the weights) are streamed
// for too few tiles. At 512 channels U is 16.8 MB, DRAM-streamed when other processes share the
// L3: the 7x7x512 layer is slower on a loaded host than on a quiet one, and faster with U forced
// cache-hot. Where F(4x4) applies (>= 16 tiles of 4x4) it is asked first and is as fast up to
// 256 channels (ResNet-50 layer3, YOLO 20x20x256). Below 64 channels and at batch > 1 nothing
// was measured.
bool use_winograd_f2x3(const WinogradConvShape &s) {
  const int64_t tiles = s.batch * ceil_div(s.out_h, kTile) * ceil_div(s.out_w, kTile);
  return s.in_c >= 64 && s.out_c >= 64 && tiles >= 16;
}

WinogradF2x3Conv::WinogradF2x3Conv(const GemmKernelInfo &gemm, const WinogradUkernels &transforms,
                                   const float *w, int64_t out_c, int64_t in_c,
                                   const Bf16GemmKernelInfo *bf16)
    : WinogradConv(gemm, transforms, kTile, kG, w, out_c, in_c, bf16) {}

}  // namespace peregrine::cpu
