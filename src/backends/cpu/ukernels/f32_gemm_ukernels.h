// f32 GEMM micro-kernels, one per file (ukernels/f32-gemm-<MR>x<NR>-<isa>.cc), each in the
// namespace of its ISA so instantiations compiled with wider ISA flags never merge into
// generic code.
//
// Contract (BLIS): C[MR, NR] = alpha * A[MR, kc] * B[kc, NR] + beta * C[MR, NR]
//   a: packed A micro-panel, (kc, MR): for each k, the MR values of column k, contiguous.
//   b: packed B micro-panel, (kc, NR): for each k, the NR values of row k, contiguous,
//      64-byte aligned.
//   c: row-major with row stride ldc (elements); the full MR x NR tile is written.
//   beta == 0 never reads C (NaN/Inf there do not propagate). kc may be 0 (C = beta * C).
// Edge tiles are the driver's job: a partial kernel (where the ISA has one) or the full kernel
// on a temporary MR x NR tile.
#pragma once

#include <cstddef>

namespace peregrine::cpu {

using F32GemmUkernelFn = void (*)(size_t kc, const float* a, const float* b, float* c, size_t ldc,
                                  float alpha, float beta);

// The epilogue a fused micro-kernel applies to its tile in registers before the one store
// (instead of a second pass over the stored tile):
//   v = alpha * acc + beta * C;  v += bias_row[i] + bias_col[j] + residual(i, j);
//   C = min(max(v, lo), hi)   (NaN stays NaN)
// Pointers address this tile's rows / columns; nullptr leaves the term out.
struct F32GemmTileEpilogue {
  const float* bias_row = nullptr;  // MR values
  const float* bias_col = nullptr;  // NR values
  const float* residual = nullptr;  // (MR, NR), row stride ldr
  size_t ldr = 0;
  float lo = 0.0f, hi = 0.0f;
  bool hardswish = false;  // after the clamp: v * min(max(v / 6 + 0.5, 0), 1)
};
// An edge tile: rows <= MR, cols <= NR of the tile, computed and stored straight into C (no
// temporary tile); the A panel keeps its MR layout. B: row p of the tile at b + p * ldb
// (ldb = NR for a packed panel; a row-major B read in place has its own stride, and only the
// tile's columns of it are read). ep == nullptr: no epilogue.
using F32GemmPartialUkernelFn = void (*)(size_t rows, size_t cols, size_t kc, const float* a,
                                         const float* b, size_t ldb, float* c, size_t ldc,
                                         float alpha, float beta, const F32GemmTileEpilogue* ep);
// The partial kernel with B given by row: row p of the tile at b_rows[p] + b_offset (an
// indirect convolution: each row a tap's contiguous input run, no im2col copy). Reads only the
// tile's `cols` columns of each row (it may prefetch past them).
using F32GemmIndirectUkernelFn = void (*)(size_t rows, size_t cols, size_t kc, const float* a,
                                          const float* const* b_rows, size_t b_offset, float* c,
                                          size_t ldc, float alpha, float beta,
                                          const F32GemmTileEpilogue* ep);
using F32GemmFusedUkernelFn = void (*)(size_t kc, const float* a, const float* b, float* c,
                                       size_t ldc, float alpha, float beta,
                                       const F32GemmTileEpilogue& ep);
// Packs one full A micro-panel: rows a, a + lda, ... (MR of them), columns 0 .. kc - 1, to
// dst as (kc, MR) (the packed-A layout above). No alignment required.
using F32GemmPackAFn = void (*)(const float* a, size_t lda, size_t kc, float* dst);

namespace scalar {
void f32_gemm_ukernel_4x8__scalar(size_t kc, const float* a, const float* b, float* c, size_t ldc,
                                  float alpha, float beta);
void f32_gemm_fused_ukernel_4x8__scalar(size_t kc, const float* a, const float* b, float* c,
                                        size_t ldc, float alpha, float beta,
                                        const F32GemmTileEpilogue& ep);
}  // namespace scalar

namespace avx2 {
void f32_gemm_ukernel_6x16__avx2(size_t kc, const float* a, const float* b, float* c, size_t ldc,
                                 float alpha, float beta);
void f32_gemm_fused_ukernel_6x16__avx2(size_t kc, const float* a, const float* b, float* c,
                                       size_t ldc, float alpha, float beta,
                                       const F32GemmTileEpilogue& ep);
}  // namespace avx2

namespace avx512 {
void f32_gemm_ukernel_14x32__avx512(size_t kc, const float* a, const float* b, float* c, size_t ldc,
                                    float alpha, float beta);
void f32_gemm_fused_ukernel_14x32__avx512(size_t kc, const float* a, const float* b, float* c,
                                          size_t ldc, float alpha, float beta,
                                          const F32GemmTileEpilogue& ep);
void f32_gemm_partial_ukernel_14x32__avx512(size_t rows, size_t cols, size_t kc, const float* a,
                                            const float* b, size_t ldb, float* c, size_t ldc,
                                            float alpha, float beta,
                                            const F32GemmTileEpilogue* ep);
void f32_gemm_pack_a_14__avx512(const float* a, size_t lda, size_t kc, float* dst);
void f32_gemm_indirect_ukernel_14x32__avx512(size_t rows, size_t cols, size_t kc, const float* a,
                                             const float* const* b_rows, size_t b_offset, float* c,
                                             size_t ldc, float alpha, float beta,
                                             const F32GemmTileEpilogue* ep);
}  // namespace avx512

}  // namespace peregrine::cpu
