// bf16 GEMM micro-kernel and packers (AVX-512 BF16: vdpbf16ps), float32 accumulation.
//
// Operands are bfloat16 in K pairs: one uint32 holds (element at k = 2q in its low half,
// k = 2q + 1 in its high half); an odd K is padded with a zero element. vdpbf16ps multiplies
// 16 such pairs of A and B and adds both products to 16 float32 accumulators.
//   packed A micro-panel: (kp, MR) uint32: for each pair q, the MR rows' pairs, contiguous.
//   packed B micro-panel: (kp, NR) uint32: for each pair q, the NR columns' pairs, contiguous,
//     64-byte aligned.
// Contract: C(rows, cols) = alpha * A(rows, 2 kp) * B(2 kp, cols) + beta * C, rows <= MR,
// cols <= NR; the tile is computed whole (panels are zero-padded) and only rows x cols of C
// are stored. beta == 0 never reads C. With `ep` (the last K block of a fused epilogue), the
// tile takes it in registers before the store (F32GemmTileEpilogue: bias, residual, clamp,
// HardSwish). Conversion from float32 rounds to nearest even.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/ukernels/f32_gemm_ukernels.h"

namespace peregrine::cpu {

using Bf16GemmUkernelFn = void (*)(size_t rows, size_t cols, size_t kp, const uint32_t* a,
                                   const uint32_t* b, float* c, size_t ldc, float alpha,
                                   float beta, const F32GemmTileEpilogue* ep);
// B panel from float32: row p (p < k) at src + p * ld, its first `cols` (<= NR) values; rows
// past k and columns past cols are zero. dst: (ceil(k / 2), NR) uint32.
using Bf16PackBFn = void (*)(const float* src, size_t ld, size_t k, size_t cols, uint32_t* dst);
// The tile with B read in place: pair row q at b_rows[q] + b_offset, its first `cols` pairs
// (nothing past them is read). For convolution over phase planes of channel pairs.
using Bf16GemmIndirectUkernelFn = void (*)(size_t rows, size_t cols, size_t kp, const uint32_t* a,
                                           const uint32_t* const* b_rows, size_t b_offset, float* c,
                                           size_t ldc, float alpha, float beta,
                                           const F32GemmTileEpilogue* ep);
// dst[j] = the pair (r0[j], r1[j]) for j < n; r1 nullptr gives zero high halves.
using Bf16InterleaveRowsFn = void (*)(const float* r0, const float* r1, size_t n, uint32_t* dst);
// A panel from float32: row i (i < rows <= MR) at src + i * lda, k values; rows past `rows`
// are zero. dst: (ceil(k / 2), MR) uint32.
using Bf16PackAFn = void (*)(const float* src, size_t lda, size_t rows, size_t k, uint32_t* dst);

namespace avx512bf16 {
inline constexpr int kBf16GemmMr = 14;
inline constexpr int kBf16GemmNr = 32;
void bf16_gemm_ukernel_14x32__avx512bf16(size_t rows, size_t cols, size_t kp, const uint32_t* a,
                                         const uint32_t* b, float* c, size_t ldc, float alpha,
                                         float beta, const F32GemmTileEpilogue* ep);
// The same tile with A read in place, unpacked: row i's pairs at a + i * kBf16GemmRowPairs
// (kp <= kBf16GemmRowPairs), as a float32 row converted to bf16 lies. For operands made per
// call and small enough for L1, where packing would cost more than the rows' strided
// broadcasts (the bf16 attention tile's softmax weights, kernels/attention-avx512bf16.cc).
inline constexpr size_t kBf16GemmRowPairs = 64;
void bf16_gemm_ukernel_14x32_a_rows__avx512bf16(size_t rows, size_t cols, size_t kp,
                                                const uint32_t* a, const uint32_t* b, float* c,
                                                size_t ldc, float alpha, float beta,
                                                const F32GemmTileEpilogue* ep);
void bf16_gemm_indirect_ukernel_14x32__avx512bf16(size_t rows, size_t cols, size_t kp,
                                                  const uint32_t* a, const uint32_t* const* b_rows,
                                                  size_t b_offset, float* c, size_t ldc,
                                                  float alpha, float beta,
                                                  const F32GemmTileEpilogue* ep);
void bf16_interleave_rows__avx512bf16(const float* r0, const float* r1, size_t n, uint32_t* dst);
void bf16_pack_b_32__avx512bf16(const float* src, size_t ld, size_t k, size_t cols, uint32_t* dst);
void bf16_pack_a_14__avx512bf16(const float* src, size_t lda, size_t rows, size_t k,
                                uint32_t* dst);
}  // namespace avx512bf16

// float32 -> bfloat16, round to nearest even (NaN stays a quiet NaN): the scalar packers'
// conversion. vcvtneps2bf16 rounds normal numbers the same way (it flushes denormals to zero).
inline uint16_t float_to_bf16_bits(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_bits_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

}  // namespace peregrine::cpu
