// Small-M GEMM on a pre-packed B: C(m, n) = epilogue(alpha * A(m, k) * B(k, n) + beta * C) for m <=
// kGemvMaxM (batch-1 decoder steps, final FC layers), where the BLIS driver's work per B panel (an
// MR-row micro-kernel mostly on zero rows, an edge tile merged into C once per K block) is wasted.
// The B weights are read once, straight from their packed (kc, NR) panels (gemm/f32_gemm.h:
// PackedMatrix); each task takes whole NR-column panels, keeps the m x NR accumulators in registers
// over all of K, and applies the epilogue to the finished tile. A is row-major (column stride 1);
// beta == 0 never reads C.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/gemm/f32_gemm.h"

namespace peregrine::cpu {

// Measured (AVX2, one thread, B packed) against the BLIS driver for K x N of 256 x 256,
// 1024 x 1024 and 2048 x 1000: the panel kernel is as fast or faster at m = 1 to 3, but slower
// at m = 4 (the driver's 6x16 tile wins).
constexpr int64_t kGemvMaxM = 3;

// One NR-wide column panel of B (packed: per K block of kc rows, `panels` panels of (kc, NR), this
// one at index `panel`), for m <= kGemvMaxM rows of A (row stride lda): tile(m, NR) = A * B_panel,
// written with row stride NR.
using F32GemvPanelFn = void (*)(size_t m, size_t k, const float *a, size_t lda,
                                const float *packed_b, size_t panels, size_t panel, size_t kc,
                                float *tile);

namespace scalar {
void f32_gemv_panel__scalar(size_t m, size_t k, const float *a, size_t lda, const float *packed_b,
                            size_t panels, size_t panel, size_t kc, float *tile);
}  // namespace scalar
namespace avx2 {
// NR == 16 only.
void f32_gemv_panel_16__avx2(size_t m, size_t k, const float *a, size_t lda, const float *packed_b,
                             size_t panels, size_t panel, size_t kc, float *tile);
}  // namespace avx2
namespace avx512 {
// NR == 32 only.
void f32_gemv_panel_32__avx512(size_t m, size_t k, const float *a, size_t lda,
                               const float *packed_b, size_t panels, size_t panel, size_t kc,
                               float *tile);
}  // namespace avx512

// The panel kernel for `b`'s layout at `isa`, or nullptr when none fits (the caller then uses
// f32_gemm).
F32GemvPanelFn f32_gemv_panel_kernel(Isa isa, const PackedMatrix &b);

// True when the small-M path takes this product (m <= kGemvMaxM, a panel kernel fits b).
bool f32_gemv_applies(const GemmKernelInfo &kernel, int64_t m, const PackedMatrix &b);

// The product through the panel kernel; requires f32_gemv_applies(kernel, m, b) and b packed for
// (k, n).
void f32_gemv(const GemmKernelInfo &kernel, int64_t m, int64_t n, int64_t k, const float *a,
              int64_t lda, const PackedMatrix &b, float *c, int64_t ldc, float alpha, float beta,
              const GemmEpilogue &ep, int num_threads);

}  // namespace peregrine::cpu
