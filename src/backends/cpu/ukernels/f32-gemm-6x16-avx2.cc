// f32 GEMM micro-kernel, AVX2 + FMA: MR = 6, NR = 16.
// Registers: 12 ymm accumulators (6 rows x 2 vectors of 8), 2 for the B row, 1 broadcast of A:
// 15 of 16. Each k step: 2 aligned loads of B, 6 broadcasts of A, 12 FMAs.
// Packing and edge contract: ukernels/f32_gemm_ukernels.h.
#include <immintrin.h>

#include "backends/cpu/ukernels/f32_gemm_ukernels.h"

namespace peregrine::cpu::avx2 {

namespace {

// acc(6, 16) = A panel (kc, 6) * B panel (kc, 16), twelve accumulators in registers.
inline __attribute__((always_inline)) void accumulate_6x16(size_t kc, const float* a,
                                                           const float* b, float* c, size_t ldc,
                                                           __m256 (&acc)[6][2]) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  // C is touched only after the K loop; start pulling its rows in now (ldc is often a power
  // of two, so the rows would otherwise miss together at the end).
  for (int i = 0; i < 6; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 15), _MM_HINT_T0);
  }
#pragma GCC unroll 4
  for (size_t p = 0; p < kc; ++p) {
    // B 4 and A 16 k steps ahead, as the AVX-512 kernel (ukernels/f32-gemm-14x32-avx512.cc):
    // faster per node on ResNet-50 and MobileNetV2 at PEREGRINE_ISA=avx2 on Zen 4.
    _mm_prefetch(reinterpret_cast<const char*>(b + 4 * 16), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(a + 16 * 6), _MM_HINT_T0);
    const __m256 b0 = _mm256_load_ps(b);      // B(p, 0:8)
    const __m256 b1 = _mm256_load_ps(b + 8);  // B(p, 8:16)
    __m256 av = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(av, b0, c00);
    c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(av, b0, c10);
    c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(av, b0, c20);
    c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(av, b0, c30);
    c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(av, b0, c40);
    c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(av, b0, c50);
    c51 = _mm256_fmadd_ps(av, b1, c51);
    a += 6;
    b += 16;
  }
  acc[0][0] = c00, acc[0][1] = c01, acc[1][0] = c10, acc[1][1] = c11;
  acc[2][0] = c20, acc[2][1] = c21, acc[3][0] = c30, acc[3][1] = c31;
  acc[4][0] = c40, acc[4][1] = c41, acc[5][0] = c50, acc[5][1] = c51;
}

// The same loop as a call of its own, for the fused kernel: with the epilogue in one body GCC
// 12 kept an accumulator on the stack inside the K loop (a store-to-load chain on every k
// step, slower in BM_ConvGemmResNet50BiasRelu); the accumulators now cross to the epilogue
// once, through memory.
__attribute__((noinline)) void accumulate_6x16_separately(size_t kc, const float* a,
                                                          const float* b, float* c, size_t ldc,
                                                          __m256 (&acc)[6][2]) {
  accumulate_6x16(kc, a, b, c, ldc, acc);
}

// The kernel body; kFused adds the tile epilogue (ukernels/f32_gemm_ukernels.h) before the store.
template <bool kFused>
inline __attribute__((always_inline)) void gemm_6x16(size_t kc, const float* a, const float* b,
                                                     float* c, size_t ldc, float alpha, float beta,
                                                     const F32GemmTileEpilogue* ep) {
  __m256 acc[6][2];
  if constexpr (kFused) {
    accumulate_6x16_separately(kc, a, b, c, ldc, acc);
  } else {
    accumulate_6x16(kc, a, b, c, ldc, acc);
  }
  const __m256 va = _mm256_set1_ps(alpha);
  if constexpr (kFused) {
    const __m256 vb = _mm256_set1_ps(beta);
    const __m256 lo = _mm256_set1_ps(ep->lo), hi = _mm256_set1_ps(ep->hi);
    __m256 col0 = _mm256_setzero_ps(), col1 = _mm256_setzero_ps();
    if (ep->bias_col) {
      col0 = _mm256_loadu_ps(ep->bias_col);
      col1 = _mm256_loadu_ps(ep->bias_col + 8);
    }
    for (int i = 0; i < 6; ++i) {
      float* row = c + i * ldc;
      __m256 v0 = _mm256_mul_ps(va, acc[i][0]), v1 = _mm256_mul_ps(va, acc[i][1]);
      if (beta != 0.0f) {
        v0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(row), v0);
        v1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(row + 8), v1);
      }
      __m256 add0 = col0, add1 = col1;
      if (ep->bias_row) {
        const __m256 br = _mm256_broadcast_ss(ep->bias_row + i);
        add0 = _mm256_add_ps(add0, br);
        add1 = _mm256_add_ps(add1, br);
      }
      v0 = _mm256_add_ps(v0, add0);
      v1 = _mm256_add_ps(v1, add1);
      if (ep->residual) {
        const float* r = ep->residual + i * ep->ldr;
        v0 = _mm256_add_ps(v0, _mm256_loadu_ps(r));
        v1 = _mm256_add_ps(v1, _mm256_loadu_ps(r + 8));
      }
      // max/min return their second operand when either is NaN: v last keeps NaN.
      v0 = _mm256_min_ps(hi, _mm256_max_ps(lo, v0));
      v1 = _mm256_min_ps(hi, _mm256_max_ps(lo, v1));
      if (ep->hardswish) {
        const __m256 sixth = _mm256_set1_ps(1.0f / 6.0f), half = _mm256_set1_ps(0.5f);
        const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
        v0 = _mm256_mul_ps(v0, _mm256_min_ps(_mm256_max_ps(_mm256_fmadd_ps(v0, sixth, half), zero), one));
        v1 = _mm256_mul_ps(v1, _mm256_min_ps(_mm256_max_ps(_mm256_fmadd_ps(v1, sixth, half), zero), one));
      }
      _mm256_storeu_ps(row, v0);
      _mm256_storeu_ps(row + 8, v1);
    }
    return;
  }
  if (beta == 0.0f) {
    for (int i = 0; i < 6; ++i) {
      _mm256_storeu_ps(c + i * ldc, _mm256_mul_ps(va, acc[i][0]));
      _mm256_storeu_ps(c + i * ldc + 8, _mm256_mul_ps(va, acc[i][1]));
    }
  } else {
    const __m256 vb = _mm256_set1_ps(beta);
    for (int i = 0; i < 6; ++i) {
      float* row = c + i * ldc;
      _mm256_storeu_ps(row,
                       _mm256_fmadd_ps(vb, _mm256_loadu_ps(row), _mm256_mul_ps(va, acc[i][0])));
      _mm256_storeu_ps(row + 8,
                       _mm256_fmadd_ps(vb, _mm256_loadu_ps(row + 8), _mm256_mul_ps(va, acc[i][1])));
    }
  }
}

}  // namespace

void f32_gemm_ukernel_6x16__avx2(size_t kc, const float* a, const float* b, float* c, size_t ldc,
                                 float alpha, float beta) {
  gemm_6x16<false>(kc, a, b, c, ldc, alpha, beta, nullptr);
}

void f32_gemm_fused_ukernel_6x16__avx2(size_t kc, const float* a, const float* b, float* c,
                                       size_t ldc, float alpha, float beta,
                                       const F32GemmTileEpilogue& ep) {
  gemm_6x16<true>(kc, a, b, c, ldc, alpha, beta, &ep);
}

}  // namespace peregrine::cpu::avx2
