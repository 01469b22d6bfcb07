// The attention tile (kernels/attention.h), AVX-512F, 16 float lanes: the algorithm of
// attention-avx2.cc with register tiles of 4 rows x 32 columns (8 zmm accumulators, 2 loads and
// 4 broadcasts per 8 FMAs: half the loads and broadcasts per FLOP of the AVX2 tile), key panels
// of 32 keys (16x16 register transposes) and the softmax 16 lanes at a time.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/kernels/attention.h"
#include "backends/cpu/ukernels/f32_transpose_avx512.h"

// GCC 12's _mm512_max_ps / _mm512_min_ps / _mm512_reduce_* pass an _mm512_undefined_ps()
// pass-through operand that -Wmaybe-uninitialized reports once inlined; it is never read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace peregrine::cpu::avx512 {

namespace {

constexpr int64_t kKeyBlock = kAttentionKeyBlock;
constexpr int64_t kPanel = 32;  // keys per packed panel: one 4 x 32 tile's columns
static_assert(kKeyBlock % kPanel == 0);

struct Scratch {
  std::vector<float> scores;  // (kAttentionQueryBlock, kKeyBlock)
  std::vector<float> acc;     // (rows, dv)
  std::vector<float> m, l;    // per row: running max and sum
  std::vector<float> q;       // (rows, d) contiguous copy of the tile's queries
  std::vector<float> keys;    // the key block as (d, 32) panels (pack_key_panels)
  std::vector<float> values;  // (kKeyBlock, dv) contiguous copy of the value block
};

// Copies the (rows, cols) matrix at src (row stride rs) to dst, contiguous (see the AVX2 file:
// head-form rows a whole H * D apart alias in L1).
void copy_rows(const float* src, int64_t rs, int64_t rows, int64_t cols, float* dst) {
  for (int64_t r = 0; r < rows; ++r) std::copy(src + r * rs, src + r * rs + cols, dst + r * cols);
}

Scratch& thread_scratch() {
  thread_local Scratch scratch;
  return scratch;
}

void grow(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// exp(x) for x <= 88, as exp256 in the AVX2 file (Cody-Waite reduction, degree-5 polynomial,
// ~2 ulp); x < ln(FLT_MIN), including -inf, gives exactly 0.
inline __m512 exp512(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.33654f);
  const __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);  // false for x < lo and NaN
  x = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(88.0f));
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
  const __m512i e = _mm512_slli_epi32(
      _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);  // 2^n, n >= -126
  return _mm512_maskz_mul_ps(keep, y, _mm512_castsi512_ps(e));
}

// acc(R, 16 * NV) (row stride acc_rs) (+)= p(R, kb) (row stride p_rs) v(kb, 16 * NV) (row stride
// v_rs); kAccumulate = false starts from zero. Used for both products: S = Q K^T (p = Q, v = a
// K^T panel) and acc += P V. Named accumulators, as in the AVX2 file.
template <int R, int NV, bool kAccumulate = true>
inline void pv_tile(const float* p, int64_t p_rs, int64_t kb, const float* v, int64_t v_rs,
                    float* acc, int64_t acc_rs) {
  static_assert(R >= 1 && R <= 4 && NV >= 1 && NV <= 2);
  const __m512 zero = _mm512_setzero_ps();
  __m512 c00 = zero, c01 = zero, c10 = zero, c11 = zero, c20 = zero, c21 = zero, c30 = zero,
         c31 = zero;
  float* a0 = acc;
  float* a1 = acc + acc_rs;
  float* a2 = acc + 2 * acc_rs;
  float* a3 = acc + 3 * acc_rs;
  if constexpr (kAccumulate) {
    c00 = _mm512_loadu_ps(a0);
    if constexpr (NV > 1) c01 = _mm512_loadu_ps(a0 + 16);
    if constexpr (R > 1) c10 = _mm512_loadu_ps(a1);
    if constexpr (R > 1 && NV > 1) c11 = _mm512_loadu_ps(a1 + 16);
    if constexpr (R > 2) c20 = _mm512_loadu_ps(a2);
    if constexpr (R > 2 && NV > 1) c21 = _mm512_loadu_ps(a2 + 16);
    if constexpr (R > 3) c30 = _mm512_loadu_ps(a3);
    if constexpr (R > 3 && NV > 1) c31 = _mm512_loadu_ps(a3 + 16);
  }
  for (int64_t j = 0; j < kb; ++j, v += v_rs) {
    const __m512 y0 = _mm512_loadu_ps(v);
    const __m512 y1 = NV > 1 ? _mm512_loadu_ps(v + 16) : zero;
    __m512 pr = _mm512_set1_ps(p[j]);
    c00 = _mm512_fmadd_ps(pr, y0, c00);
    if constexpr (NV > 1) c01 = _mm512_fmadd_ps(pr, y1, c01);
    if constexpr (R > 1) {
      pr = _mm512_set1_ps(p[p_rs + j]);
      c10 = _mm512_fmadd_ps(pr, y0, c10);
      if constexpr (NV > 1) c11 = _mm512_fmadd_ps(pr, y1, c11);
    }
    if constexpr (R > 2) {
      pr = _mm512_set1_ps(p[2 * p_rs + j]);
      c20 = _mm512_fmadd_ps(pr, y0, c20);
      if constexpr (NV > 1) c21 = _mm512_fmadd_ps(pr, y1, c21);
    }
    if constexpr (R > 3) {
      pr = _mm512_set1_ps(p[3 * p_rs + j]);
      c30 = _mm512_fmadd_ps(pr, y0, c30);
      if constexpr (NV > 1) c31 = _mm512_fmadd_ps(pr, y1, c31);
    }
  }
  _mm512_storeu_ps(a0, c00);
  if constexpr (NV > 1) _mm512_storeu_ps(a0 + 16, c01);
  if constexpr (R > 1) _mm512_storeu_ps(a1, c10);
  if constexpr (R > 1 && NV > 1) _mm512_storeu_ps(a1 + 16, c11);
  if constexpr (R > 2) _mm512_storeu_ps(a2, c20);
  if constexpr (R > 2 && NV > 1) _mm512_storeu_ps(a2 + 16, c21);
  if constexpr (R > 3) _mm512_storeu_ps(a3, c30);
  if constexpr (R > 3 && NV > 1) _mm512_storeu_ps(a3 + 16, c31);
}

template <int R>
void pv_rows(const float* p, int64_t kb, const float* v, int64_t v_rs, float* acc, int64_t dv) {
  int64_t c = 0;
  for (; c + 32 <= dv; c += 32) pv_tile<R, 2>(p, kKeyBlock, kb, v + c, v_rs, acc + c, dv);
  for (; c + 16 <= dv; c += 16) pv_tile<R, 1>(p, kKeyBlock, kb, v + c, v_rs, acc + c, dv);
  for (; c < dv; ++c)
    for (int r = 0; r < R; ++r) {
      float sum = acc[r * dv + c];
      for (int64_t j = 0; j < kb; ++j) sum += p[r * kKeyBlock + j] * v[j * v_rs + c];
      acc[r * dv + c] = sum;
    }
}

// acc(rows, dv) += p(rows, kb) (row stride kKeyBlock) v(kb, dv) (row stride v_rs).
void pv_accumulate(const float* p, int64_t rows, int64_t kb, const float* v, int64_t v_rs,
                   float* acc, int64_t dv) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) pv_rows<4>(p + r * kKeyBlock, kb, v, v_rs, acc + r * dv, dv);
  const float* pr = p + r * kKeyBlock;
  float* ar = acc + r * dv;
  switch (rows - r) {
    case 3:
      return pv_rows<3>(pr, kb, v, v_rs, ar, dv);
    case 2:
      return pv_rows<2>(pr, kb, v, v_rs, ar, dv);
    case 1:
      return pv_rows<1>(pr, kb, v, v_rs, ar, dv);
    default:
      return;
  }
}

// Packs keys [0, kb) of K (key j feature e at k[j * rs + e * cs]) as ceil(kb / 32) panels of
// (d, 32): panel[e * 32 + jj] = K(32 * panel + jj, e), keys past kb zero. Row-major K goes
// through 16 x 16 register transposes (scalar at the d % 16 and kb % 16 edges); K^T rows copy.
void pack_key_panels(const float* k, int64_t rs, int64_t cs, int64_t kb, int64_t d, float* dst) {
  const int64_t panels = (kb + kPanel - 1) / kPanel;
  std::fill(dst, dst + panels * kPanel * d, 0.0f);
  for (int64_t j0 = 0; j0 < kb; j0 += kPanel) {
    float* panel = dst + (j0 / kPanel) * kPanel * d;
    const int64_t keys = std::min<int64_t>(kPanel, kb - j0);
    if (rs == 1) {  // K^T: each feature's keys are contiguous
      for (int64_t e = 0; e < d; ++e)
        std::copy(k + e * cs + j0, k + e * cs + j0 + keys, panel + e * kPanel);
      continue;
    }
    int64_t jj = 0;
    for (; jj + 16 <= keys && cs == 1; jj += 16) {
      const float* src = k + (j0 + jj) * rs;
      int64_t e = 0;
      for (; e + 16 <= d; e += 16) {
        __m512 r[16];
        for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * rs + e);
        transpose16x16(r);  // r[f]: feature e + f of the 16 keys
        for (int f = 0; f < 16; ++f) _mm512_storeu_ps(panel + (e + f) * kPanel + jj, r[f]);
      }
      for (; e < d; ++e)
        for (int64_t x = 0; x < 16; ++x) panel[e * kPanel + jj + x] = src[x * rs + e];
    }
    for (; jj < keys; ++jj)
      for (int64_t e = 0; e < d; ++e) panel[e * kPanel + jj] = k[(j0 + jj) * rs + e * cs];
  }
}

// s(rows, round_up(kb, 32)) (row stride kKeyBlock) = q(rows, d) (contiguous) K^T, from the
// panels of pack_key_panels.
void qk_scores(const float* q, int64_t rows, int64_t kb, int64_t d, const float* panels, float* s) {
  for (int64_t j0 = 0; j0 < kb; j0 += kPanel) {
    const float* panel = panels + (j0 / kPanel) * kPanel * d;
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4)
      pv_tile<4, 2, false>(q + r * d, d, d, panel, kPanel, s + r * kKeyBlock + j0, kKeyBlock);
    const float* qr = q + r * d;
    float* sr = s + r * kKeyBlock + j0;
    switch (rows - r) {
      case 3:
        pv_tile<3, 2, false>(qr, d, d, panel, kPanel, sr, kKeyBlock);
        break;
      case 2:
        pv_tile<2, 2, false>(qr, d, d, panel, kPanel, sr, kKeyBlock);
        break;
      case 1:
        pv_tile<1, 2, false>(qr, d, d, panel, kPanel, sr, kKeyBlock);
        break;
      default:
        break;
    }
  }
}

}  // namespace

void f32_attention_tile__avx512(const AttentionTile& t) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  Scratch& scratch = thread_scratch();
  grow(scratch.scores, t.rows * kKeyBlock);
  grow(scratch.acc, t.rows * t.dv);
  grow(scratch.m, t.rows);
  grow(scratch.l, t.rows);
  float* scores = scratch.scores.data();
  float* acc = scratch.acc.data();
  float* m = scratch.m.data();
  float* l = scratch.l.data();
  std::fill(acc, acc + t.rows * t.dv, 0.0f);
  std::fill(m, m + t.rows, kNegInf);
  std::fill(l, l + t.rows, 0.0f);
  // Keys any row of the tile sees.
  const int64_t keys = t.causal ? std::clamp<int64_t>(t.key_limit0 + t.rows - 1, 0, t.skv) : t.skv;
  const __m512 scale = _mm512_set1_ps(t.scale);
  grow(scratch.q, t.rows * t.d);
  grow(scratch.keys, kKeyBlock * t.d);
  grow(scratch.values, kKeyBlock * t.dv);
  float* q = scratch.q.data();
  copy_rows(t.q, t.q_rs, t.rows, t.d, q);
  for (int64_t j0 = 0; j0 < keys; j0 += kKeyBlock) {
    const int64_t kb = std::min(kKeyBlock, keys - j0);
    const int64_t kb16 = (kb + 15) & ~int64_t{15};
    float* k = scratch.keys.data();  // ceil(kb / 32) panels of (d, 32)
    pack_key_panels(t.k + j0 * t.k_rs, t.k_rs, t.k_cs, kb, t.d, k);
    float* v = scratch.values.data();  // (kb, dv)
    copy_rows(t.v + j0 * t.v_rs, t.v_rs, kb, t.dv, v);
    qk_scores(q, t.rows, kb, t.d, k, scores);
    for (int64_t r = 0; r < t.rows; ++r) {
      float* s = scores + r * kKeyBlock;  // (kb16) for this row
      const int64_t visible = t.causal ? std::clamp<int64_t>(t.key_limit0 + r - j0, 0, kb) : kb;
      if (visible == 0) {
        std::fill(s, s + kb, 0.0f);
        continue;
      }
      // S = S * scale + mask on the visible keys, -inf on the rest of the vectors.
      const float* mask = t.mask ? t.mask + r * t.mask_rs + j0 * t.mask_cs : nullptr;
      int64_t j = 0;
      if (mask == nullptr || t.mask_cs == 1) {
        for (; j + 16 <= visible; j += 16) {
          __m512 x = _mm512_mul_ps(_mm512_loadu_ps(s + j), scale);
          if (mask) x = _mm512_add_ps(x, _mm512_loadu_ps(mask + j));
          _mm512_storeu_ps(s + j, x);
        }
      }
      for (; j < visible; ++j) s[j] = s[j] * t.scale + (mask ? mask[j * t.mask_cs] : 0.0f);
      for (; j < kb16; ++j) s[j] = kNegInf;
      __m512 vmax = _mm512_set1_ps(kNegInf);
      for (j = 0; j < kb16; j += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(s + j));
      const float m_new = std::max(m[r], _mm512_reduce_max_ps(vmax));
      if (m_new == kNegInf) {  // every visible score so far is -inf: nothing to add yet
        std::fill(s, s + kb, 0.0f);
        continue;
      }
      const __m512 vm = _mm512_set1_ps(m_new);
      __m512 vsum = _mm512_setzero_ps();
      for (j = 0; j < kb16; j += 16) {
        const __m512 p = exp512(_mm512_sub_ps(_mm512_loadu_ps(s + j), vm));
        _mm512_storeu_ps(s + j, p);
        vsum = _mm512_add_ps(vsum, p);
      }
      const float correction = std::exp(m[r] - m_new);  // 0 on the first visible block
      if (correction != 1.0f) {
        float* a = acc + r * t.dv;
        for (int64_t c = 0; c < t.dv; ++c) a[c] *= correction;
      }
      l[r] = l[r] * correction + _mm512_reduce_add_ps(vsum);
      m[r] = m_new;
    }
    pv_accumulate(scores, t.rows, kb, v, t.dv, acc, t.dv);
  }
  for (int64_t r = 0; r < t.rows; ++r) {
    const float inv = 1.0f / l[r];  // l == 0 (no visible key): NaN, as the unfused graph
    const float* a = acc + r * t.dv;
    float* out = t.out + r * t.out_rs;
    for (int64_t c = 0; c < t.dv; ++c) out[c] = a[c] * inv;
  }
}

}  // namespace peregrine::cpu::avx512
