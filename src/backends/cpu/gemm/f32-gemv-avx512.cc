// Small-M panel kernel, AVX-512F (contract: gemm/f32_gemv.h). NR = 32: each K step loads the
// panel's 32 floats once (two vectors) and does one broadcast + two FMAs per row of A; m <= 2
// alternates two accumulator sets so the FMA chains do not serialize on their latency.
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/gemm/f32_gemv.h"

namespace peregrine::cpu::avx512 {

namespace {

template <int M, int kSets>
void panel_rows(size_t k, const float *a, size_t lda, const float *packed_b, size_t panels,
                size_t panel, size_t kc, float *tile) {
  __m512 acc[kSets][M][2];
  for (int s = 0; s < kSets; ++s)
    for (int i = 0; i < M; ++i) acc[s][i][0] = acc[s][i][1] = _mm512_setzero_ps();
  for (size_t p0 = 0; p0 < k; p0 += kc) {
    const size_t kcur = std::min(kc, k - p0);
    const float *b = packed_b + p0 * panels * 32 + panel * kcur * 32;  // (kcur, 32)
    const float *ap = a + p0;
    size_t p = 0;
    for (; p + kSets <= kcur; p += kSets) {
      for (int s = 0; s < kSets; ++s) {
        const __m512 b0 = _mm512_load_ps(b + (p + s) * 32),
                     b1 = _mm512_load_ps(b + (p + s) * 32 + 16);
        for (int i = 0; i < M; ++i) {
          const __m512 av = _mm512_set1_ps(ap[i * lda + p + s]);
          acc[s][i][0] = _mm512_fmadd_ps(av, b0, acc[s][i][0]);
          acc[s][i][1] = _mm512_fmadd_ps(av, b1, acc[s][i][1]);
        }
      }
    }
    for (; p < kcur; ++p) {
      const __m512 b0 = _mm512_load_ps(b + p * 32), b1 = _mm512_load_ps(b + p * 32 + 16);
      for (int i = 0; i < M; ++i) {
        const __m512 av = _mm512_set1_ps(ap[i * lda + p]);
        acc[0][i][0] = _mm512_fmadd_ps(av, b0, acc[0][i][0]);
        acc[0][i][1] = _mm512_fmadd_ps(av, b1, acc[0][i][1]);
      }
    }
  }
  for (int i = 0; i < M; ++i) {
    __m512 lo = acc[0][i][0], hi = acc[0][i][1];
    for (int s = 1; s < kSets; ++s) {
      lo = _mm512_add_ps(lo, acc[s][i][0]);
      hi = _mm512_add_ps(hi, acc[s][i][1]);
    }
    _mm512_storeu_ps(tile + i * 32, lo);
    _mm512_storeu_ps(tile + i * 32 + 16, hi);
  }
}

}  // namespace

void f32_gemv_panel_32__avx512(size_t m, size_t k, const float *a, size_t lda,
                               const float *packed_b, size_t panels, size_t panel, size_t kc,
                               float *tile) {
  switch (m) {
    case 1:
      return panel_rows<1, 2>(k, a, lda, packed_b, panels, panel, kc, tile);
    case 2:
      return panel_rows<2, 2>(k, a, lda, packed_b, panels, panel, kc, tile);
    default:  // m == 3 (kGemvMaxM)
      return panel_rows<3, 1>(k, a, lda, packed_b, panels, panel, kc, tile);
  }
}

}  // namespace peregrine::cpu::avx512
