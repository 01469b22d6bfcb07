// f32 GEMM micro-kernel, AVX-512F: MR = 14, NR = 32.
// Registers: 28 zmm accumulators (14 rows x 2 vectors of 16), 2 for the B row, 1 broadcast
// of A: 31 of 32. Each k step: 2 aligned loads of B, 14 broadcasts of A, 28 FMAs.
// Packing and edge contract: ukernels/f32_gemm_ukernels.h.
#include <immintrin.h>

#include "backends/cpu/ukernels/f32_gemm_ukernels.h"

// GCC 12's _mm512_max_ps / _mm512_min_ps pass an _mm512_undefined_ps() pass-through operand
// that -Wmaybe-uninitialized reports once inlined; it is never read (the mask is all ones).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace peregrine::cpu::avx512 {

namespace {

constexpr int kMr = 14;

// acc(14, 32) = A panel (kc, 14) * B panel (kc, 32), all 28 accumulators in registers.
inline __attribute__((always_inline)) void accumulate_14x32(size_t kc, const float* a,
                                                            const float* b, __m512 (&acc0)[kMr],
                                                            __m512 (&acc1)[kMr]) {
  __m512 r0[kMr], r1[kMr];
#pragma GCC unroll 14
  for (int i = 0; i < kMr; ++i) r0[i] = r1[i] = _mm512_setzero_ps();
  for (size_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_load_ps(b);       // B(p, 0:16)
    const __m512 b1 = _mm512_load_ps(b + 16);  // B(p, 16:32)
#pragma GCC unroll 14
    for (int i = 0; i < kMr; ++i) {
      const __m512 av = _mm512_set1_ps(a[i]);
      r0[i] = _mm512_fmadd_ps(av, b0, r0[i]);
      r1[i] = _mm512_fmadd_ps(av, b1, r1[i]);
    }
    a += kMr;
    b += 32;
  }
#pragma GCC unroll 14
  for (int i = 0; i < kMr; ++i) acc0[i] = r0[i], acc1[i] = r1[i];
}

// The loop as a call of its own for the fused kernel, so the epilogue's registers cannot push
// an accumulator onto the stack inside the K loop (as GCC 12 did with the AVX2 kernel).
__attribute__((noinline)) void accumulate_14x32_separately(size_t kc, const float* a,
                                                           const float* b, __m512 (&acc0)[kMr],
                                                           __m512 (&acc1)[kMr]) {
  accumulate_14x32(kc, a, b, acc0, acc1);
}

// The first R rows and V vectors of 16 columns of the 14 x 32 product (the panels keep their
// 14-row and 32-column strides), for edge tiles: a tile 4 columns wide costs half a full one,
// not all of it. A call of its own for the reason above.
template <int R, int V>
__attribute__((noinline)) void accumulate_part(size_t kc, const float* a, const float* b,
                                               __m512 (&acc0)[kMr], __m512 (&acc1)[kMr]) {
  __m512 r0[R], r1[R];
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i) r0[i] = r1[i] = _mm512_setzero_ps();
  for (size_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_load_ps(b);
    const __m512 b1 = V == 2 ? _mm512_load_ps(b + 16) : _mm512_setzero_ps();
#pragma GCC unroll 14
    for (int i = 0; i < R; ++i) {
      const __m512 av = _mm512_set1_ps(a[i]);
      r0[i] = _mm512_fmadd_ps(av, b0, r0[i]);
      if constexpr (V == 2) r1[i] = _mm512_fmadd_ps(av, b1, r1[i]);
    }
    a += kMr;
    b += 32;
  }
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i) acc0[i] = r0[i], acc1[i] = r1[i];
}

using AccumulatePartFn = void (*)(size_t, const float*, const float*, __m512 (&)[kMr],
                                  __m512 (&)[kMr]);
// kRowsOf<v>[r - 1]: the first r rows, v vectors.
template <int V>
constexpr AccumulatePartFn kRowsOf[kMr] = {
    accumulate_part<1, V>,  accumulate_part<2, V>,  accumulate_part<3, V>,  accumulate_part<4, V>,
    accumulate_part<5, V>,  accumulate_part<6, V>,  accumulate_part<7, V>,  accumulate_part<8, V>,
    accumulate_part<9, V>,  accumulate_part<10, V>, accumulate_part<11, V>, accumulate_part<12, V>,
    accumulate_part<13, V>, accumulate_part<14, V>};

}  // namespace

void f32_gemm_partial_ukernel_14x32__avx512(size_t rows, size_t cols, size_t kc, const float* a,
                                            const float* b, float* c, size_t ldc, float alpha,
                                            float beta, const F32GemmTileEpilogue* ep) {
  __m512 acc0[kMr], acc1[kMr];
  (cols <= 16 ? kRowsOf<1> : kRowsOf<2>)[rows - 1](kc, a, b, acc0, acc1);
  // Columns 0..15 and 16..31 that exist in C: every load and store below is masked to them.
  const __mmask16 m0 = static_cast<__mmask16>(cols >= 16 ? 0xFFFFu : (1u << cols) - 1u);
  const __mmask16 m1 = static_cast<__mmask16>(cols >= 32   ? 0xFFFFu
                                              : cols <= 16 ? 0u
                                                           : (1u << (cols - 16)) - 1u);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  __m512 col0 = _mm512_setzero_ps(), col1 = _mm512_setzero_ps();
  if (ep && ep->bias_col) {
    col0 = _mm512_maskz_loadu_ps(m0, ep->bias_col);
    col1 = _mm512_maskz_loadu_ps(m1, ep->bias_col + 16);
  }
  for (size_t i = 0; i < rows; ++i) {
    float* row = c + i * ldc;
    __m512 v0 = _mm512_mul_ps(va, acc0[i]), v1 = _mm512_mul_ps(va, acc1[i]);
    if (beta != 0.0f) {
      v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), v0);
      v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), v1);
    }
    if (ep) {
      __m512 add0 = col0, add1 = col1;
      if (ep->bias_row) {
        const __m512 br = _mm512_set1_ps(ep->bias_row[i]);
        add0 = _mm512_add_ps(add0, br);
        add1 = _mm512_add_ps(add1, br);
      }
      v0 = _mm512_add_ps(v0, add0);
      v1 = _mm512_add_ps(v1, add1);
      if (ep->residual) {
        const float* r = ep->residual + i * ep->ldr;
        v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, r));
        v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, r + 16));
      }
      const __m512 lo = _mm512_set1_ps(ep->lo), hi = _mm512_set1_ps(ep->hi);
      v0 = _mm512_min_ps(hi, _mm512_max_ps(lo, v0));
      v1 = _mm512_min_ps(hi, _mm512_max_ps(lo, v1));
    }
    _mm512_mask_storeu_ps(row, m0, v0);
    _mm512_mask_storeu_ps(row + 16, m1, v1);
  }
}

void f32_gemm_ukernel_14x32__avx512(size_t kc, const float* a, const float* b, float* c, size_t ldc,
                                    float alpha, float beta) {
  __m512 acc0[kMr], acc1[kMr];
  accumulate_14x32(kc, a, b, acc0, acc1);
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

void f32_gemm_fused_ukernel_14x32__avx512(size_t kc, const float* a, const float* b, float* c,
                                          size_t ldc, float alpha, float beta,
                                          const F32GemmTileEpilogue& ep) {
  __m512 acc0[kMr], acc1[kMr];
  accumulate_14x32_separately(kc, a, b, acc0, acc1);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const __m512 lo = _mm512_set1_ps(ep.lo), hi = _mm512_set1_ps(ep.hi);
  __m512 col0 = _mm512_setzero_ps(), col1 = _mm512_setzero_ps();
  if (ep.bias_col) {
    col0 = _mm512_loadu_ps(ep.bias_col);
    col1 = _mm512_loadu_ps(ep.bias_col + 16);
  }
  for (int i = 0; i < kMr; ++i) {
    float* row = c + i * ldc;
    __m512 v0 = _mm512_mul_ps(va, acc0[i]), v1 = _mm512_mul_ps(va, acc1[i]);
    if (beta != 0.0f) {
      v0 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(row), v0);
      v1 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(row + 16), v1);
    }
    __m512 add0 = col0, add1 = col1;
    if (ep.bias_row) {
      const __m512 br = _mm512_set1_ps(ep.bias_row[i]);
      add0 = _mm512_add_ps(add0, br);
      add1 = _mm512_add_ps(add1, br);
    }
    v0 = _mm512_add_ps(v0, add0);
    v1 = _mm512_add_ps(v1, add1);
    if (ep.residual) {
      const float* r = ep.residual + i * ep.ldr;
      v0 = _mm512_add_ps(v0, _mm512_loadu_ps(r));
      v1 = _mm512_add_ps(v1, _mm512_loadu_ps(r + 16));
    }
    // max/min return their second operand when either is NaN: v last keeps NaN.
    v0 = _mm512_min_ps(hi, _mm512_max_ps(lo, v0));
    v1 = _mm512_min_ps(hi, _mm512_max_ps(lo, v1));
    _mm512_storeu_ps(row, v0);
    _mm512_storeu_ps(row + 16, v1);
  }
}

}  // namespace peregrine::cpu::avx512
