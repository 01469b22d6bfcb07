// The approximations of ukernels/f32_vmath_avx2.h (same algorithms, operation order and errors,
// ukernels/f32_vmath_impl.h) on 16 floats, for files compiled with the AVX-512 flags only. Inline,
// in namespace avx512, so no copy can leak into baseline code.
#pragma once

#include <immintrin.h>

#include "backends/cpu/ukernels/f32_vmath_impl.h"

namespace peregrine::cpu::avx512 {

// The vector type of f32_vmath_impl.h: 16 floats, masks as k registers.
struct VmathZmm {
  using Reg = __m512;
  using Int = __m512i;
  using Mask = __mmask16;
  static Reg set1(float x) { return _mm512_set1_ps(x); }
  static Int set1i(int i) { return _mm512_set1_epi32(i); }
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg div(Reg a, Reg b) { return _mm512_div_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg fnmadd(Reg a, Reg b, Reg c) { return _mm512_fnmadd_ps(a, b, c); }
  static Reg min(Reg a, Reg b) { return _mm512_min_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  static Reg round(Reg x) {
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static Int to_int(Reg x) { return _mm512_cvtps_epi32(x); }
  static Int addi(Int a, Int b) { return _mm512_add_epi32(a, b); }
  static Int subi(Int a, Int b) { return _mm512_sub_epi32(a, b); }
  static Int srai(Int a, unsigned n) { return _mm512_srai_epi32(a, n); }
  static Int slli(Int a, unsigned n) { return _mm512_slli_epi32(a, n); }
  static Reg as_float(Int a) { return _mm512_castsi512_ps(a); }
  static Reg and_(Reg a, Reg b) { return _mm512_and_ps(a, b); }
  static Reg or_(Reg a, Reg b) { return _mm512_or_ps(a, b); }
  static Reg andnot(Reg a, Reg b) { return _mm512_andnot_ps(a, b); }
  static Mask lt(Reg a, Reg b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static Mask gt(Reg a, Reg b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static Reg select(Mask m, Reg t, Reg f) { return _mm512_mask_blend_ps(m, f, t); }
};

}  // namespace peregrine::cpu::avx512
