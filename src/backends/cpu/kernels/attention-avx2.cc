// The attention tile (kernels/attention.h), AVX2 + FMA, 8 float lanes.
//
// Per key block of up to kAttentionKeyBlock (64) keys:
//   1. S(rows, kb) = Q K^T. Register tile: 2 queries x 4 keys, 8 ymm accumulators holding
//      8-feature partial sums; each 8-feature step loads 2 Q and 4 K vectors for 8 FMAs; the 8
//      accumulators are reduced to one vector with hadd + permute. d % 8 features: scalar tail.
//      Edge rows / keys: one dot product at a time. K given transposed (k_cs != 1) is first
//      gathered into a contiguous (kb, d) block.
//   2. Per row: S = S * scale + mask over the visible keys; invisible ones (causal, or past kb
//      up to the next multiple of 8) are -inf, so the block is processed in whole vectors:
//      running max, P = exp(S - m) with exp to ~2 ulp (Cody-Waite + degree-5 polynomial; inputs
//      below ln(FLT_MIN) give 0), row sum, and the accumulator row rescaled when m grew.
//   3. acc(rows, dv) += P(rows, kb) V(kb, dv). Register tile: 4 rows x 16 columns (8 ymm
//      accumulators, 2 V loads and 4 broadcasts of P per key); then 8-column tiles; dv % 8
//      columns scalar.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/kernels/attention.h"

namespace peregrine::cpu::avx2 {

namespace {

constexpr int64_t kKeyBlock = kAttentionKeyBlock;  // a multiple of 8
static_assert(kKeyBlock % 8 == 0);

struct Scratch {
  std::vector<float> scores;  // (kAttentionQueryBlock, kKeyBlock)
  std::vector<float> acc;     // (rows, dv)
  std::vector<float> m, l;    // per row: running max and sum
  std::vector<float> keys;    // (kKeyBlock, d) when K is transposed
};

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

inline float hsum(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// [sum(a0), ..., sum(a7)]
inline __m256 hsum8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5, __m256 a6,
                    __m256 a7) {
  const __m256 h0123 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  const __m256 h4567 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
  // h0123 = [a0..a3 over lanes 0-3 | a0..a3 over lanes 4-7], h4567 likewise.
  return _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20),
                       _mm256_permute2f128_ps(h0123, h4567, 0x31));
}

inline float dot(const float* a, const float* b, int64_t d) {
  __m256 acc = _mm256_setzero_ps();
  int64_t e = 0;
  for (; e + 8 <= d; e += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + e), _mm256_loadu_ps(b + e), acc);
  float s = hsum(acc);
  for (; e < d; ++e) s += a[e] * b[e];
  return s;
}

// s(rows, kb) (row stride kKeyBlock) = q(rows, d) k(kb, d)^T, both with contiguous features.
void qk_scores(const float* q, int64_t q_rs, const float* k, int64_t k_rs, int64_t rows,
               int64_t kb, int64_t d, float* s) {
  const int64_t d8 = d & ~int64_t{7};
  int64_t r = 0;
  for (; r + 2 <= rows; r += 2) {
    const float* q0 = q + r * q_rs;
    const float* q1 = q0 + q_rs;
    float* s0 = s + r * kKeyBlock;
    float* s1 = s0 + kKeyBlock;
    int64_t j = 0;
    for (; j + 4 <= kb; j += 4) {
      const float* k0 = k + j * k_rs;
      const float* k1 = k0 + k_rs;
      const float* k2 = k1 + k_rs;
      const float* k3 = k2 + k_rs;
      __m256 a00 = _mm256_setzero_ps(), a01 = _mm256_setzero_ps(), a02 = _mm256_setzero_ps(),
             a03 = _mm256_setzero_ps(), a10 = _mm256_setzero_ps(), a11 = _mm256_setzero_ps(),
             a12 = _mm256_setzero_ps(), a13 = _mm256_setzero_ps();
      for (int64_t e = 0; e < d8; e += 8) {
        const __m256 x0 = _mm256_loadu_ps(q0 + e), x1 = _mm256_loadu_ps(q1 + e);
        __m256 y = _mm256_loadu_ps(k0 + e);
        a00 = _mm256_fmadd_ps(x0, y, a00);
        a10 = _mm256_fmadd_ps(x1, y, a10);
        y = _mm256_loadu_ps(k1 + e);
        a01 = _mm256_fmadd_ps(x0, y, a01);
        a11 = _mm256_fmadd_ps(x1, y, a11);
        y = _mm256_loadu_ps(k2 + e);
        a02 = _mm256_fmadd_ps(x0, y, a02);
        a12 = _mm256_fmadd_ps(x1, y, a12);
        y = _mm256_loadu_ps(k3 + e);
        a03 = _mm256_fmadd_ps(x0, y, a03);
        a13 = _mm256_fmadd_ps(x1, y, a13);
      }
      alignas(32) float sums[8];  // [row 0: keys 0-3 | row 1: keys 0-3]
      _mm256_store_ps(sums, hsum8(a00, a01, a02, a03, a10, a11, a12, a13));
      for (int64_t e = d8; e < d; ++e) {  // scalar feature tail
        const float* kk[4] = {k0, k1, k2, k3};
        for (int c = 0; c < 4; ++c) {
          sums[c] += q0[e] * kk[c][e];
          sums[4 + c] += q1[e] * kk[c][e];
        }
      }
      for (int c = 0; c < 4; ++c) {
        s0[j + c] = sums[c];
        s1[j + c] = sums[4 + c];
      }
    }
    for (; j < kb; ++j) {
      s0[j] = dot(q0, k + j * k_rs, d);
      s1[j] = dot(q1, k + j * k_rs, d);
    }
  }
  for (; r < rows; ++r)
    for (int64_t j = 0; j < kb; ++j) s[r * kKeyBlock + j] = dot(q + r * q_rs, k + j * k_rs, d);
}

// acc(R, 8 * NV) (row stride acc_rs) += p(R, kb) (row stride kKeyBlock) v(kb, 8 * NV).
template <int R, int NV>
inline void pv_tile(const float* p, int64_t kb, const float* v, int64_t v_rs, float* acc,
                    int64_t acc_rs) {
  __m256 c[R][NV];
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < NV; ++x) c[r][x] = _mm256_loadu_ps(acc + r * acc_rs + 8 * x);
  for (int64_t j = 0; j < kb; ++j) {
    __m256 y[NV];
    for (int x = 0; x < NV; ++x) y[x] = _mm256_loadu_ps(v + j * v_rs + 8 * x);
    for (int r = 0; r < R; ++r) {
      const __m256 pr = _mm256_broadcast_ss(p + r * kKeyBlock + j);
      for (int x = 0; x < NV; ++x) c[r][x] = _mm256_fmadd_ps(pr, y[x], c[r][x]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < NV; ++x) _mm256_storeu_ps(acc + r * acc_rs + 8 * x, c[r][x]);
}

template <int R>
void pv_rows(const float* p, int64_t kb, const float* v, int64_t v_rs, float* acc, int64_t dv) {
  int64_t c = 0;
  for (; c + 16 <= dv; c += 16) pv_tile<R, 2>(p, kb, v + c, v_rs, acc + c, dv);
  for (; c + 8 <= dv; c += 8) pv_tile<R, 1>(p, kb, v + c, v_rs, acc + c, dv);
  for (; c < dv; ++c)
    for (int r = 0; r < R; ++r) {
      float sum = acc[r * dv + c];
      for (int64_t j = 0; j < kb; ++j) sum += p[r * kKeyBlock + j] * v[j * v_rs + c];
      acc[r * dv + c] = sum;
    }
}

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
  const int64_t keys =
      t.causal ? std::clamp<int64_t>(t.key_limit0 + t.rows - 1, 0, t.skv) : t.skv;
  const __m256 scale = _mm256_set1_ps(t.scale);
  for (int64_t j0 = 0; j0 < keys; j0 += kKeyBlock) {
    const int64_t kb = std::min(kKeyBlock, keys - j0);
    const int64_t kb8 = (kb + 7) & ~int64_t{7};
    const float* k = t.k + j0 * t.k_rs;
    int64_t k_rs = t.k_rs;
    if (t.k_cs != 1) {  // K^T: gather the block's keys into (kb, d)
      grow(scratch.keys, kKeyBlock * t.d);
      float* dst = scratch.keys.data();
      for (int64_t e = 0; e < t.d; ++e)
        for (int64_t j = 0; j < kb; ++j) dst[j * t.d + e] = k[j * t.k_rs + e * t.k_cs];
      k = dst;
      k_rs = t.d;
    }
    qk_scores(t.q, t.q_rs, k, k_rs, t.rows, kb, t.d, scores);
    for (int64_t r = 0; r < t.rows; ++r) {
      float* s = scores + r * kKeyBlock;  // (kb8) for this row
      const int64_t visible =
          t.causal ? std::clamp<int64_t>(t.key_limit0 + r - j0, 0, kb) : kb;
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
      const float m_new = std::max(m[r], hmax(vmax));
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
      l[r] = l[r] * correction + hsum(vsum);
      m[r] = m_new;
    }
    pv_accumulate(scores, t.rows, kb, t.v + j0 * t.v_rs, t.v_rs, acc, t.dv);
  }
  for (int64_t r = 0; r < t.rows; ++r) {
    const float inv = 1.0f / l[r];  // l == 0 (no visible key): NaN, as the unfused graph
    const float* a = acc + r * t.dv;
    float* out = t.out + r * t.out_rs;
    for (int64_t c = 0; c < t.dv; ++c) out[c] = a[c] * inv;
  }
}

}  // namespace peregrine::cpu::avx2
