// f32 elementwise unary maps, AVX2 + FMA: 8 floats per step, the tail (n % 8) through a masked
// load / store of the same vector code, so every element gets the same approximation and
// nothing past n is touched. Math: ukernels/f32_vmath_avx2.h. Contract: f32_vector_ukernels.h.
#include <immintrin.h>

#include "backends/cpu/ukernels/f32_vector_ukernels.h"
#include "backends/cpu/ukernels/f32_vmath_avx2.h"

namespace peregrine::cpu::avx2 {

namespace {

// Lanes [0, count) set, count in [0, 8].
inline __m256i tail_mask(size_t count) {
  alignas(32) static const int kMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMask + 8 - count));
}

template <typename F>
inline void map_unary(const float* x, float* y, size_t n, F f) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i mask = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, mask, f(_mm256_maskload_ps(x + i, mask)));
  }
}

}  // namespace

void f32_vunary__avx2(UnaryOp op, const float* x, float* y, size_t n) {
  switch (op) {
    case UnaryOp::kRelu:
      return map_unary(x, y, n, [](__m256 v) { return _mm256_max_ps(v, _mm256_setzero_ps()); });
    case UnaryOp::kSigmoid:
      return map_unary(x, y, n, sigmoid_ps);
    case UnaryOp::kSilu:
      return map_unary(x, y, n, silu_ps);
    case UnaryOp::kTanh:
      return map_unary(x, y, n, tanh_ps);
    case UnaryOp::kErf:
      return map_unary(x, y, n, erf_ps);
    case UnaryOp::kExp:
      return map_unary(x, y, n, exp_ps);
    case UnaryOp::kGelu:
      return map_unary(x, y, n, gelu_erf_ps);
    case UnaryOp::kGeluTanh:
      return map_unary(x, y, n, gelu_tanh_ps);
  }
}

}  // namespace peregrine::cpu::avx2
