// f32 elementwise unary maps, AVX-512: 16 floats per step, the tail (n % 16) through a masked
// load / store of the same vector code, so every element gets the same approximation (the AVX2
// build's algorithms, math: ukernels/f32_vmath_avx512.h) and nothing past n is touched.
// Contract: f32_vector_ukernels.h.
#include <immintrin.h>

#include "backends/cpu/ukernels/f32_vector_ukernels.h"
#include "backends/cpu/ukernels/f32_vmath_avx512.h"

// GCC 12's _mm512_max_ps passes an _mm512_undefined_ps() pass-through operand that
// -W(maybe-)uninitialized reports once inlined; it is never read (the mask is all ones).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace peregrine::cpu::avx512 {

namespace {

template <typename F>
inline void map_unary(const float* x, float* y, size_t n, F f) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, mask, f(_mm512_maskz_loadu_ps(mask, x + i)));
  }
}

using V = VmathZmm;

}  // namespace

void f32_vunary__avx512(UnaryOp op, const float* x, float* y, size_t n) {
  switch (op) {
    case UnaryOp::kRelu:
      return map_unary(x, y, n, [](__m512 v) { return _mm512_max_ps(v, _mm512_setzero_ps()); });
    case UnaryOp::kSigmoid:
      return map_unary(x, y, n, vmath::sigmoid<V>);
    case UnaryOp::kSilu:
      return map_unary(x, y, n, vmath::silu<V>);
    case UnaryOp::kTanh:
      return map_unary(x, y, n, vmath::tanh<V>);
    case UnaryOp::kErf:
      return map_unary(x, y, n, vmath::erf<V>);
    case UnaryOp::kExp:
      return map_unary(x, y, n, vmath::exp<V>);
    case UnaryOp::kGelu:
      return map_unary(x, y, n, vmath::gelu_erf<V>);
    case UnaryOp::kGeluTanh:
      return map_unary(x, y, n, vmath::gelu_tanh<V>);
  }
}

}  // namespace peregrine::cpu::avx512
