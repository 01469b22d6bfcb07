// The attention tile (kernels/attention.h), AVX2 + FMA, 8 float lanes.
//
// Per key block of up to kAttentionKeyBlock (64) keys:
//   1. S(rows, kb) = Q K^T as a small GEMM: the key block is packed as (d, 16) panels (8 x 8
//      register transposes; K^T input copies rows), the tile's queries are a contiguous copy;
//      register tile 4 queries x 16 keys: 8 ymm accumulators, 2 panel loads and 4 broadcasts
//      of Q per feature, no horizontal sums.
//   2. Per row: S = S * scale + mask over the visible keys; invisible ones (causal, or past kb
//      up to the next multiple of 8) are -inf, so the block is processed in whole vectors:
//      running max, P = exp(S - m) with exp to ~2 ulp (Cody-Waite + degree-5 polynomial; inputs
//      below ln(FLT_MIN) give 0), row sum, and the accumulator row rescaled when m grew.
//   3. acc(rows, dv) += P(rows, kb) V(kb, dv), V from a contiguous copy of the block. Register
//      tile: 4 rows x 16 columns (the same micro-kernel as step 1); then 8-column tiles;
//      dv % 8 columns scalar.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/kernels/attention.h"
#include "backends/cpu/ukernels/f32_vreduce_avx2.h"

namespace peregrine::cpu::avx2 {

namespace {

constexpr int64_t kKeyBlock = kAttentionKeyBlock;
static_assert(kKeyBlock % 16 == 0);  // whole 16-key panels

struct Scratch {
  std::vector<float> scores;  // (kAttentionQueryBlock, kKeyBlock)
  std::vector<float> acc;     // (rows, dv)
  std::vector<float> m, l;    // per row: running max and sum
  std::vector<float> q;       // (rows, d) contiguous copy of the tile's queries
  std::vector<float> keys;    // the key block as (d, 16) panels (pack_key_panels)
  std::vector<float> values;  // (kKeyBlock, dv) contiguous copy of the value block
};

// Copies the (rows, cols) matrix at src (row stride rs) to dst, contiguous. The head form's
// rows are H * D floats apart (3 KiB for BERT): 64 such rows fall into a quarter of L1's sets
// and evict each other, so the blocks are read from dense copies.
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

// acc(R, 8 * NV) (row stride acc_rs) (+)= p(R, kb) (row stride p_rs) v(kb, 8 * NV) (row stride
// v_rs); kAccumulate = false starts from zero. Used for both products: S = Q K^T (p = Q, v = a
// K^T panel) and acc += P V. Named accumulators: GCC spills an array of __m256 on every FMA.
template <int R, int NV, bool kAccumulate = true>
inline void pv_tile(const float* p, int64_t p_rs, int64_t kb, const float* v, int64_t v_rs,
                    float* acc, int64_t acc_rs) {
  static_assert(R >= 1 && R <= 4 && NV >= 1 && NV <= 2);
  const __m256 zero = _mm256_setzero_ps();
  __m256 c00 = zero, c01 = zero, c10 = zero, c11 = zero, c20 = zero, c21 = zero, c30 = zero,
         c31 = zero;
  float* a0 = acc;
  float* a1 = acc + acc_rs;
  float* a2 = acc + 2 * acc_rs;
  float* a3 = acc + 3 * acc_rs;
  if constexpr (kAccumulate) {
    c00 = _mm256_loadu_ps(a0);
    if constexpr (NV > 1) c01 = _mm256_loadu_ps(a0 + 8);
    if constexpr (R > 1) c10 = _mm256_loadu_ps(a1);
    if constexpr (R > 1 && NV > 1) c11 = _mm256_loadu_ps(a1 + 8);
    if constexpr (R > 2) c20 = _mm256_loadu_ps(a2);
    if constexpr (R > 2 && NV > 1) c21 = _mm256_loadu_ps(a2 + 8);
    if constexpr (R > 3) c30 = _mm256_loadu_ps(a3);
    if constexpr (R > 3 && NV > 1) c31 = _mm256_loadu_ps(a3 + 8);
  }
  for (int64_t j = 0; j < kb; ++j, v += v_rs) {
    const __m256 y0 = _mm256_loadu_ps(v);
    const __m256 y1 = NV > 1 ? _mm256_loadu_ps(v + 8) : zero;
    __m256 pr = _mm256_broadcast_ss(p + j);
    c00 = _mm256_fmadd_ps(pr, y0, c00);
    if constexpr (NV > 1) c01 = _mm256_fmadd_ps(pr, y1, c01);
    if constexpr (R > 1) {
      pr = _mm256_broadcast_ss(p + p_rs + j);
      c10 = _mm256_fmadd_ps(pr, y0, c10);
      if constexpr (NV > 1) c11 = _mm256_fmadd_ps(pr, y1, c11);
    }
    if constexpr (R > 2) {
      pr = _mm256_broadcast_ss(p + 2 * p_rs + j);
      c20 = _mm256_fmadd_ps(pr, y0, c20);
      if constexpr (NV > 1) c21 = _mm256_fmadd_ps(pr, y1, c21);
    }
    if constexpr (R > 3) {
      pr = _mm256_broadcast_ss(p + 3 * p_rs + j);
      c30 = _mm256_fmadd_ps(pr, y0, c30);
      if constexpr (NV > 1) c31 = _mm256_fmadd_ps(pr, y1, c31);
    }
  }
  _mm256_storeu_ps(a0, c00);
  if constexpr (NV > 1) _mm256_storeu_ps(a0 + 8, c01);
  if constexpr (R > 1) _mm256_storeu_ps(a1, c10);
  if constexpr (R > 1 && NV > 1) _mm256_storeu_ps(a1 + 8, c11);
  if constexpr (R > 2) _mm256_storeu_ps(a2, c20);
  if constexpr (R > 2 && NV > 1) _mm256_storeu_ps(a2 + 8, c21);
  if constexpr (R > 3) _mm256_storeu_ps(a3, c30);
  if constexpr (R > 3 && NV > 1) _mm256_storeu_ps(a3 + 8, c31);
}

template <int R>
void pv_rows(const float* p, int64_t kb, const float* v, int64_t v_rs, float* acc, int64_t dv) {
  int64_t c = 0;
  for (; c + 16 <= dv; c += 16) pv_tile<R, 2>(p, kKeyBlock, kb, v + c, v_rs, acc + c, dv);
  for (; c + 8 <= dv; c += 8) pv_tile<R, 1>(p, kKeyBlock, kb, v + c, v_rs, acc + c, dv);
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

// Packs keys [0, kb) of K (key j feature e at k[j * rs + e * cs]) as ceil(kb / 16) panels of
// (d, 16): panel[e * 16 + jj] = K(16 * panel + jj, e), keys past kb zero. Row-major K goes
// through 8 x 8 register transposes (scalar at the d % 8 and kb % 8 edges); K^T rows copy.
void pack_key_panels(const float* k, int64_t rs, int64_t cs, int64_t kb, int64_t d, float* dst) {
  const int64_t panels = (kb + 15) / 16;
  std::fill(dst, dst + panels * 16 * d, 0.0f);
  for (int64_t j0 = 0; j0 < kb; j0 += 16) {
    float* panel = dst + (j0 / 16) * 16 * d;
    const int64_t keys = std::min<int64_t>(16, kb - j0);
    if (rs == 1) {  // K^T: each feature's keys are contiguous
      for (int64_t e = 0; e < d; ++e)
        std::copy(k + e * cs + j0, k + e * cs + j0 + keys, panel + e * 16);
      continue;
    }
    int64_t jj = 0;
    for (; jj + 8 <= keys && cs == 1; jj += 8) {
      const float* src = k + (j0 + jj) * rs;
      int64_t e = 0;
      for (; e + 8 <= d; e += 8) {
        __m256 r0 = _mm256_loadu_ps(src + e), r1 = _mm256_loadu_ps(src + rs + e),
               r2 = _mm256_loadu_ps(src + 2 * rs + e), r3 = _mm256_loadu_ps(src + 3 * rs + e),
               r4 = _mm256_loadu_ps(src + 4 * rs + e), r5 = _mm256_loadu_ps(src + 5 * rs + e),
               r6 = _mm256_loadu_ps(src + 6 * rs + e), r7 = _mm256_loadu_ps(src + 7 * rs + e);
        const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
                     t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
                     t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
                     t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
        const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
                     u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
                     u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
                     u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
        float* out = panel + e * 16 + jj;  // rows e .. e + 7 of the panel, keys jj .. jj + 7
        _mm256_storeu_ps(out + 0 * 16, _mm256_permute2f128_ps(u0, u4, 0x20));
        _mm256_storeu_ps(out + 1 * 16, _mm256_permute2f128_ps(u1, u5, 0x20));
        _mm256_storeu_ps(out + 2 * 16, _mm256_permute2f128_ps(u2, u6, 0x20));
        _mm256_storeu_ps(out + 3 * 16, _mm256_permute2f128_ps(u3, u7, 0x20));
        _mm256_storeu_ps(out + 4 * 16, _mm256_permute2f128_ps(u0, u4, 0x31));
        _mm256_storeu_ps(out + 5 * 16, _mm256_permute2f128_ps(u1, u5, 0x31));
        _mm256_storeu_ps(out + 6 * 16, _mm256_permute2f128_ps(u2, u6, 0x31));
        _mm256_storeu_ps(out + 7 * 16, _mm256_permute2f128_ps(u3, u7, 0x31));
      }
      for (; e < d; ++e)
        for (int64_t x = 0; x < 8; ++x) panel[e * 16 + jj + x] = src[x * rs + e];
    }
    for (; jj < keys; ++jj)
      for (int64_t e = 0; e < d; ++e) panel[e * 16 + jj] = k[(j0 + jj) * rs + e * cs];
  }
}

// s(rows, round_up(kb, 16)) (row stride kKeyBlock) = q(rows, d) (contiguous) K^T, from the
// panels of pack_key_panels.
void qk_scores(const float* q, int64_t rows, int64_t kb, int64_t d, const float* panels, float* s) {
  for (int64_t j0 = 0; j0 < kb; j0 += 16) {
    const float* panel = panels + (j0 / 16) * 16 * d;
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4)
      pv_tile<4, 2, false>(q + r * d, d, d, panel, 16, s + r * kKeyBlock + j0, kKeyBlock);
    const float* qr = q + r * d;
    float* sr = s + r * kKeyBlock + j0;
    switch (rows - r) {
      case 3:
        pv_tile<3, 2, false>(qr, d, d, panel, 16, sr, kKeyBlock);
        break;
      case 2:
        pv_tile<2, 2, false>(qr, d, d, panel, 16, sr, kKeyBlock);
        break;
      case 1:
        pv_tile<1, 2, false>(qr, d, d, panel, 16, sr, kKeyBlock);
        break;
      default:
        break;
    }
  }
}

}  // namespace

void f32_attention_tile__avx2(const AttentionTile& t) {
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
  const __m256 scale = _mm256_set1_ps(t.scale);
  grow(scratch.q, t.rows * t.d);
  grow(scratch.keys, kKeyBlock * t.d);
  grow(scratch.values, kKeyBlock * t.dv);
  float* q = scratch.q.data();
  copy_rows(t.q, t.q_rs, t.rows, t.d, q);
  for (int64_t j0 = 0; j0 < keys; j0 += kKeyBlock) {
    const int64_t kb = std::min(kKeyBlock, keys - j0);
    const int64_t kb8 = (kb + 7) & ~int64_t{7};
    float* k = scratch.keys.data();  // ceil(kb / 16) panels of (d, 16)
    pack_key_panels(t.k + j0 * t.k_rs, t.k_rs, t.k_cs, kb, t.d, k);
    float* v = scratch.values.data();  // (kb, dv)
    copy_rows(t.v + j0 * t.v_rs, t.v_rs, kb, t.dv, v);
    qk_scores(q, t.rows, kb, t.d, k, scores);
    for (int64_t r = 0; r < t.rows; ++r) {
      float* s = scores + r * kKeyBlock;  // (kb8) for this row
      const int64_t visible = t.causal ? std::clamp<int64_t>(t.key_limit0 + r - j0, 0, kb) : kb;
      if (visible == 0) {
        std::fill(s, s + kb, 0.0f);
        continue;
      }
      // S = S * scale + mask on the visible keys, -inf on the rest of the vectors.
      const float* mask = t.mask ? t.mask + r * t.mask_rs + j0 * t.mask_cs : nullptr;
      int64_t j = 0;
      if (mask == nullptr || t.mask_cs == 1) {
        for (; j + 8 <= visible; j += 8) {
          __m256 x = _mm256_mul_ps(_mm256_loadu_ps(s + j), scale);
          if (mask) x = _mm256_add_ps(x, _mm256_loadu_ps(mask + j));
          _mm256_storeu_ps(s + j, x);
        }
      }
      for (; j < visible; ++j) s[j] = s[j] * t.scale + (mask ? mask[j * t.mask_cs] : 0.0f);
      for (; j < kb8; ++j) s[j] = kNegInf;
      __m256 vmax = _mm256_set1_ps(kNegInf);
      for (j = 0; j < kb8; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(s + j));
      const float m_new = std::max(m[r], horizontal_max(vmax));
      if (m_new == kNegInf) {  // every visible score so far is -inf: nothing to add yet
        std::fill(s, s + kb, 0.0f);
        continue;
      }
      const __m256 vm = _mm256_set1_ps(m_new);
      __m256 vsum = _mm256_setzero_ps();
      for (j = 0; j < kb8; j += 8) {
        const __m256 p = exp256(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
        _mm256_storeu_ps(s + j, p);
        vsum = _mm256_add_ps(vsum, p);
      }
      const float correction = std::exp(m[r] - m_new);  // 0 on the first visible block
      if (correction != 1.0f) {
        float* a = acc + r * t.dv;
        for (int64_t c = 0; c < t.dv; ++c) a[c] *= correction;
      }
      l[r] = l[r] * correction + horizontal_sum(vsum);
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

}  // namespace peregrine::cpu::avx2
