// Winograd F(4x4, 3x3) convolution (algorithm and assumptions: kernels/conv_winograd_f4x3.h;
// tile transforms: ukernels/f32_winograd_ukernels.h): G, the rule, PEREGRINE_CONV_ALGO, and the
// shared driver (kernels/conv_winograd_driver.h) with 4x4 output tiles.
#include "backends/cpu/kernels/conv_winograd_f4x3.h"

#include <cstdlib>
#include <string>

#include "core/int_math.h"

namespace peregrine::cpu {
namespace {

constexpr int64_t kTile = WinogradF4x3Conv::kTile;

// G of F(4, 3): U = G g G^T.
constexpr double kG[6][3] = {{1.0 / 4, 0, 0},
                             {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                             {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                             {1.0 / 24, 1.0 / 12, 1.0 / 6},
                             {1.0 / 24, -1.0 / 12, 1.0 / 6},
                             {0, 0, 1}};

}  // namespace

Expected<ConvAlgoChoice> conv_algo_from_env() {
  const char *env = std::getenv("PEREGRINE_CONV_ALGO");
  if (env == nullptr || *env == '\0' || std::string(env) == "auto") return ConvAlgoChoice::kAuto;
  if (std::string(env) == "im2col") return ConvAlgoChoice::kIm2col;
  if (std::string(env) == "winograd") return ConvAlgoChoice::kWinograd;
  if (std::string(env) == "winograd_f2x3") return ConvAlgoChoice::kWinogradF2x3;
  if (std::string(env) == "indirect") return ConvAlgoChoice::kIndirect;
  if (std::string(env) == "planes") return ConvAlgoChoice::kPhasePlanes;
  return invalid_input(std::string("PEREGRINE_CONV_ALGO='") + env +
                       "': expected im2col, winograd, winograd_f2x3, indirect, planes or auto");
}

// Measured with bench/kernels/conv_bench.cc (AMD EPYC Zen 3, AVX2, 1 and 2
// threads, loaded machine): Winograd was faster on every ResNet-50 / YOLO
// stride-1 3x3 layer with at least 16 tiles (down to ResNet-50 layer3's 16, on
// 1 thread and on 2), and slower on ResNet-50 layer4 (7x7: 4 tiles), where the
// 36 U matrices (4x the weights) are streamed for too few tiles. Below 32
// channels nothing was measured. Above 256 x 256 channels the 36 U matrices
// (37.7 MB at 512 x 512) outgrow the shared cache: VGG-16's 14x14x512 layers
// ran far slower than on im2col or F(2x2), so those layers are left to the
// other rules.
bool use_winograd_f4x3(const WinogradConvShape &s) {
  const int64_t tiles = s.batch * ceil_div(s.out_h, kTile) * ceil_div(s.out_w, kTile);
  return s.in_c >= 32 && s.out_c >= 32 && s.in_c * s.out_c <= 256 * 256 && tiles >= 16;
}

WinogradF4x3Conv::WinogradF4x3Conv(const GemmKernelInfo &gemm, const WinogradUkernels &transforms,
                                   const float *w, int64_t out_c, int64_t in_c,
                                   const Bf16GemmKernelInfo *bf16)
    : WinogradConv(gemm, transforms, kTile, kG, w, out_c, in_c, bf16) {}

}  // namespace peregrine::cpu
