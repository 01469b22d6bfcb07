// Winograd F(2x2, 3x3) convolution, float32 NCHW, group 1, 3x3, stride 1, dilation 1, for small
// maps where F(4x4) gets too few tiles (ResNet-50 layer4, 7x7: 16 tiles of 2x2 against 4 of
// 4x4): each 2x2 output tile costs 16 multiplies per (Cin, Cout) pair instead of 36.
//
//   prepare: U_xi = (G g G^T)_xi for every (Cout, Cin) filter, in double, as 16 (Cout, Cin)
//            matrices each packed once as a GEMM A operand (16/9 of the weights' memory).
//   run:     as F(4x4) (kernels/conv_winograd_f4x3.h): tile rows (image n, tile row tr) in blocks
//            (V + M about L2-sized, but enough tiles to amortize streaming U: the small maps
//            this path is for are one block); blocks spread over the threads when there are
//            enough, else the threads share each block's stages. Per block:
//              input transform  V_xi(Cin, tiles) = (B^T d B)_xi  (tasks: channel x tile row)
//                               written straight in the GEMM's packed-B panels (no re-pack)
//              16 GEMMs         M_xi(Cout, tiles) = U_xi V_xi    (tasks: xi, one thread each)
//              output transform y = A^T M A + bias, then the GEMM epilogue (residual,
//                               activation) on the tile row's valid rows (tasks: Cout x tile row)
//            Edge tiles read zeros past the input (padding) and write only their valid part.
// Accuracy (points 0, +-1, infinity), measured in tests/unit/cpu_conv_winograd_test.cc:
// max |error| / sum |terms| of the dot product 4.5e-8 .. 1.4e-7 with 7 or more channels (7e-8 on
// 7x7x512), at most 1.03e-6 on 1-channel planes with pads (scalar and AVX2 alike); F(4x4)'s
// reach 1.2e-5.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/kernels/conv_winograd_f4x3.h"  // WinogradConvShape, ConvAlgoChoice
#include "backends/cpu/ukernels/f32_winograd_ukernels.h"

namespace peregrine::cpu {

// The measured rule for stride-1 3x3 convs that use_winograd_f4x3() leaves on im2col: true
// where F(2x2) beat im2col + GEMM in bench/kernels/conv_bench.cc (see its definition).
bool use_winograd_f2x3(const WinogradConvShape &s);

// F(2x2): 16 packed (Cout, Cin) A operands, xi = 4 * row + column.
class WinogradF2x3Conv : public WinogradConv {
 public:
  static constexpr int64_t kTile = 2;  // output tile side
  // w: (Cout, Cin, 3, 3) row-major; transforms: winograd_f2x3_ukernels*.
  WinogradF2x3Conv(const GemmKernelInfo &gemm, const WinogradUkernels &transforms, const float *w,
                   int64_t out_c, int64_t in_c, const Bf16GemmKernelInfo *bf16 = nullptr);
};

}  // namespace peregrine::cpu
