// Rotary embedding of one head, AVX2 + FMA, 8 channels per step; the last pairs go through
// the scalar kernel. Contract: ukernels/f32_vector_ukernels.h.
#include <immintrin.h>

#include "backends/cpu/ukernels/f32_vector_ukernels.h"

namespace peregrine::cpu::avx2 {

void f32_rotary__avx2(const float* x, const float* c, const float* s, float* y, size_t half,
                      bool interleaved) {
  size_t i = 0;
  if (interleaved) {
    // 4 pairs per vector: y = x * (c0 c0 c1 c1 ..) -/+ swap(x) * (s0 s0 s1 s1 ..), the even
    // lanes subtracting (fmaddsub).
    const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    for (; i + 4 <= half; i += 4) {
      const __m256 v = _mm256_loadu_ps(x + 2 * i);
      const __m256 cv = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(c + i)), dup);
      const __m256 sv = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(s + i)), dup);
      const __m256 swapped = _mm256_permute_ps(v, 0xB1);  // (x1, x0) in each pair
      _mm256_storeu_ps(y + 2 * i, _mm256_fmaddsub_ps(v, cv, _mm256_mul_ps(swapped, sv)));
    }
  } else {
    for (; i + 8 <= half; i += 8) {
      const __m256 x1 = _mm256_loadu_ps(x + i), x2 = _mm256_loadu_ps(x + i + half);
      const __m256 cv = _mm256_loadu_ps(c + i), sv = _mm256_loadu_ps(s + i);
      _mm256_storeu_ps(y + i, _mm256_fmsub_ps(cv, x1, _mm256_mul_ps(sv, x2)));
      _mm256_storeu_ps(y + i + half, _mm256_fmadd_ps(sv, x1, _mm256_mul_ps(cv, x2)));
    }
  }
  if (i == half) return;
  // The tail: the remaining pairs, as one head of half - i pairs.
  if (interleaved) {
    scalar::f32_rotary__scalar(x + 2 * i, c + i, s + i, y + 2 * i, half - i, true);
  } else {
    for (; i < half; ++i) {
      const float x1 = x[i], x2 = x[i + half];
      y[i] = c[i] * x1 - s[i] * x2;
      y[i + half] = s[i] * x1 + c[i] * x2;
    }
  }
}

}  // namespace peregrine::cpu::avx2
