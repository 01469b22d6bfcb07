// The AVX-512F vector type of the attention tile (kernels/attention_tile_impl.h): 16 float
// lanes, exp to ~2 ulp, key panels of 32 keys packed through 16x16 register transposes. Shared
// by the float32 tile (attention-avx512.cc) and the bf16 one (attention-avx512bf16.cc); each
// includer, built with AVX-512 flags, gets its own internal-linkage copy.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backends/cpu/ukernels/f32_vector_ukernels.h"

// GCC 12's _mm512_max_ps / _mm512_min_ps / _mm512_reduce_* pass an _mm512_undefined_ps()
// pass-through operand that -Wmaybe-uninitialized reports once inlined; it is never read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace peregrine::cpu::avx512 {
namespace {

constexpr int64_t kZmmKeyPanel = 32;  // keys per packed panel: one 6 x 32 tile's columns

// exp(x) for x <= 88, with exp256's reduction and polynomial (kernels/attention-avx2.cc, ~2
// ulp); x < ln(FLT_MIN), including -inf and NaN, gives exactly 0. vscalefps applies 2^n to the
// polynomial, where AVX2 builds the power from n's bits: no clamps, no integer steps.
inline __m512 exp512(__m512 x) {
  const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.33654f), _CMP_GE_OQ);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_scalef_ps(keep, y, n);
}

// Packs keys [0, kb) of K (key j feature e at k[j * rs + e * cs]) as ceil(kb / 32) panels of
// (d, 32): panel[e * 32 + jj] = K(32 * panel + jj, e), keys past kb zero. Row-major K goes
// through the vector table's block transpose (16 x 16 register transposes); K^T rows copy.
void pack_key_panels_32(const float* k, int64_t rs, int64_t cs, int64_t kb, int64_t d, float* dst) {
  const int64_t panels = (kb + kZmmKeyPanel - 1) / kZmmKeyPanel;
  std::fill(dst, dst + panels * kZmmKeyPanel * d, 0.0f);
  for (int64_t j0 = 0; j0 < kb; j0 += kZmmKeyPanel) {
    float* panel = dst + (j0 / kZmmKeyPanel) * kZmmKeyPanel * d;
    const int64_t keys = std::min<int64_t>(kZmmKeyPanel, kb - j0);
    if (rs == 1) {  // K^T: each feature's keys are contiguous
      for (int64_t e = 0; e < d; ++e)
        std::copy(k + e * cs + j0, k + e * cs + j0 + keys, panel + e * kZmmKeyPanel);
    } else if (cs == 1) {  // row-major K: the keys' rows transposed into the panel
      x32_transpose__avx512(reinterpret_cast<const uint32_t*>(k + j0 * rs), static_cast<size_t>(rs),
                            reinterpret_cast<uint32_t*>(panel), static_cast<size_t>(kZmmKeyPanel),
                            static_cast<size_t>(keys), static_cast<size_t>(d));
    } else {
      for (int64_t jj = 0; jj < keys; ++jj)
        for (int64_t e = 0; e < d; ++e) panel[e * kZmmKeyPanel + jj] = k[(j0 + jj) * rs + e * cs];
    }
  }
}

struct Zmm {
  using Reg = __m512;
  static constexpr int64_t kLanes = 16;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg set1(float x) { return _mm512_set1_ps(x); }
  static Reg loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void storeu(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  static float reduce_max(Reg v) { return _mm512_reduce_max_ps(v); }
  static float reduce_add(Reg v) { return _mm512_reduce_add_ps(v); }
  static Reg exp(Reg v) { return exp512(v); }
  static void pack_key_panels(const float* k, int64_t rs, int64_t cs, int64_t kb, int64_t d,
                              float* dst) {
    pack_key_panels_32(k, rs, cs, kb, d, dst);
  }
};

}  // namespace
}  // namespace peregrine::cpu::avx512
