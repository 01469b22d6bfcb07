// The Winograd F(m x m, 3x3) driver shared by F(4x4) and F(2x2) (algorithm: kernels/
// conv_winograd_f4x3.h): U = G g G^T packed once as (m + 2)^2 GEMM A operands; per block of tile
// rows the input transform into the GEMMs' packed-B panels, (m + 2)^2 GEMMs, the output
// transform with bias and then the epilogue.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/kernels/conv_winograd_f4x3.h"  // WinogradConvShape
#include "backends/cpu/ukernels/f32_winograd_ukernels.h"

namespace peregrine::cpu {

// U_xi (Cout, Cin) for xi = (m + 2) * row + column, from w (Cout, Cin, 3, 3) and G ((m + 2) x 3).
std::vector<PackedMatrix> winograd_pack_weights(const GemmKernelInfo &gemm, int64_t tile,
                                                const double (*g_matrix)[3], const float *w,
                                                int64_t out_c, int64_t in_c);

// y = act(conv(x) + bias + residual) with output tiles of `tile` x `tile`, `transforms` that
// algorithm's tile transforms, u from winograd_pack_weights; see WinogradF4x3Conv::run.
void winograd_run(int64_t tile, const GemmKernelInfo &gemm, const WinogradUkernels &transforms,
                  const std::vector<PackedMatrix> &u, const float *x, const WinogradConvShape &s,
                  const float *bias, const GemmEpilogue &ep, float *y, int threads);

}  // namespace peregrine::cpu
