// The attention tile (kernels/attention.h) with bf16 products, AVX-512 BF16: the algorithm of
// kernels/attention_tile_impl.h on 512-bit registers (kernels/attention_zmm.h), its two
// products on the bf16 GEMM micro-kernel (ukernels/bf16_gemm_ukernels.h: 14 x 32 register
// tiles, vdpbf16ps, float32 accumulators). Q (scaled), K and V are rounded to bf16 once, when
// copied or packed; P is rounded per key block, after the float32 softmax step; the running
// max, the row sums and the accumulator stay float32 (the rule of docs/DESIGN.md, "Compute
// precision").
//   queries: 14-row A panels of (d / 2, 14) pairs;
//   keys: per 32 keys a B panel of (d / 2, 32) pairs: panel[q * 32 + jj] = key jj's features
//     2q, 2q + 1;
//   values: per 32 columns of dv a B panel of (kKeyBlock / 2, 32) pairs: keys 2q and 2q + 1 of
//     the column;
//   P: each row converted to bf16 in key order (keys 2q, 2q + 1 form pair q), read by the
//     micro-kernel as unpacked A rows.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/kernels/attention.h"
#include "backends/cpu/kernels/attention_tile_impl.h"
#include "backends/cpu/kernels/attention_zmm.h"
#include "backends/cpu/ukernels/avx512_lane_mask.h"
#include "backends/cpu/ukernels/bf16_gemm_ukernels.h"
#include "backends/cpu/ukernels/f32_transpose_avx512.h"

namespace peregrine::cpu::avx512bf16 {

namespace {

constexpr int64_t kMr = kBf16GemmMr;
constexpr int64_t kNr = kBf16GemmNr;

int64_t pairs(int64_t n) { return (n + 1) / 2; }

// Keys [0, kb) of K (key j feature e at k[j * rs + e * cs]) as ceil(kb / 32) B panels of
// (pairs(d), 32), keys past kb zero.
void pack_key_pairs(const float* k, int64_t rs, int64_t cs, int64_t kb, int64_t d, uint32_t* dst) {
  const int64_t kp = pairs(d);
  std::fill(dst, dst + (kb + kNr - 1) / kNr * kNr * kp, 0u);
  for (int64_t j0 = 0; j0 < kb; j0 += kNr) {
    uint32_t* panel = dst + (j0 / kNr) * kNr * kp;
    const int64_t keys = std::min(kNr, kb - j0);
    if (rs == 1) {  // K^T: feature rows of contiguous keys, the GEMM's B layout
      bf16_pack_b_32__avx512bf16(k + j0, static_cast<size_t>(cs), static_cast<size_t>(d),
                                 static_cast<size_t>(keys), panel);
      continue;
    }
    if (cs != 1) {  // neither layout contiguous (not produced by the node's forms)
      for (int64_t jj = 0; jj < keys; ++jj)
        for (int64_t q = 0; q < kp; ++q) {
          const float* key = k + (j0 + jj) * rs;
          const uint32_t lo = float_to_bf16_bits(key[2 * q * cs]);
          const uint32_t hi = 2 * q + 1 < d ? float_to_bf16_bits(key[(2 * q + 1) * cs]) : 0u;
          panel[q * kNr + jj] = lo | hi << 16;
        }
      continue;
    }
    // Row-major K: a key's row converted to bf16 is its pairs in order; 16 keys x 16 pairs at
    // a time are transposed as 32-bit elements.
    for (int64_t jj = 0; jj < keys; jj += 16) {
      const int64_t n = std::min<int64_t>(16, keys - jj);
      for (int64_t q0 = 0; q0 < kp; q0 += 16) {
        const int64_t features = std::min<int64_t>(32, d - 2 * q0);
        const __mmask16 m0 = avx512::first_lanes(features), m1 = avx512::first_lanes(features - 16);
        __m512 r[16];
        for (int64_t i = 0; i < 16; ++i) {
          if (i >= n) {
            r[i] = _mm512_setzero_ps();
            continue;
          }
          const float* src = k + (j0 + jj + i) * rs + 2 * q0;
          const __m512bh both = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, src + 16),
                                                    _mm512_maskz_loadu_ps(m0, src));
          r[i] = reinterpret_cast<const __m512&>(both);
        }
        avx512::transpose16x16(r);  // r[f]: pair q0 + f of the 16 keys
        for (int64_t f = 0; f < std::min<int64_t>(16, kp - q0); ++f)
          _mm512_storeu_ps(reinterpret_cast<float*>(panel + (q0 + f) * kNr + jj), r[f]);
      }
    }
  }
}

struct Bf16Products {
  using Elem = uint32_t;
  static int64_t value_panels(int64_t dv) { return (dv + kNr - 1) / kNr; }
  static constexpr int64_t kValuePanelPairs = kKeyBlock / 2;

  static int64_t query_elems(int64_t rows, int64_t d) {
    return (rows + kMr - 1) / kMr * kMr * pairs(d);
  }
  static void prepare_queries(const float* q, int64_t rs, int64_t rows, int64_t d, float scale,
                              uint32_t* dst) {
    thread_local std::vector<float> scaled;
    attention_grow(scaled, kMr * d);
    for (int64_t r0 = 0; r0 < rows; r0 += kMr) {
      const int64_t n = std::min(kMr, rows - r0);
      attention_copy_rows_scaled(q + r0 * rs, rs, n, d, scale, scaled.data());
      bf16_pack_a_14__avx512bf16(scaled.data(), static_cast<size_t>(d), static_cast<size_t>(n),
                                 static_cast<size_t>(d), dst + (r0 / kMr) * kMr * pairs(d));
    }
  }
  static int64_t key_block_elems(int64_t d) { return kKeyBlock * pairs(d); }
  static int64_t key_offset(int64_t j0, int64_t d) { return j0 * pairs(d); }
  static void pack_keys(const float* k, int64_t rs, int64_t cs, int64_t kb, int64_t d,
                        uint32_t* dst) {
    pack_key_pairs(k, rs, cs, kb, d, dst);
  }
  static int64_t value_block_elems(int64_t dv) { return value_panels(dv) * kValuePanelPairs * kNr; }
  static int64_t value_offset(int64_t j0, int64_t dv) {
    return j0 / kKeyBlock * value_block_elems(dv);
  }
  static void pack_values(const float* v, int64_t rs, int64_t kb, int64_t dv, uint32_t* dst) {
    for (int64_t c = 0; c < value_panels(dv); ++c)
      bf16_pack_b_32__avx512bf16(v + c * kNr, static_cast<size_t>(rs), static_cast<size_t>(kb),
                                 static_cast<size_t>(std::min(kNr, dv - c * kNr)),
                                 dst + c * kValuePanelPairs * kNr);
  }
  static void scores(const uint32_t* q, int64_t rows, int64_t kb, int64_t d, const uint32_t* keys,
                     float* s) {
    const int64_t kp = pairs(d);
    for (int64_t i0 = 0; i0 < rows; i0 += kMr) {
      const uint32_t* a = q + (i0 / kMr) * kMr * kp;
      for (int64_t j = 0; j < kb; j += kNr)
        bf16_gemm_ukernel_14x32__avx512bf16(static_cast<size_t>(std::min(kMr, rows - i0)),
                                            static_cast<size_t>(std::min(kNr, kb - j)),
                                            static_cast<size_t>(kp), a, keys + (j / kNr) * kNr * kp,
                                            s + i0 * kKeyBlock + j, static_cast<size_t>(kKeyBlock),
                                            1.0f, 0.0f, nullptr);
    }
  }
  // P's rows are converted to bf16 rows (consecutive keys are a pair) that the micro-kernel
  // reads in place: packing them as A panels (a transpose) cost more than the bf16 products
  // saved (peregrine_attention_bench, BM_AttentionBf16).
  static void accumulate(const float* p, int64_t rows, int64_t kb, const uint32_t* values,
                         int64_t dv, float* acc, int64_t acc_rs) {
    constexpr int64_t kRowPairs = static_cast<int64_t>(kBf16GemmRowPairs);
    static_assert(kKeyBlock == 2 * kRowPairs);
    const int64_t kp = pairs(kb);
    thread_local GrowBuffer<uint32_t> weights_buffer;
    uint32_t* w = weights_buffer.get(static_cast<size_t>(rows * kRowPairs));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < kb; j += 16) {  // keys past kb read as 0 (an odd kb's pad)
        const __m512 x = _mm512_maskz_loadu_ps(avx512::first_lanes(kb - j), p + r * kKeyBlock + j);
        const __m256bh h = _mm512_cvtneps_pbh(x);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(w + r * kRowPairs + j / 2),
                            reinterpret_cast<const __m256i&>(h));
      }
    for (int64_t i0 = 0; i0 < rows; i0 += kMr) {
      const int64_t n = std::min(kMr, rows - i0);
      for (int64_t c = 0; c < value_panels(dv); ++c)
        bf16_gemm_ukernel_14x32_a_rows__avx512bf16(
            static_cast<size_t>(n), static_cast<size_t>(std::min(kNr, dv - c * kNr)),
            static_cast<size_t>(kp), w + i0 * kRowPairs, values + c * kValuePanelPairs * kNr,
            acc + i0 * acc_rs + c * kNr, static_cast<size_t>(acc_rs), 1.0f, 1.0f, nullptr);
    }
  }
};

}  // namespace

void bf16_attention_tile__avx512bf16(const AttentionTile& t) {
  attention_tile<avx512::Zmm, Bf16Products>(t);
}
void bf16_attention_pack__avx512bf16(const AttentionTile& t, void* k_dst, void* v_dst) {
  attention_pack<Bf16Products>(t, k_dst, v_dst);
}
int64_t bf16_attention_key_words__avx512bf16(int64_t skv, int64_t d) {
  return attention_packed_key_elems<Bf16Products>(skv, d);
}
int64_t bf16_attention_value_words__avx512bf16(int64_t skv, int64_t dv) {
  return attention_packed_value_elems<Bf16Products>(skv, dv);
}

}  // namespace peregrine::cpu::avx512bf16
