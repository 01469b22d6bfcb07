// Small-M panel kernel, AVX2 + FMA (contract: gemm/f32_gemv.h). NR = 16: each K step loads the
// panel's 16 floats once (two vectors) and does one broadcast + two FMAs per row of A; m <= 2
// alternates two accumulator sets so the FMA chains do not serialize on their latency.
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/gemm/f32_gemv.h"

namespace peregrine::cpu::avx2 {

namespace {

template <int M, int kSets>
void panel_rows(size_t k, const float *a, size_t lda, const float *packed_b, size_t panels,
                size_t panel, size_t kc, float *tile) {
  __m256 acc[kSets][M][2];
  for (int s = 0; s < kSets; ++s)
    for (int i = 0; i < M; ++i) acc[s][i][0] = acc[s][i][1] = _mm256_setzero_ps();
  for (size_t p0 = 0; p0 < k; p0 += kc) {
    const size_t kcur = std::min(kc, k - p0);
    const float *b = packed_b + p0 * panels * 16 + panel * kcur * 16;  // (kcur, 16)
    const float *ap = a + p0;
    size_t p = 0;
    for (; p + kSets <= kcur; p += kSets) {
      for (int s = 0; s < kSets; ++s) {
        const __m256 b0 = _mm256_load_ps(b + (p + s) * 16),
                     b1 = _mm256_load_ps(b + (p + s) * 16 + 8);
        for (int i = 0; i < M; ++i) {
          const __m256 av = _mm256_broadcast_ss(ap + i * lda + p + s);
          acc[s][i][0] = _mm256_fmadd_ps(av, b0, acc[s][i][0]);
          acc[s][i][1] = _mm256_fmadd_ps(av, b1, acc[s][i][1]);
        }
      }
    }
    for (; p < kcur; ++p) {
      const __m256 b0 = _mm256_load_ps(b + p * 16), b1 = _mm256_load_ps(b + p * 16 + 8);
      for (int i = 0; i < M; ++i) {
        const __m256 av = _mm256_broadcast_ss(ap + i * lda + p);
        acc[0][i][0] = _mm256_fmadd_ps(av, b0, acc[0][i][0]);
        acc[0][i][1] = _mm256_fmadd_ps(av, b1, acc[0][i][1]);
      }
    }
  }
  for (int i = 0; i < M; ++i) {
    __m256 lo = acc[0][i][0], hi = acc[0][i][1];
    for (int s = 1; s < kSets; ++s) {
      lo = _mm256_add_ps(lo, acc[s][i][0]);
      hi = _mm256_add_ps(hi, acc[s][i][1]);
    }
    _mm256_storeu_ps(tile + i * 16, lo);
    _mm256_storeu_ps(tile + i * 16 + 8, hi);
  }
}

}  // namespace

void f32_gemv_panel_16__avx2(size_t m, size_t k, const float *a, size_t lda, const float *packed_b,
                             size_t panels, size_t panel, size_t kc, float *tile) {
  switch (m) {
    case 1:
      return panel_rows<1, 2>(k, a, lda, packed_b, panels, panel, kc, tile);
    case 2:
      return panel_rows<2, 2>(k, a, lda, packed_b, panels, panel, kc, tile);
    default:  // m == 3 (kGemvMaxM)
      return panel_rows<3, 1>(k, a, lda, packed_b, panels, panel, kc, tile);
  }
}

}  // namespace peregrine::cpu::avx2
