// Packing of a full (kc, 14) A micro-panel from row-major A, AVX-512F: 16 columns of the 14
// rows are loaded as vectors and transposed in registers, so each packed k step is one
// (masked) 14-float store. The generic copy gathers one element at a time (a visible share even
// of peregrine_gemm_bench's 1024^3 SGEMM, whose A is packed once).
#include <immintrin.h>

#include "backends/cpu/ukernels/f32_gemm_ukernels.h"
#include "backends/cpu/ukernels/f32_transpose_avx512.h"

// GCC 12's _mm512_shuffle_f32x4 passes an _mm512_undefined_ps() pass-through operand that
// -W(maybe-)uninitialized reports once inlined; it is never read (the mask is all ones).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace peregrine::cpu::avx512 {

namespace {

constexpr int kMr = 14;
constexpr __mmask16 kRowMask = (1u << kMr) - 1;

// Columns p .. p + count - 1 (count <= 16) of the 14 rows to dst (count packed k steps).
inline void pack_columns(const float* src, size_t lda, size_t count, __mmask16 load_mask,
                         float* dst) {
  __m512 r[16];
  for (int i = 0; i < kMr; ++i) r[i] = _mm512_maskz_loadu_ps(load_mask, src + i * lda);
  r[14] = r[15] = _mm512_setzero_ps();
  transpose16x16(r);
  for (size_t j = 0; j < count; ++j) _mm512_mask_storeu_ps(dst + j * kMr, kRowMask, r[j]);
}

}  // namespace

void f32_gemm_pack_a_14__avx512(const float* a, size_t lda, size_t kc, float* dst) {
  size_t p = 0;
  for (; p + 16 <= kc; p += 16) pack_columns(a + p, lda, 16, 0xFFFF, dst + p * kMr);
  if (p < kc) {
    const size_t rest = kc - p;
    pack_columns(a + p, lda, rest, static_cast<__mmask16>((1u << rest) - 1), dst + p * kMr);
  }
}

}  // namespace peregrine::cpu::avx512
