// AVX2 + FMA approximations of exp, tanh, erf, sigmoid and GELU on 8 floats, for files compiled
// with -mavx2 -mfma only (ukernels/f32-v*-avx2.cc, gemm/f32-gemm-epilogue-avx2.cc). Inline, in
// namespace avx2, so no copy can leak into baseline code.
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

namespace peregrine::cpu::avx2 {

// exp(x) = 2^n * e^r, n = round(x / ln 2), r = x - n ln 2 in [-ln2/2, ln2/2] (ln 2 split in a
// short high part, so n * hi is exact, and a low correction). e^r = 1 + r + r^2 P(r), P of
// degree 5 (Cephes expf coefficients, a minimax fit on that interval). 2^n is applied as
// 2^(n/2) * 2^(n - n/2) so both factors are normal floats for n in [-150, 128]: results near
// FLT_MAX and in the denormal range come out right instead of as inf / 0.
inline __m256 exp_ps(__m256 x) {
  const __m256 kMax = _mm256_set1_ps(88.72283935546875f);  // ~ln(FLT_MAX)
  const __m256 kMin = _mm256_set1_ps(-105.0f);  // e^-105 rounds to 0; 2^(n/2) stays normal
  const __m256 xc = _mm256_max_ps(kMin, _mm256_min_ps(kMax, x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  const __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  return _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, kMax, _CMP_GT_OQ));
}

// exp(x) with results below the smallest normal float (x < ln(FLT_MIN)) flushed to 0: for sums of
// exponentials (softmax), where such terms cannot move the sum but denormal arithmetic costs a
// microcode assist per element on some CPUs (masked attention scores are -inf or -FLT_MAX).
// NaN stays NaN.
inline __m256 exp_flush_ps(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.33654f);  // ln(FLT_MIN)
  const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  return _mm256_andnot_ps(underflow, exp_ps(_mm256_max_ps(lo, x)));
}

// 1 / (1 + exp(-x)); a true division keeps the relative error of exp.
inline __m256 sigmoid_ps(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(one, _mm256_add_ps(one, e));
}

// |x| < 0.625: x + x^3 P(x^2), P of degree 4 (Cephes tanhf minimax coefficients);
// else sign(x) (1 - 2 / (exp(2|x|) + 1)), which is exactly +-1 once exp overflows.
inline __m256 tanh_ps(__m256 x) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256 ax = _mm256_andnot_ps(sign_mask, x);
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(-5.70498872745e-3f);
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.06390887954e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37397155531e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33314422036e-1f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332819422e-1f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp_ps(_mm256_add_ps(ax, ax));
  const __m256 t = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
  const __m256 large = _mm256_or_ps(t, _mm256_and_ps(sign_mask, x));
  return _mm256_blendv_ps(large, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ));
}

// For u >= 0.5: q(u) ~ erfc(u) = t (a1 + t (a2 + ... a5)) exp(-u^2), t = 1 / (1 + p u)
// (Abramowitz & Stegun 7.1.26, absolute error <= 1.5e-7 in exact arithmetic). Returns q for
// every lane; callers blend in the small-|u| series.
inline __m256 erfc_tail_ps(__m256 au) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), au, one));
  __m256 poly = _mm256_set1_ps(1.061405429f);
  poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(-1.453152027f));
  poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(1.421413741f));
  poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(-0.284496736f));
  poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(0.254829592f));
  poly = _mm256_mul_ps(poly, t);
  const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(au, au)));
  return _mm256_mul_ps(poly, e);
}

// For |u| < 0.5: erf(u) = 2/sqrt(pi) u (1 - z/3 + z^2/10 - z^3/42 + z^4/216 - z^5/1320
// + z^6/9360), z = u^2 (Maclaurin series; the first dropped term is < 1e-9 relative).
inline __m256 erf_series_ps(__m256 u) {
  const __m256 z = _mm256_mul_ps(u, u);
  __m256 p = _mm256_set1_ps(1.0f / 9360.0f);
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-1.0f / 1320.0f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.0f / 216.0f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-1.0f / 42.0f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.0f / 10.0f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-1.0f / 3.0f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.0f));
  return _mm256_mul_ps(_mm256_mul_ps(p, u), _mm256_set1_ps(1.12837916709551257f));
}

inline __m256 erf_ps(__m256 x) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256 ax = _mm256_andnot_ps(sign_mask, x);
  const __m256 tail = _mm256_sub_ps(_mm256_set1_ps(1.0f), erfc_tail_ps(ax));
  const __m256 large = _mm256_or_ps(tail, _mm256_and_ps(sign_mask, x));
  return _mm256_blendv_ps(large, erf_series_ps(x),
                          _mm256_cmp_ps(ax, _mm256_set1_ps(0.5f), _CMP_LT_OQ));
}

// 0.5 x (1 + erf(x / sqrt 2)). For x <= -0.5 sqrt 2, 1 + erf(u) = erfc(|u|) is taken from the
// tail directly (no cancellation); for x >= 0.5 sqrt 2, 2 - erfc(u).
inline __m256 gelu_erf_ps(__m256 x) {
  const __m256 u = _mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f));
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256 au = _mm256_andnot_ps(sign_mask, u);
  const __m256 q = erfc_tail_ps(au);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 tail = _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), q), q,
                                       _mm256_cmp_ps(u, _mm256_setzero_ps(), _CMP_LT_OQ));
  const __m256 one_plus_erf = _mm256_blendv_ps(tail, _mm256_add_ps(one, erf_series_ps(u)),
                                               _mm256_cmp_ps(au, _mm256_set1_ps(0.5f), _CMP_LT_OQ));
  return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), one_plus_erf);
}

// 0.5 x (1 + tanh(w)) with w = sqrt(2/pi) (x + 0.044715 x^3), computed as x * sigmoid(2w)
// (the same function; no cancellation for negative x).
inline __m256 gelu_tanh_ps(__m256 x) {
  const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  const __m256 w = _mm256_mul_ps(_mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x),
                                 _mm256_set1_ps(2.0f * 0.79788456080286536f));
  return _mm256_mul_ps(x, sigmoid_ps(w));
}

inline __m256 silu_ps(__m256 x) { return _mm256_mul_ps(x, sigmoid_ps(x)); }

}  // namespace peregrine::cpu::avx2
