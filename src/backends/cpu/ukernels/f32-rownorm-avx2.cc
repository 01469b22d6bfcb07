// Row normalizations, AVX2 + FMA: Softmax, LayerNorm and RMSNorm of one contiguous row, 8 floats
// per step, tails element by element (the softmax tail through a masked vector so every element
// gets the same exp approximation). Contract: ukernels/f32_vector_ukernels.h.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/ukernels/f32_vector_ukernels.h"
#include "backends/cpu/ukernels/f32_vmath_avx2.h"
#include "backends/cpu/ukernels/f32_vreduce_avx2.h"

namespace peregrine::cpu::avx2 {

// Three passes: max; y = exp(x - max) and their sum; y *= 1 / sum. Terms below FLT_MIN are 0
// (exp_flush_ps): no denormal arithmetic on masked scores.
void f32_softmax_row__avx2(const float* x, float* y, size_t n) {
  const __m256 vmax = _mm256_set1_ps(array_max(x, n));
  __m256 vsum = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_flush_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
    vsum = _mm256_add_ps(vsum, e);
    _mm256_storeu_ps(y + i, e);
  }
  if (i < n) {
    alignas(32) static const int kMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                              0,  0,  0,  0,  0,  0,  0,  0};
    const __m256i mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMask + 8 - (n - i)));
    const __m256 e = exp_flush_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), vmax));
    vsum = _mm256_add_ps(vsum, _mm256_and_ps(e, _mm256_castsi256_ps(mask)));
    _mm256_maskstore_ps(y + i, mask, e);
  }
  const __m256 scale = _mm256_set1_ps(1.0f / horizontal_sum(vsum));
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), scale));
  for (; i < n; ++i) y[i] *= _mm256_cvtss_f32(scale);
}

namespace {

// Softmax down 8 columns (the lanes set in `mask` when kMasked) of a (len, 8) block with row
// stride `stride`, three passes: max, exp and sum, scale. Each row access is 8 contiguous floats.
template <bool kMasked>
inline void softmax_column_block(const float* x, float* y, size_t len, size_t stride,
                                 __m256i mask) {
  auto load = [&](const float* p) {
    return kMasked ? _mm256_maskload_ps(p, mask) : _mm256_loadu_ps(p);
  };
  auto store = [&](float* p, __m256 v) {
    if (kMasked) {
      _mm256_maskstore_ps(p, mask, v);
    } else {
      _mm256_storeu_ps(p, v);
    }
  };
  __m256 vmax = _mm256_set1_ps(-__builtin_inff());
  for (size_t k = 0; k < len; ++k) vmax = _mm256_max_ps(vmax, load(x + k * stride));
  __m256 vsum = _mm256_setzero_ps();
  for (size_t k = 0; k < len; ++k) {
    const __m256 e = exp_flush_ps(_mm256_sub_ps(load(x + k * stride), vmax));
    vsum = _mm256_add_ps(vsum, e);
    store(y + k * stride, e);
  }
  const __m256 scale = _mm256_div_ps(_mm256_set1_ps(1.0f), vsum);
  for (size_t k = 0; k < len; ++k)
    store(y + k * stride, _mm256_mul_ps(load(y + k * stride), scale));
}

}  // namespace

// Columns 8 at a time, the last partial block through masked loads / stores.
void f32_softmax_columns__avx2(const float* x, float* y, size_t len, size_t stride, size_t width) {
  alignas(32) static const int kMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  size_t j = 0;
  for (; j + 8 <= width; j += 8)
    softmax_column_block<false>(x + j, y + j, len, stride, _mm256_setzero_si256());
  if (j < width)
    softmax_column_block<true>(
        x + j, y + j, len, stride,
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMask + 8 - (width - j))));
}

// Three passes: mean; centred sum of squares; normalize, scale and shift.
void f32_layer_norm_row__avx2(const float* x, const float* gamma, const float* beta, float eps,
                              float* y, size_t n) {
  const float mean = array_sum(x, n) / static_cast<float>(n);
  const __m256 vmean = _mm256_set1_ps(mean);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vmean);
    const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vmean);
    acc0 = _mm256_fmadd_ps(d0, d0, acc0);
    acc1 = _mm256_fmadd_ps(d1, d1, acc1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vmean);
    acc0 = _mm256_fmadd_ps(d, d, acc0);
  }
  float sq = horizontal_sum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sq += (x[i] - mean) * (x[i] - mean);
  const float inv_std = 1.0f / std::sqrt(sq / static_cast<float>(n) + eps);
  const __m256 vinv = _mm256_set1_ps(inv_std);
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(gamma + i), vinv);
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vmean);
    const __m256 b = beta ? _mm256_loadu_ps(beta + i) : _mm256_setzero_ps();
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(d, g, b));
  }
  for (; i < n; ++i) y[i] = (x[i] - mean) * (gamma[i] * inv_std) + (beta ? beta[i] : 0.0f);
}

// Two passes: sum of squares (two accumulators to hide the FMA latency); scale.
void f32_rms_norm_row__avx2(const float* x, const float* gamma, float eps, float* y, size_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    acc0 = _mm256_fmadd_ps(v0, v0, acc0);
    acc1 = _mm256_fmadd_ps(v1, v1, acc1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    acc0 = _mm256_fmadd_ps(v, v, acc0);
  }
  float sq = horizontal_sum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sq += x[i] * x[i];
  const float inv_rms = 1.0f / std::sqrt(sq / static_cast<float>(n) + eps);
  const __m256 vinv = _mm256_set1_ps(inv_rms);
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(gamma + i), vinv);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), g));
  }
  for (; i < n; ++i) y[i] = x[i] * (gamma[i] * inv_rms);
}

}  // namespace peregrine::cpu::avx2
