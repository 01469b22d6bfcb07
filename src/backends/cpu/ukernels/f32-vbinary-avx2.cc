// f32 elementwise binary maps with scalar broadcast, AVX2: y[i] = a[i * a_step] op b[i * b_step],
// steps 0 or 1; 8 floats per step (32 when both steps are 1, to keep two loads in flight),
// tail element by element. Division is a true division (IEEE, like the reference).
// Contract: ukernels/f32_vector_ukernels.h.
#include <immintrin.h>

#include "backends/cpu/ukernels/f32_vector_ukernels.h"

namespace peregrine::cpu::avx2 {

namespace {

template <BinaryOp kOp>
inline __m256 apply(__m256 a, __m256 b) {
  if constexpr (kOp == BinaryOp::kAdd) return _mm256_add_ps(a, b);
  if constexpr (kOp == BinaryOp::kSub) return _mm256_sub_ps(a, b);
  if constexpr (kOp == BinaryOp::kMul) return _mm256_mul_ps(a, b);
  return _mm256_div_ps(a, b);
}

template <BinaryOp kOp>
inline float apply(float a, float b) {
  if constexpr (kOp == BinaryOp::kAdd) return a + b;
  if constexpr (kOp == BinaryOp::kSub) return a - b;
  if constexpr (kOp == BinaryOp::kMul) return a * b;
  return a / b;
}

template <BinaryOp kOp>
void binary(const float* a, size_t a_step, const float* b, size_t b_step, float* y, size_t n) {
  size_t i = 0;
  if (a_step == 1 && b_step == 1) {
    for (; i + 32 <= n; i += 32) {
      const __m256 r0 = apply<kOp>(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
      const __m256 r1 = apply<kOp>(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8));
      const __m256 r2 = apply<kOp>(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16));
      const __m256 r3 = apply<kOp>(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24));
      _mm256_storeu_ps(y + i, r0);
      _mm256_storeu_ps(y + i + 8, r1);
      _mm256_storeu_ps(y + i + 16, r2);
      _mm256_storeu_ps(y + i + 24, r3);
    }
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(y + i, apply<kOp>(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; ++i) y[i] = apply<kOp>(a[i], b[i]);
  } else if (a_step == 1) {
    const __m256 vb = _mm256_set1_ps(b[0]);
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, apply<kOp>(_mm256_loadu_ps(a + i), vb));
    for (; i < n; ++i) y[i] = apply<kOp>(a[i], b[0]);
  } else if (b_step == 1) {
    const __m256 va = _mm256_set1_ps(a[0]);
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, apply<kOp>(va, _mm256_loadu_ps(b + i)));
    for (; i < n; ++i) y[i] = apply<kOp>(a[0], b[i]);
  } else {
    const float v = apply<kOp>(a[0], b[0]);
    for (; i < n; ++i) y[i] = v;
  }
}

}  // namespace

void f32_vbinary__avx2(BinaryOp op, const float* a, size_t a_step, const float* b,
                       size_t b_step, float* y, size_t n) {
  switch (op) {
    case BinaryOp::kAdd:
      return binary<BinaryOp::kAdd>(a, a_step, b, b_step, y, n);
    case BinaryOp::kSub:
      return binary<BinaryOp::kSub>(a, a_step, b, b_step, y, n);
    case BinaryOp::kMul:
      return binary<BinaryOp::kMul>(a, a_step, b, b_step, y, n);
    case BinaryOp::kDiv:
      return binary<BinaryOp::kDiv>(a, a_step, b, b_step, y, n);
  }
}

}  // namespace peregrine::cpu::avx2
