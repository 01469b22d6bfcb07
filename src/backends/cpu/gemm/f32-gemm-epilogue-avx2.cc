// The GEMM epilogue compiled with avx2 flags (see gemm/epilogue_impl.h). The transcendental
// activations (Sigmoid, SiLU, Tanh, GELU in both forms) run as a second pass over each row of
// the hot tile with the vectorized approximations of ukernels/f32_vmath_avx2.h (errors stated
// there) instead of element-by-element std:: calls.
#include <immintrin.h>

#include "backends/cpu/gemm/epilogue_impl.h"
#include "backends/cpu/ukernels/f32_vmask_avx2.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"

namespace peregrine::cpu::avx2 {

namespace {

// v * clamp(v / 6 + 1/2, 0, 1) over one row, 8 lanes at a time, the tail masked. GCC leaves
// the plain loop scalar, a compare and branch per element (bench/real_models
// mobilenet_v3_large: HardSwish after its depthwise convs; docs/DESIGN.md).
void hardswish_row(float* x, size_t n) {
  const __m256 sixth = _mm256_set1_ps(1.0f / 6.0f), half = _mm256_set1_ps(0.5f);
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  auto f = [&](__m256 v) {
    const __m256 t = _mm256_min_ps(_mm256_max_ps(_mm256_fmadd_ps(v, sixth, half), zero), one);
    return _mm256_mul_ps(v, t);
  };
  size_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(x + j, f(_mm256_loadu_ps(x + j)));
  if (j < n) {
    const __m256i m = tail_mask(static_cast<int64_t>(n - j));
    _mm256_maskstore_ps(x + j, m, f(_mm256_maskload_ps(x + j, m)));
  }
}

}  // namespace

void f32_gemm_epilogue__avx2(float* c, size_t ldc, size_t rows, size_t cols, size_t row0,
                             size_t col0, const GemmEpilogue& ep) {
  UnaryOp op = UnaryOp::kSigmoid;  // set by vector_activation unless HardSwish
  const bool hardswish = ep.activation == Activation::kHardSwish;
  if (!hardswish && !vector_activation(ep.activation, &op)) {
    apply_epilogue(c, ldc, rows, cols, row0, col0, ep);
    return;
  }
  GemmEpilogue linear = ep;  // bias and residual first, then the activation in place
  linear.activation = Activation::kNone;
  apply_epilogue(c, ldc, rows, cols, row0, col0, linear);
  if (ldc == cols) {  // contiguous rows (a GEMV's column): one call, not one per element
    cols *= rows;
    rows = 1;
  }
  for (size_t i = 0; i < rows; ++i) {
    if (hardswish)
      hardswish_row(c + i * ldc, cols);
    else
      f32_vunary__avx2(op, c + i * ldc, c + i * ldc, cols);
  }
}

}  // namespace peregrine::cpu::avx2
