// f32 GEMM micro-kernel, AVX-512F: MR = 14, NR = 32.
// Registers: 28 zmm accumulators (14 rows x 2 vectors of 16), 2 for the B row, 1 broadcast
// of A: 31 of 32. Each k step: 2 aligned loads of B, 14 broadcasts of A, 28 FMAs.
// Packing and edge contract: ukernels/f32_gemm_ukernels.h.
#include <immintrin.h>

#include "backends/cpu/ukernels/f32_gemm_ukernels.h"

namespace peregrine::cpu::avx512 {

void f32_gemm_ukernel_14x32__avx512(size_t kc, const float* a, const float* b, float* c, size_t ldc,
                                    float alpha, float beta) {
  constexpr int kMr = 14;
  __m512 acc0[kMr], acc1[kMr];
#pragma GCC unroll 14
  for (int i = 0; i < kMr; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
  for (size_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_load_ps(b);       // B(p, 0:16)
    const __m512 b1 = _mm512_load_ps(b + 16);  // B(p, 16:32)
#pragma GCC unroll 14
    for (int i = 0; i < kMr; ++i) {
      const __m512 av = _mm512_set1_ps(a[i]);
      acc0[i] = _mm512_fmadd_ps(av, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(av, b1, acc1[i]);
    }
    a += kMr;
    b += 32;
  }
  const __m512 va = _mm512_set1_ps(alpha);
  if (beta == 0.0f) {
#pragma GCC unroll 14
    for (int i = 0; i < kMr; ++i) {
      _mm512_storeu_ps(c + i * ldc, _mm512_mul_ps(va, acc0[i]));
      _mm512_storeu_ps(c + i * ldc + 16, _mm512_mul_ps(va, acc1[i]));
    }
  } else {
    const __m512 vb = _mm512_set1_ps(beta);
#pragma GCC unroll 14
    for (int i = 0; i < kMr; ++i) {
      float* row = c + i * ldc;
      _mm512_storeu_ps(row, _mm512_fmadd_ps(vb, _mm512_loadu_ps(row), _mm512_mul_ps(va, acc0[i])));
      _mm512_storeu_ps(row + 16,
                       _mm512_fmadd_ps(vb, _mm512_loadu_ps(row + 16), _mm512_mul_ps(va, acc1[i])));
    }
  }
}

}  // namespace peregrine::cpu::avx512
