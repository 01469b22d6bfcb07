// Vector approximations of exp, tanh, erf, sigmoid and GELU, written once over a vector type:
// each including header (ukernels/f32_vmath_<isa>.h, for files built with that ISA's flags)
// supplies `V` with
//   Reg, Mask (a lane predicate),
//   set1(x), zero(), add, sub, mul, fmadd(a, b, c) = a b + c,
//   reciprocal(d) (1 / d, correctly rounded or within 2 ulp), reciprocal_bounded(d) (the same
//   for d in [1, 2] only, free of the zero / infinity cases), scale_pow2(p, n) (p 2^n for a
//   float integer n in [-152, 128], overflow to inf, right in the denormal range),
//   fnmadd(a, b, c) = c - a b, min(a, b), max(a, b) (b when either is NaN, as minps / maxps),
//   round(x) (to nearest even), and_(a, b), or_(a, b), andnot(a, b) = ~a & b,
//   lt(a, b), gt(a, b) (ordered compares), select(mask, if_true, if_false),
// and gets its own internal-linkage copy. Errors (the same algorithm at every width, the
// reciprocal and the power of two each ISA's own): ukernels/f32_vmath_avx2.h.
#pragma once

namespace peregrine::cpu {
namespace {

namespace vmath {

// exp(x) = 2^n * e^r, n = round(x / ln 2), r = x - n ln 2 in [-ln2/2, ln2/2] (ln 2 split in a
// short high part, so n * hi is exact, and a low correction). e^r = 1 + r + r^2 P(r), P of
// degree 5 (Cephes expf coefficients, a minimax fit on that interval). 2^n is applied as
// V::scale_pow2, right near FLT_MAX and in the denormal range instead of inf / 0. exp_core takes
// x already clamped to [-105, ~ln(FLT_MAX)]: below, e^x rounds to 0 and 2^(n/2) stays normal.
template <typename V>
inline typename V::Reg exp_core(typename V::Reg xc) {
  using Reg = typename V::Reg;
  const Reg n = V::round(V::mul(xc, V::set1(1.44269504088896341f)));
  Reg r = V::fnmadd(n, V::set1(0.693359375f), xc);
  r = V::fnmadd(n, V::set1(-2.12194440e-4f), r);
  Reg p = V::set1(1.9875691500e-4f);
  p = V::fmadd(p, r, V::set1(1.3981999507e-3f));
  p = V::fmadd(p, r, V::set1(8.3334519073e-3f));
  p = V::fmadd(p, r, V::set1(4.1665795894e-2f));
  p = V::fmadd(p, r, V::set1(1.6666665459e-1f));
  p = V::fmadd(p, r, V::set1(5.0000001201e-1f));
  p = V::fmadd(p, V::mul(r, r), V::add(r, V::set1(1.0f)));
  return V::scale_pow2(p, n);
}

// exp(x) for x <= ~ln(FLT_MAX) (or NaN): no overflow to guard, so only the lower clamp.
template <typename V>
inline typename V::Reg exp_without_overflow(typename V::Reg x) {
  return exp_core<V>(V::max(V::set1(-105.0f), x));
}

template <typename V>
inline typename V::Reg exp(typename V::Reg x) {
  using Reg = typename V::Reg;
  const Reg kMax = V::set1(88.72283935546875f);  // ~ln(FLT_MAX)
  return V::select(V::gt(x, kMax), V::set1(__builtin_inff()),
                   exp_without_overflow<V>(V::min(kMax, x)));
}

// exp(x) with results below the smallest normal float (x < ln(FLT_MIN)) flushed to 0: for sums of
// exponentials (softmax), where such terms cannot move the sum but denormal arithmetic costs a
// microcode assist per element on some CPUs (masked attention scores are -inf or -FLT_MAX).
// NaN stays NaN.
template <typename V>
inline typename V::Reg exp_flush(typename V::Reg x) {
  const typename V::Reg lo = V::set1(-87.33654f);  // ln(FLT_MIN)
  return V::select(V::lt(x, lo), V::zero(), exp<V>(V::max(lo, x)));
}

// With e = exp(-|x|) in [0, 1]: 1 / (1 + e) for x >= 0, e / (1 + e) below. e never overflows
// and 1 + e lies in [1, 2], so neither needs the overflow or infinite-reciprocal cases that cost
// a third of the map (EfficientNet's SiLU); a reciprocal within 2 ulp keeps exp's relative error.
template <typename V>
inline typename V::Reg sigmoid(typename V::Reg x) {
  using Reg = typename V::Reg;
  const Reg e = exp_without_overflow<V>(V::or_(V::set1(-0.0f), x));  // -|x|
  const Reg r = V::reciprocal_bounded(V::add(V::set1(1.0f), e));
  return V::select(V::lt(x, V::zero()), V::mul(e, r), r);
}

// |x| < 0.625: x + x^3 P(x^2), P of degree 4 (Cephes tanhf minimax coefficients);
// else sign(x) (1 - 2 / (exp(2|x|) + 1)), which is exactly +-1 once exp overflows.
template <typename V>
inline typename V::Reg tanh(typename V::Reg x) {
  using Reg = typename V::Reg;
  const Reg sign_mask = V::set1(-0.0f);
  const Reg ax = V::andnot(sign_mask, x);
  const Reg z = V::mul(x, x);
  Reg p = V::set1(-5.70498872745e-3f);
  p = V::fmadd(p, z, V::set1(2.06390887954e-2f));
  p = V::fmadd(p, z, V::set1(-5.37397155531e-2f));
  p = V::fmadd(p, z, V::set1(1.33314422036e-1f));
  p = V::fmadd(p, z, V::set1(-3.33332819422e-1f));
  const Reg small = V::fmadd(V::mul(p, z), x, x);
  const Reg one = V::set1(1.0f);
  const Reg e = exp<V>(V::add(ax, ax));
  const Reg t = V::sub(one, V::mul(V::set1(2.0f), V::reciprocal(V::add(e, one))));
  const Reg large = V::or_(t, V::and_(sign_mask, x));
  return V::select(V::lt(ax, V::set1(0.625f)), small, large);
}

// For u >= 0.5: q(u) ~ erfc(u) = t (a1 + t (a2 + ... a5)) exp(-u^2), t = 1 / (1 + p u)
// (Abramowitz & Stegun 7.1.26, absolute error <= 1.5e-7 in exact arithmetic). Returns q for
// every lane; callers blend in the small-|u| series.
template <typename V>
inline typename V::Reg erfc_tail(typename V::Reg au) {
  using Reg = typename V::Reg;
  const Reg one = V::set1(1.0f);
  const Reg t = V::reciprocal(V::fmadd(V::set1(0.3275911f), au, one));
  Reg poly = V::set1(1.061405429f);
  poly = V::fmadd(poly, t, V::set1(-1.453152027f));
  poly = V::fmadd(poly, t, V::set1(1.421413741f));
  poly = V::fmadd(poly, t, V::set1(-0.284496736f));
  poly = V::fmadd(poly, t, V::set1(0.254829592f));
  poly = V::mul(poly, t);
  const Reg e = exp_without_overflow<V>(V::sub(V::zero(), V::mul(au, au)));
  return V::mul(poly, e);
}

// For |u| < 0.5: erf(u) = 2/sqrt(pi) u (1 - z/3 + z^2/10 - z^3/42 + z^4/216 - z^5/1320
// + z^6/9360), z = u^2 (Maclaurin series; the first dropped term is < 1e-9 relative).
template <typename V>
inline typename V::Reg erf_series(typename V::Reg u) {
  using Reg = typename V::Reg;
  const Reg z = V::mul(u, u);
  Reg p = V::set1(1.0f / 9360.0f);
  p = V::fmadd(p, z, V::set1(-1.0f / 1320.0f));
  p = V::fmadd(p, z, V::set1(1.0f / 216.0f));
  p = V::fmadd(p, z, V::set1(-1.0f / 42.0f));
  p = V::fmadd(p, z, V::set1(1.0f / 10.0f));
  p = V::fmadd(p, z, V::set1(-1.0f / 3.0f));
  p = V::fmadd(p, z, V::set1(1.0f));
  return V::mul(V::mul(p, u), V::set1(1.12837916709551257f));
}

template <typename V>
inline typename V::Reg erf(typename V::Reg x) {
  using Reg = typename V::Reg;
  const Reg sign_mask = V::set1(-0.0f);
  const Reg ax = V::andnot(sign_mask, x);
  const Reg tail = V::sub(V::set1(1.0f), erfc_tail<V>(ax));
  const Reg large = V::or_(tail, V::and_(sign_mask, x));
  return V::select(V::lt(ax, V::set1(0.5f)), erf_series<V>(x), large);
}

// 0.5 x (1 + erf(x / sqrt 2)). For x <= -0.5 sqrt 2, 1 + erf(u) = erfc(|u|) is taken from the
// tail directly (no cancellation); for x >= 0.5 sqrt 2, 2 - erfc(u).
template <typename V>
inline typename V::Reg gelu_erf(typename V::Reg x) {
  using Reg = typename V::Reg;
  const Reg u = V::mul(x, V::set1(0.70710678118654752f));
  const Reg sign_mask = V::set1(-0.0f);
  const Reg au = V::andnot(sign_mask, u);
  const Reg q = erfc_tail<V>(au);
  const Reg one = V::set1(1.0f);
  const Reg tail = V::select(V::lt(u, V::zero()), q, V::sub(V::set1(2.0f), q));
  const Reg one_plus_erf =
      V::select(V::lt(au, V::set1(0.5f)), V::add(one, erf_series<V>(u)), tail);
  return V::mul(V::mul(V::set1(0.5f), x), one_plus_erf);
}

// 0.5 x (1 + tanh(w)) with w = sqrt(2/pi) (x + 0.044715 x^3), computed as x * sigmoid(2w)
// (the same function; no cancellation for negative x).
template <typename V>
inline typename V::Reg gelu_tanh(typename V::Reg x) {
  using Reg = typename V::Reg;
  const Reg x3 = V::mul(V::mul(x, x), x);
  const Reg w = V::mul(V::fmadd(V::set1(0.044715f), x3, x), V::set1(2.0f * 0.79788456080286536f));
  return V::mul(x, sigmoid<V>(w));
}

template <typename V>
inline typename V::Reg silu(typename V::Reg x) {
  return V::mul(x, sigmoid<V>(x));
}

}  // namespace vmath

}  // namespace
}  // namespace peregrine::cpu
