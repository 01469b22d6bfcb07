// AVX2 + FMA approximations of exp, tanh, erf, sigmoid and GELU on 8 floats, for files compiled
// with -mavx2 -mfma only (ukernels/f32-v*-avx2.cc, gemm/f32-gemm-epilogue-avx2.cc). Inline, in
// namespace avx2, so no copy can leak into baseline code. The algorithms are written once, over a
// vector type (ukernels/f32_vmath_impl.h); the AVX-512 build of the same is f32_vmath_avx512.h.
//
// Measured maximum errors against the double-precision std:: functions over a dense sweep
// (tests/unit/cpu_elementwise_test.cc, VectorMath.*; numbers as measured on this machine):
//   exp_ps:     relative error <= 3e-7 where the result is a normal float (x in [-87.3, 88.7]);
//               below that, gradual underflow (absolute error < 1e-44); x > 88.72 -> +inf.
//   tanh_ps:    relative error <= 1e-6 (absolute <= 2e-7) over all x.
//   erf_ps:     absolute error <= 5e-7 over all x; relative error <= 1e-6 for |x| < 0.5.
//   sigmoid_ps: relative error <= 1e-6 for x >= -87 (absolute <= 1e-7 everywhere).
// NaN in gives NaN out for all of them (the clamps take x as their second operand, which
// min/max return when either operand is NaN). +-inf give the limits (exp(-inf) = 0, etc.).
#pragma once

#include <immintrin.h>

#include "backends/cpu/ukernels/f32_vmath_impl.h"

namespace peregrine::cpu::avx2 {

namespace {  // internal linkage, like the approximations themselves

// The vector type of f32_vmath_impl.h: 8 floats, masks as all-ones lanes.
struct VmathYmm {
  using Reg = __m256;
  using Mask = __m256;
  static Reg set1(float x) { return _mm256_set1_ps(x); }
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  // A true division: correctly rounded.
  static Reg reciprocal(Reg d) { return _mm256_div_ps(_mm256_set1_ps(1.0f), d); }
  static Reg reciprocal_bounded(Reg d) { return reciprocal(d); }
  // 2^n applied as 2^(n/2) * 2^(n - n/2), both factors normal floats for n in [-152, 128].
  static Reg scale_pow2(Reg p, Reg n) {
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg fnmadd(Reg a, Reg b, Reg c) { return _mm256_fnmadd_ps(a, b, c); }
  static Reg min(Reg a, Reg b) { return _mm256_min_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
  static Reg round(Reg x) {
    return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static Reg and_(Reg a, Reg b) { return _mm256_and_ps(a, b); }
  static Reg or_(Reg a, Reg b) { return _mm256_or_ps(a, b); }
  static Reg andnot(Reg a, Reg b) { return _mm256_andnot_ps(a, b); }
  static Mask lt(Reg a, Reg b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static Mask gt(Reg a, Reg b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
  static Reg select(Mask m, Reg t, Reg f) { return _mm256_blendv_ps(f, t, m); }
};

}  // namespace

inline __m256 exp_ps(__m256 x) { return vmath::exp<VmathYmm>(x); }
inline __m256 exp_flush_ps(__m256 x) { return vmath::exp_flush<VmathYmm>(x); }
inline __m256 sigmoid_ps(__m256 x) { return vmath::sigmoid<VmathYmm>(x); }
inline __m256 tanh_ps(__m256 x) { return vmath::tanh<VmathYmm>(x); }
inline __m256 erf_ps(__m256 x) { return vmath::erf<VmathYmm>(x); }
inline __m256 gelu_erf_ps(__m256 x) { return vmath::gelu_erf<VmathYmm>(x); }
inline __m256 gelu_tanh_ps(__m256 x) { return vmath::gelu_tanh<VmathYmm>(x); }
inline __m256 silu_ps(__m256 x) { return vmath::silu<VmathYmm>(x); }

}  // namespace peregrine::cpu::avx2
