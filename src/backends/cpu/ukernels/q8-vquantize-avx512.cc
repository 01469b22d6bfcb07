// QuantizeLinear / DequantizeLinear maps with one scale and zero point, AVX-512: 16 elements a
// step, the tail under a mask. Contract: q8_ukernels.h.
#include <immintrin.h>

// GCC 12's AVX-512 intrinsics pass an _mm512_undefined_*() pass-through operand that
// -W(maybe-)uninitialized reports once inlined; it is never read (the mask is all ones).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backends/cpu/ukernels/avx512_lane_mask.h"
#include "backends/cpu/ukernels/q8_ukernels.h"

namespace peregrine::cpu::avx512 {

namespace {

// x / scale clamped to [lo - zp, hi - zp] (the integer bounds less the zero point: the same
// result as clamping after rounding, and no float beyond int32 reaches a conversion), NaN as 0.
// |x| < scale / 4 quantizes to the zero point: such x are zeroed before the division, whose
// quotient could otherwise be denormal (a large scale, e.g. calibrated on -FLT_MAX attention
// masks), a microcode assist per element on some CPUs. The result is the same.
struct QuotientMap {
  __m512 lo, hi, scale, tiny;
  QuotientMap(float scale_value, int32_t zp, bool is_signed)
      : lo(_mm512_set1_ps(static_cast<float>((is_signed ? -128 : 0) - zp))),
        hi(_mm512_set1_ps(static_cast<float>((is_signed ? 127 : 255) - zp))),
        scale(_mm512_set1_ps(scale_value)),
        tiny(_mm512_set1_ps(0.25f * scale_value)) {}
  __m512 operator()(const float* x, __mmask16 m) const {
    __m512 v = _mm512_maskz_loadu_ps(m, x);
    v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(_mm512_abs_ps(v), tiny, _CMP_LT_OQ),
                           _mm512_setzero_ps());
    v = _mm512_div_ps(v, scale);
    v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_setzero_ps());
    return _mm512_min_ps(_mm512_max_ps(v, lo), hi);
  }
};

}  // namespace

void q8_quantize__avx512(const float* x, size_t n, float scale, int32_t zp, bool is_signed,
                         uint8_t* y) {
  const QuotientMap quotient(scale, zp, is_signed);
  const __m512i vzp = _mm512_set1_epi32(zp);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = first_lanes(n - i);
    // vcvtps2dq rounds by MXCSR: half to even unless a caller changed the mode.
    const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(quotient(x + i, m)), vzp);
    _mm_mask_storeu_epi8(y + i, m, _mm512_cvtepi32_epi8(q));
  }
}

void q8_fake_quantize__avx512(const float* x, size_t n, float scale, int32_t zp, bool is_signed,
                              float* y) {
  const QuotientMap quotient(scale, zp, is_signed);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = first_lanes(n - i);
    __m512 v =
        _mm512_roundscale_ps(quotient(x + i, m), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_add_ps(v, _mm512_setzero_ps());  // -0.0 from rounding becomes +0.0, as (q - zp)
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(v, quotient.scale));
  }
}

void q8_dequantize__avx512(const uint8_t* x, size_t n, float scale, int32_t zp, bool is_signed,
                           float* y) {
  const __m512 vscale = _mm512_set1_ps(scale);
  const __m512 vzero = _mm512_set1_ps(static_cast<float>(zp));
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = first_lanes(n - i);
    const __m128i bytes = _mm_maskz_loadu_epi8(m, x + i);
    const __m512i w = is_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
    const __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(w), vzero), vscale);
    _mm512_mask_storeu_ps(y + i, m, v);
  }
}

void q8_add__avx512(const uint8_t* a, const uint8_t* b, size_t n, const Q8AddParams& p,
                    uint8_t* c) {
  const __m512 sa = _mm512_set1_ps(p.a_scale), za = _mm512_set1_ps(p.a_zero);
  const __m512 sb = _mm512_set1_ps(p.b_scale), zb = _mm512_set1_ps(p.b_zero);
  const __m512 sc = _mm512_set1_ps(p.c_scale);
  const __m512 vlo = _mm512_set1_ps(static_cast<float>(p.lo - p.c_zero));
  const __m512 vhi = _mm512_set1_ps(static_cast<float>(p.hi - p.c_zero));
  const __m512i zc = _mm512_set1_epi32(p.c_zero);
  auto load = [](const uint8_t* x, __mmask16 m, bool is_signed) {
    const __m128i bytes = _mm_maskz_loadu_epi8(m, x);
    return _mm512_cvtepi32_ps(is_signed ? _mm512_cvtepi8_epi32(bytes)
                                        : _mm512_cvtepu8_epi32(bytes));
  };
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = first_lanes(n - i);
    const __m512 fa = _mm512_mul_ps(_mm512_sub_ps(load(a + i, m, p.a_signed), za), sa);
    const __m512 fb = _mm512_mul_ps(_mm512_sub_ps(load(b + i, m, p.b_signed), zb), sb);
    // The rounded add keeps the compiler from contracting fb's product into an FMA (the
    // reference rounds the product, then the sum).
    const __m512 sum = _mm512_add_round_ps(fa, fb, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 v = _mm512_div_ps(sum, sc);
    // Clamped before rounding, to bounds that are integers: the same as after.
    v = _mm512_min_ps(_mm512_max_ps(v, vlo), vhi);
    const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), zc);
    _mm_mask_storeu_epi8(c + i, m, _mm512_cvtepi32_epi8(q));
  }
}

}  // namespace peregrine::cpu::avx512
