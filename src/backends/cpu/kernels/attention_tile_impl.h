// The attention tile (contract: kernels/attention.h), written once over a vector type and a
// products type. Each including file (kernels/attention-<isa>.cc, built with its ISA's flags)
// supplies `V` with
//   Reg, kLanes (floats per Reg), zero(), set1(x), loadu(p), storeu(p, v), fmadd(a, b, c),
//   add / sub / mul / max(a, b), reduce_max(v), reduce_add(v), exp(v) (0 below ln(FLT_MIN)),
//   pack_key_panels(k, rs, cs, kb, d, dst): keys [0, kb) as ceil(kb / kPanel) panels of
//   (d, kPanel), panel[e * kPanel + jj] = K(kPanel * panel + jj, e), keys past kb zero,
// and gets its own internal-linkage copy. kPanel = 2 * kLanes: one register tile's columns.
// The products type says how the two products are computed and what their operands are
// stored as: F32Products<V> below (float32 FMAs), or the bf16 one of
// kernels/attention-avx512bf16.cc. It supplies
//   Elem: the element of the query copy and the packed keys and values;
//   query_elems(rows, d), prepare_queries(q, rs, rows, d, scale, dst): the tile's queries,
//     scaled;
//   key_block_elems(d), key_offset(j0, d), pack_keys(k, rs, cs, kb, d, dst): a key block;
//   value_block_elems(dv), value_offset(j0, dv), pack_values(v, rs, kb, dv, dst): a value block;
//   scores(q, rows, kb, d, keys, s): S(rows, kb) (row stride kKeyBlock) = Q K^T;
//   accumulate(p, rows, kb, values, dv, acc, acc_rs): acc(rows, dv) += P(rows, kb) V.
// key_offset / value_offset locate key j0's block (j0 a multiple of kKeyBlock) in the copies
// packed once for all keys (attention_pack).
//
// The scale is folded into the copy of the tile's queries. Per key block of up to
// kAttentionKeyBlock keys:
//   1. S(rows, kb) = Q K^T as a small GEMM on the packed key panels (packed by the tile, or
//      once for all query blocks) and the copy of the queries; F32Products' register tile is 6
//      queries x 2 vectors of keys: 12 accumulators, 2 panel loads and 6 broadcasts of Q per
//      feature, no horizontal sums.
//   2. Per row: S += mask over the visible keys; invisible ones (causal, or past kb up to the
//      next whole vector) are -inf, so the block is processed in whole vectors: running max,
//      P = exp(S - m), row sum, and the accumulator row rescaled when m grew.
//   3. acc(rows, dv) += P(rows, kb) V(kb, dv), V from a contiguous copy of the block with its
//      rows zero-padded to whole vectors. F32Products' register tile: 6 rows x 2 vectors (the
//      same micro-kernel as step 1); then 1-vector tiles.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/cpu/gemm/aligned_buffer.h"
#include "backends/cpu/kernels/attention.h"

namespace peregrine::cpu {
namespace {

constexpr int64_t kKeyBlock = kAttentionKeyBlock;
// Query rows per register tile of both products: 6 rows x 2 vectors, 12 accumulators fed by 2
// loads and 6 broadcasts per step (4 rows had 8 accumulators for 2 loads and 4 broadcasts).
constexpr int kTileRows = 6;

template <typename Elem>
struct AttentionScratch {
  std::vector<float> scores;  // (kAttentionQueryBlock, kKeyBlock)
  std::vector<float> acc;     // (rows, dv)
  std::vector<float> m, l;    // per row: running max and sum
  GrowBuffer<Elem> q;         // the tile's queries (Products::prepare_queries)
  GrowBuffer<Elem> keys;      // one key block (Products::pack_keys)
  GrowBuffer<Elem> values;    // one value block (Products::pack_values)
};

// Copies the (rows, cols) matrix at src (row stride rs) to dst, contiguous, times `scale`. The
// head form's rows are H * D floats apart (3 KiB for BERT): 64 such rows fall into a quarter of
// L1's sets and evict each other, so the blocks are read from dense copies.
inline void attention_copy_rows_scaled(const float* src, int64_t rs, int64_t rows, int64_t cols,
                                       float scale, float* dst) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = src[r * rs + c] * scale;
}

// The same, each row zero-padded from cols to dst_cols.
inline void attention_copy_rows_padded(const float* src, int64_t rs, int64_t rows, int64_t cols,
                                       int64_t dst_cols, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(src + r * rs, src + r * rs + cols, dst + r * dst_cols);
    std::fill(dst + r * dst_cols + cols, dst + (r + 1) * dst_cols, 0.0f);
  }
}

inline void attention_grow(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// acc(R, NV * kLanes) (row stride acc_rs) (+)= p(R, kb) (row stride p_rs) v(kb, NV * kLanes)
// (row stride v_rs); kAccumulate = false starts from zero. Used for both products: S = Q K^T
// (p = Q, v = a K^T panel) and acc += P V. Named accumulators: GCC spills an array of registers
// on every FMA.
template <typename V, int R, int NV, bool kAccumulate = true>
inline void pv_tile(const float* p, int64_t p_rs, int64_t kb, const float* v, int64_t v_rs,
                    float* acc, int64_t acc_rs) {
  static_assert(R >= 1 && R <= kTileRows && NV >= 1 && NV <= 2);
  constexpr int64_t L = V::kLanes;
  using Reg = typename V::Reg;
  const Reg zero = V::zero();
  Reg c00 = zero, c01 = zero, c10 = zero, c11 = zero, c20 = zero, c21 = zero, c30 = zero,
      c31 = zero, c40 = zero, c41 = zero, c50 = zero, c51 = zero;
  float* a0 = acc;
  float* a1 = acc + acc_rs;
  float* a2 = acc + 2 * acc_rs;
  float* a3 = acc + 3 * acc_rs;
  float* a4 = acc + 4 * acc_rs;
  float* a5 = acc + 5 * acc_rs;
  if constexpr (kAccumulate) {
    c00 = V::loadu(a0);
    if constexpr (NV > 1) c01 = V::loadu(a0 + L);
    if constexpr (R > 1) c10 = V::loadu(a1);
    if constexpr (R > 1 && NV > 1) c11 = V::loadu(a1 + L);
    if constexpr (R > 2) c20 = V::loadu(a2);
    if constexpr (R > 2 && NV > 1) c21 = V::loadu(a2 + L);
    if constexpr (R > 3) c30 = V::loadu(a3);
    if constexpr (R > 3 && NV > 1) c31 = V::loadu(a3 + L);
    if constexpr (R > 4) c40 = V::loadu(a4);
    if constexpr (R > 4 && NV > 1) c41 = V::loadu(a4 + L);
    if constexpr (R > 5) c50 = V::loadu(a5);
    if constexpr (R > 5 && NV > 1) c51 = V::loadu(a5 + L);
  }
  for (int64_t j = 0; j < kb; ++j, v += v_rs) {
    const Reg y0 = V::loadu(v);
    const Reg y1 = NV > 1 ? V::loadu(v + L) : zero;
    Reg pr = V::set1(p[j]);
    c00 = V::fmadd(pr, y0, c00);
    if constexpr (NV > 1) c01 = V::fmadd(pr, y1, c01);
    if constexpr (R > 1) {
      pr = V::set1(p[p_rs + j]);
      c10 = V::fmadd(pr, y0, c10);
      if constexpr (NV > 1) c11 = V::fmadd(pr, y1, c11);
    }
    if constexpr (R > 2) {
      pr = V::set1(p[2 * p_rs + j]);
      c20 = V::fmadd(pr, y0, c20);
      if constexpr (NV > 1) c21 = V::fmadd(pr, y1, c21);
    }
    if constexpr (R > 3) {
      pr = V::set1(p[3 * p_rs + j]);
      c30 = V::fmadd(pr, y0, c30);
      if constexpr (NV > 1) c31 = V::fmadd(pr, y1, c31);
    }
    if constexpr (R > 4) {
      pr = V::set1(p[4 * p_rs + j]);
      c40 = V::fmadd(pr, y0, c40);
      if constexpr (NV > 1) c41 = V::fmadd(pr, y1, c41);
    }
    if constexpr (R > 5) {
      pr = V::set1(p[5 * p_rs + j]);
      c50 = V::fmadd(pr, y0, c50);
      if constexpr (NV > 1) c51 = V::fmadd(pr, y1, c51);
    }
  }
  V::storeu(a0, c00);
  if constexpr (NV > 1) V::storeu(a0 + L, c01);
  if constexpr (R > 1) V::storeu(a1, c10);
  if constexpr (R > 1 && NV > 1) V::storeu(a1 + L, c11);
  if constexpr (R > 2) V::storeu(a2, c20);
  if constexpr (R > 2 && NV > 1) V::storeu(a2 + L, c21);
  if constexpr (R > 3) V::storeu(a3, c30);
  if constexpr (R > 3 && NV > 1) V::storeu(a3 + L, c31);
  if constexpr (R > 4) V::storeu(a4, c40);
  if constexpr (R > 4 && NV > 1) V::storeu(a4 + L, c41);
  if constexpr (R > 5) V::storeu(a5, c50);
  if constexpr (R > 5 && NV > 1) V::storeu(a5 + L, c51);
}

template <typename V, int R>
void pv_rows(const float* p, int64_t kb, const float* v, int64_t v_rs, float* acc, int64_t dv) {
  constexpr int64_t L = V::kLanes;
  int64_t c = 0;
  for (; c + 2 * L <= dv; c += 2 * L) pv_tile<V, R, 2>(p, kKeyBlock, kb, v + c, v_rs, acc + c, dv);
  for (; c + L <= dv; c += L) pv_tile<V, R, 1>(p, kKeyBlock, kb, v + c, v_rs, acc + c, dv);
  for (; c < dv; ++c)
    for (int r = 0; r < R; ++r) {
      float sum = acc[r * dv + c];
      for (int64_t j = 0; j < kb; ++j) sum += p[r * kKeyBlock + j] * v[j * v_rs + c];
      acc[r * dv + c] = sum;
    }
}

// acc(rows, dv) += p(rows, kb) (row stride kKeyBlock) v(kb, dv) (row stride v_rs). This and
// qk_scores are calls of their own: inlined into attention_tile they made the AVX-512 tile
// slower in peregrine_attention_bench (register allocation across the softmax code).
template <typename V>
__attribute__((noinline)) void pv_accumulate(const float* p, int64_t rows, int64_t kb,
                                             const float* v, int64_t v_rs, float* acc, int64_t dv) {
  int64_t r = 0;
  for (; r + kTileRows <= rows; r += kTileRows)
    pv_rows<V, kTileRows>(p + r * kKeyBlock, kb, v, v_rs, acc + r * dv, dv);
  const float* pr = p + r * kKeyBlock;
  float* ar = acc + r * dv;
  switch (rows - r) {
    case 5:
      return pv_rows<V, 5>(pr, kb, v, v_rs, ar, dv);
    case 4:
      return pv_rows<V, 4>(pr, kb, v, v_rs, ar, dv);
    case 3:
      return pv_rows<V, 3>(pr, kb, v, v_rs, ar, dv);
    case 2:
      return pv_rows<V, 2>(pr, kb, v, v_rs, ar, dv);
    case 1:
      return pv_rows<V, 1>(pr, kb, v, v_rs, ar, dv);
    default:
      return;
  }
}

// s(rows, kb rounded up to kPanel) (row stride kKeyBlock) = q(rows, d) (contiguous) K^T, from
// the key panels.
template <typename V>
__attribute__((noinline)) void qk_scores(const float* q, int64_t rows, int64_t kb, int64_t d,
                                         const float* panels, float* s) {
  constexpr int64_t kPanel = 2 * V::kLanes;
  for (int64_t j0 = 0; j0 < kb; j0 += kPanel) {
    const float* panel = panels + (j0 / kPanel) * kPanel * d;
    int64_t r = 0;
    for (; r + kTileRows <= rows; r += kTileRows)
      pv_tile<V, kTileRows, 2, false>(q + r * d, d, d, panel, kPanel, s + r * kKeyBlock + j0,
                                      kKeyBlock);
    const float* qr = q + r * d;
    float* sr = s + r * kKeyBlock + j0;
    switch (rows - r) {
      case 5:
        pv_tile<V, 5, 2, false>(qr, d, d, panel, kPanel, sr, kKeyBlock);
        break;
      case 4:
        pv_tile<V, 4, 2, false>(qr, d, d, panel, kPanel, sr, kKeyBlock);
        break;
      case 3:
        pv_tile<V, 3, 2, false>(qr, d, d, panel, kPanel, sr, kKeyBlock);
        break;
      case 2:
        pv_tile<V, 2, 2, false>(qr, d, d, panel, kPanel, sr, kKeyBlock);
        break;
      case 1:
        pv_tile<V, 1, 2, false>(qr, d, d, panel, kPanel, sr, kKeyBlock);
        break;
      default:
        break;
    }
  }
}

// The float32 products: FMAs on the vector type's registers, operands stored as float32 (keys
// as V::pack_key_panels' panels, values as rows zero-padded to whole vectors).
template <typename V>
struct F32Products {
  using Elem = float;
  static int64_t padded_dv(int64_t dv) { return (dv + V::kLanes - 1) / V::kLanes * V::kLanes; }
  static int64_t query_elems(int64_t rows, int64_t d) { return rows * d; }
  static void prepare_queries(const float* q, int64_t rs, int64_t rows, int64_t d, float scale,
                              float* dst) {
    attention_copy_rows_scaled(q, rs, rows, d, scale, dst);
  }
  static int64_t key_block_elems(int64_t d) { return kKeyBlock * d; }
  static int64_t key_offset(int64_t j0, int64_t d) { return j0 * d; }
  static void pack_keys(const float* k, int64_t rs, int64_t cs, int64_t kb, int64_t d, float* dst) {
    V::pack_key_panels(k, rs, cs, kb, d, dst);
  }
  static int64_t value_block_elems(int64_t dv) { return kKeyBlock * padded_dv(dv); }
  static int64_t value_offset(int64_t j0, int64_t dv) { return j0 * padded_dv(dv); }
  static void pack_values(const float* v, int64_t rs, int64_t kb, int64_t dv, float* dst) {
    attention_copy_rows_padded(v, rs, kb, dv, padded_dv(dv), dst);
  }
  static void scores(const float* q, int64_t rows, int64_t kb, int64_t d, const float* keys,
                     float* s) {
    qk_scores<V>(q, rows, kb, d, keys, s);
  }
  // acc's rows are padded_dv(dv) floats apart here (the tile's accumulator).
  static void accumulate(const float* p, int64_t rows, int64_t kb, const float* values, int64_t dv,
                         float* acc, int64_t acc_rs) {
    pv_accumulate<V>(p, rows, kb, values, padded_dv(dv), acc, acc_rs);
  }
};

template <typename V, typename Products = F32Products<V>>
void attention_tile(const AttentionTile& t) {
  static_assert(kKeyBlock % (2 * V::kLanes) == 0);  // whole key panels
  using Reg = typename V::Reg;
  using Elem = typename Products::Elem;
  constexpr int64_t L = V::kLanes;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  thread_local AttentionScratch<Elem> scratch;
  // The accumulator's rows are dv rounded up to whole vectors, zero-padded: P V then runs on
  // vector tiles only (head size 36, MobileViT: its last 4 columns went one element at a time);
  // the padding columns stay zero and are not written out.
  const int64_t dvp = (t.dv + L - 1) / L * L;
  attention_grow(scratch.scores, t.rows * kKeyBlock);
  attention_grow(scratch.acc, t.rows * dvp);
  attention_grow(scratch.m, t.rows);
  attention_grow(scratch.l, t.rows);
  float* scores = scratch.scores.data();
  float* acc = scratch.acc.data();
  float* m = scratch.m.data();
  float* l = scratch.l.data();
  std::fill(acc, acc + t.rows * dvp, 0.0f);
  std::fill(m, m + t.rows, kNegInf);
  std::fill(l, l + t.rows, 0.0f);
  // Keys any row of the tile sees.
  const int64_t keys = t.causal ? std::clamp<int64_t>(t.key_limit0 + t.rows - 1, 0, t.skv) : t.skv;
  Elem* key_block = t.k_packed ? nullptr : scratch.keys.get(Products::key_block_elems(t.d));
  Elem* value_block = t.v_packed ? nullptr : scratch.values.get(Products::value_block_elems(t.dv));
  // The scale goes into the copy of Q: the scores come out of Q K^T scaled.
  Elem* q = scratch.q.get(Products::query_elems(t.rows, t.d));
  Products::prepare_queries(t.q, t.q_rs, t.rows, t.d, t.scale, q);
  for (int64_t j0 = 0; j0 < keys; j0 += kKeyBlock) {
    const int64_t kb = std::min(kKeyBlock, keys - j0);
    const int64_t kb_vectors = (kb + L - 1) / L * L;
    const Elem* k = t.k_packed
                        ? static_cast<const Elem*>(t.k_packed) + Products::key_offset(j0, t.d)
                        : key_block;
    if (!t.k_packed) Products::pack_keys(t.k + j0 * t.k_rs, t.k_rs, t.k_cs, kb, t.d, key_block);
    const Elem* v = t.v_packed
                        ? static_cast<const Elem*>(t.v_packed) + Products::value_offset(j0, t.dv)
                        : value_block;
    if (!t.v_packed) Products::pack_values(t.v + j0 * t.v_rs, t.v_rs, kb, t.dv, value_block);
    Products::scores(q, t.rows, kb, t.d, k, scores);
    if (t.softcap > 0)  // scores tanh-capped before the mask (rare: the plain loop suffices)
      for (int64_t r = 0; r < t.rows; ++r)
        for (int64_t j = 0; j < kb; ++j) {
          float& x = scores[r * kKeyBlock + j];
          x = t.softcap * std::tanh(x / t.softcap);
        }
    for (int64_t r = 0; r < t.rows; ++r) {
      float* s = scores + r * kKeyBlock;  // (kb_vectors) for this row
      const int64_t visible = t.causal ? std::clamp<int64_t>(t.key_limit0 + r - j0, 0, kb) : kb;
      if (visible == 0) {
        std::fill(s, s + kb, 0.0f);
        continue;
      }
      // S += mask on the visible keys, the row's maximum, -inf on the rest of the vectors.
      const float* mask = t.mask ? t.mask + r * t.mask_rs + j0 * t.mask_cs : nullptr;
      Reg vmax = V::set1(kNegInf);
      int64_t j = 0;
      if (mask == nullptr) {
        for (; j + L <= visible; j += L) vmax = V::max(vmax, V::loadu(s + j));
      } else if (t.mask_cs == 1) {
        for (; j + L <= visible; j += L) {
          const Reg x = V::add(V::loadu(s + j), V::loadu(mask + j));
          V::storeu(s + j, x);
          vmax = V::max(vmax, x);
        }
      }
      float row_max = V::reduce_max(vmax);
      for (; j < visible; ++j) {
        if (mask) s[j] += mask[j * t.mask_cs];
        row_max = std::max(row_max, s[j]);
      }
      for (; j < kb_vectors; ++j) s[j] = kNegInf;
      const float m_new = std::max(m[r], row_max);
      if (m_new == kNegInf) {  // every visible score so far is -inf: nothing to add yet
        std::fill(s, s + kb, 0.0f);
        continue;
      }
      const Reg vm = V::set1(m_new);
      Reg vsum = V::zero();
      for (j = 0; j < kb_vectors; j += L) {
        const Reg p = V::exp(V::sub(V::loadu(s + j), vm));
        V::storeu(s + j, p);
        vsum = V::add(vsum, p);
      }
      // The row's earlier sum and accumulator scaled to the new maximum. Most blocks leave the
      // maximum as it was (no scalar exp); before the first visible block there is nothing to
      // scale (l and the accumulator row are 0).
      const bool first = m[r] == kNegInf;
      const float correction = first ? 0.0f : m_new == m[r] ? 1.0f : std::exp(m[r] - m_new);
      if (!first && correction != 1.0f) {
        float* a = acc + r * dvp;
        const Reg vc = V::set1(correction);
        for (int64_t c = 0; c < dvp; c += L) V::storeu(a + c, V::mul(V::loadu(a + c), vc));
      }
      l[r] = l[r] * correction + V::reduce_add(vsum);
      m[r] = m_new;
    }
    Products::accumulate(scores, t.rows, kb, v, t.dv, acc, dvp);
  }
  for (int64_t r = 0; r < t.rows; ++r) {
    // l == 0 (no visible key): NaN, as the unfused graph, or zeros when asked.
    const float inv = l[r] == 0.0f && t.empty_rows_zero ? 0.0f : 1.0f / l[r];
    const float* a = acc + r * dvp;
    float* out = t.out + r * t.out_rs;
    int64_t c = 0;
    for (; c + L <= t.dv; c += L) V::storeu(out + c, V::mul(V::loadu(a + c), V::set1(inv)));
    for (; c < t.dv; ++c) out[c] = a[c] * inv;
  }
}

// The tile's keys and values for all t.skv keys, packed as attention_tile packs one key block:
// key j0's block at Products::key_offset(j0, d) elements of k_dst, its values at
// Products::value_offset(j0, dv) of v_dst.
template <typename Products>
void attention_pack(const AttentionTile& t, void* k_dst, void* v_dst) {
  using Elem = typename Products::Elem;
  Elem* k = static_cast<Elem*>(k_dst);
  Elem* v = static_cast<Elem*>(v_dst);
  for (int64_t j0 = 0; j0 < t.skv; j0 += kKeyBlock) {
    const int64_t kb = std::min(kKeyBlock, t.skv - j0);
    Products::pack_keys(t.k + j0 * t.k_rs, t.k_rs, t.k_cs, kb, t.d,
                        k + Products::key_offset(j0, t.d));
    Products::pack_values(t.v + j0 * t.v_rs, t.v_rs, kb, t.dv,
                          v + Products::value_offset(j0, t.dv));
  }
}

// Elements (4 bytes each) of a batch index's keys and values packed by attention_pack.
template <typename Products>
int64_t attention_packed_key_elems(int64_t skv, int64_t d) {
  return Products::key_offset((skv + kKeyBlock - 1) / kKeyBlock * kKeyBlock, d);
}
template <typename Products>
int64_t attention_packed_value_elems(int64_t skv, int64_t dv) {
  return Products::value_offset((skv + kKeyBlock - 1) / kKeyBlock * kKeyBlock, dv);
}

}  // namespace
}  // namespace peregrine::cpu
