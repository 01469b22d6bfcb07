// The attention tile (kernels/attention.h), AVX2 + FMA, 8 float lanes: the algorithm of
// kernels/attention_tile_impl.h on 256-bit registers. Register tiles 4 rows x 16 columns (8 ymm
// accumulators); key panels of 16 keys, packed from row-major K through the vector table's
// 8 x 8 block transposes; exp to ~2 ulp (Cody-Waite + degree-5 polynomial).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backends/cpu/kernels/attention.h"
#include "backends/cpu/kernels/attention_tile_impl.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"
#include "backends/cpu/ukernels/f32_vreduce_avx2.h"

namespace peregrine::cpu::avx2 {

namespace {

// exp(x) for x <= 88: Cody-Waite reduction x = n ln2 + r, |r| <= ln2 / 2, then Cephes' degree-5
// polynomial for e^r (max relative error ~2 ulp) scaled by 2^n. x < ln(FLT_MIN) (-87.34),
// including -inf, gives exactly 0.
inline __m256 exp256(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.33654f);
  const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_GE_OQ);  // false for x < lo and NaN
  x = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);  // 2^n, n >= -126
  return _mm256_and_ps(_mm256_mul_ps(y, _mm256_castsi256_ps(e)), underflow);
}

// Packs keys [0, kb) of K (key j feature e at k[j * rs + e * cs]) as ceil(kb / 16) panels of
// (d, 16): panel[e * 16 + jj] = K(16 * panel + jj, e), keys past kb zero. Row-major K goes
// through the vector table's block transpose (8 x 8 register transposes); K^T rows copy.
void pack_key_panels_16(const float* k, int64_t rs, int64_t cs, int64_t kb, int64_t d, float* dst) {
  const int64_t panels = (kb + 15) / 16;
  std::fill(dst, dst + panels * 16 * d, 0.0f);
  for (int64_t j0 = 0; j0 < kb; j0 += 16) {
    float* panel = dst + (j0 / 16) * 16 * d;
    const int64_t keys = std::min<int64_t>(16, kb - j0);
    if (rs == 1) {  // K^T: each feature's keys are contiguous
      for (int64_t e = 0; e < d; ++e)
        std::copy(k + e * cs + j0, k + e * cs + j0 + keys, panel + e * 16);
    } else if (cs == 1) {  // row-major K: the keys' rows transposed into the panel
      x32_transpose__avx2(reinterpret_cast<const uint32_t*>(k + j0 * rs), static_cast<size_t>(rs),
                          reinterpret_cast<uint32_t*>(panel), 16, static_cast<size_t>(keys),
                          static_cast<size_t>(d));
    } else {
      for (int64_t jj = 0; jj < keys; ++jj)
        for (int64_t e = 0; e < d; ++e) panel[e * 16 + jj] = k[(j0 + jj) * rs + e * cs];
    }
  }
}

struct Ymm {
  using Reg = __m256;
  static constexpr int64_t kLanes = 8;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg set1(float x) { return _mm256_set1_ps(x); }
  static Reg loadu(const float* p) { return _mm256_loadu_ps(p); }
  static void storeu(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
  static float reduce_max(Reg v) { return horizontal_max(v); }
  static float reduce_add(Reg v) { return horizontal_sum(v); }
  static Reg exp(Reg v) { return exp256(v); }
  static void pack_key_panels(const float* k, int64_t rs, int64_t cs, int64_t kb, int64_t d,
                              float* dst) {
    pack_key_panels_16(k, rs, cs, kb, d, dst);
  }
};

}  // namespace

void f32_attention_tile__avx2(const AttentionTile& t) { attention_tile<Ymm>(t); }
void f32_attention_pack__avx2(const AttentionTile& t, void* k_dst, void* v_dst) {
  attention_pack<F32Products<Ymm>>(t, k_dst, v_dst);
}
int64_t f32_attention_key_words__avx2(int64_t skv, int64_t d) {
  return attention_packed_key_elems<F32Products<Ymm>>(skv, d);
}
int64_t f32_attention_value_words__avx2(int64_t skv, int64_t dv) {
  return attention_packed_value_elems<F32Products<Ymm>>(skv, dv);
}

}  // namespace peregrine::cpu::avx2
