// Winograd F(4x4, 3x3) convolution, float32 NCHW, group 1, 3x3, stride 1, dilation 1:
// each 4x4 output tile costs 36 multiplies per (Cin, Cout) pair instead of 144 (direct / im2col).
//
//   prepare: U_xi = (G g G^T)_xi for every (Cout, Cin) filter, in double, as 36 (Cout, Cin)
//            matrices each packed once as a GEMM A operand (4x the weights' memory).
//   run:     tile rows (image n, tile row tr) in blocks (V + M about L2-sized, but enough
//            tiles to amortize streaming U); blocks spread over the threads when there are
//            enough, else the threads share each block's stages. Per block:
//              input transform  V_xi(Cin, tiles) = (B^T d B)_xi  (tasks: channel x tile row)
//                               written straight in the GEMM's packed-B panels (no re-pack)
//              36 GEMMs         M_xi(Cout, tiles) = U_xi V_xi    (tasks: xi, one thread each)
//              output transform y = A^T M A + bias, then the GEMM epilogue (residual,
//                               activation) on the tile row's valid rows (tasks: Cout x tile row)
//            Edge tiles read zeros past the input (padding) and write only their valid part.
// Accuracy (points 0, +-1, +-2, infinity), measured in tests/unit/cpu_conv_winograd_test.cc:
// max |error| / sum |terms| of the dot product 2e-6..4e-6 on 56x56x64 layers, at most 1.2e-5.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/kernels/conv_winograd_driver.h"
#include "backends/cpu/ukernels/f32_winograd_ukernels.h"
#include "peregrine/status.h"

namespace peregrine::cpu {

// Which algorithm a stride-1 3x3 Conv uses: PEREGRINE_CONV_ALGO=im2col|winograd|winograd_f2x3
// forces one (winograd: F(4x4), kernels/conv_winograd_f4x3.h; winograd_f2x3: F(2x2),
// kernels/conv_winograd_f2x3.h); unset (or "auto") means use_winograd_f4x3()'s rule, then
// use_winograd_f2x3()'s. For a column-stride-2 Conv, "indirect" forces the indirect GEMM
// (kernels/conv.cc, where the GEMM kernel has one) and "im2col" the packed one; auto takes the
// indirect one where kernels/conv.cc's rule (kIndirectConvMinWidth) says so.
enum class ConvAlgoChoice { kAuto, kIm2col, kWinograd, kWinogradF2x3, kIndirect, kPhasePlanes };
// Reads PEREGRINE_CONV_ALGO now (not cached, so tests can switch it); an
// unknown value is an error.
Expected<ConvAlgoChoice> conv_algo_from_env();

// The measured rule: true where the Winograd path beat im2col + GEMM in
// bench/kernels/conv_bench.cc (see the comment at its definition).
bool use_winograd_f4x3(const WinogradConvShape &s);

// F(4x4): 36 packed (Cout, Cin) A operands, xi = 6 * row + column.
class WinogradF4x3Conv : public WinogradConv {
 public:
  static constexpr int64_t kTile = 4;  // output tile side
  // w: (Cout, Cin, 3, 3) row-major; transforms: winograd_f4x3_ukernels*.
  WinogradF4x3Conv(const GemmKernelInfo &gemm, const WinogradUkernels &transforms, const float *w,
                   int64_t out_c, int64_t in_c, const Bf16GemmKernelInfo *bf16 = nullptr);
};

}  // namespace peregrine::cpu
