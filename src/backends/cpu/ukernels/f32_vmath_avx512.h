// The approximations of ukernels/f32_vmath_avx2.h (the same algorithms, ukernels/f32_vmath_impl.h,
// with a Newton-refined reciprocal estimate and vscalefps for 2^n) on 16 floats, for files compiled with the AVX-512 flags only. Inline,
// in namespace avx512, so no copy can leak into baseline code.
#pragma once

#include <immintrin.h>

#include "backends/cpu/ukernels/f32_vmath_impl.h"

namespace peregrine::cpu::avx512 {

namespace {  // internal linkage: files of other ISA flags include this header too

// The vector type of f32_vmath_impl.h: 16 floats, masks as k registers.
struct VmathZmm {
  using Reg = __m512;
  using Mask = __mmask16;
  static Reg set1(float x) { return _mm512_set1_ps(x); }
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  // The 14-bit estimate and one Newton step (within 2 ulp): a 512-bit division's throughput
  // bounded SiLU. Zero and infinite estimates (d infinite or zero) are kept as they are, where
  // the step would give NaN.
  static Reg reciprocal(Reg d) {
    const __m512 r = _mm512_rcp14_ps(d);
    const __m512 step = _mm512_fmadd_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(1.0f)), r);
    return _mm512_mask_mov_ps(step, _mm512_fpclass_ps_mask(r, 0x1E), r);  // +-0, +-inf
  }
  // For d in [1, 2]: the estimate and step without the zero / infinity fix-up.
  static Reg reciprocal_bounded(Reg d) {
    const __m512 r = _mm512_rcp14_ps(d);
    return _mm512_fmadd_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(1.0f)), r);
  }
  // p 2^n in one rounding.
  static Reg scale_pow2(Reg p, Reg n) { return _mm512_scalef_ps(p, n); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg fnmadd(Reg a, Reg b, Reg c) { return _mm512_fnmadd_ps(a, b, c); }
  static Reg min(Reg a, Reg b) { return _mm512_min_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  static Reg round(Reg x) {
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static Reg and_(Reg a, Reg b) { return _mm512_and_ps(a, b); }
  static Reg or_(Reg a, Reg b) { return _mm512_or_ps(a, b); }
  static Reg andnot(Reg a, Reg b) { return _mm512_andnot_ps(a, b); }
  static Mask lt(Reg a, Reg b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static Mask gt(Reg a, Reg b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static Reg select(Mask m, Reg t, Reg f) { return _mm512_mask_blend_ps(m, f, t); }
};

}  // namespace

}  // namespace peregrine::cpu::avx512
