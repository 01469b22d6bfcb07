// bf16 GEMM micro-kernel, AVX-512 BF16: MR = 14, NR = 32, float32 accumulators.
// Registers: 28 zmm accumulators (14 rows x 2 vectors of 16 columns), 2 for the B pair row,
// 1 broadcast of an A pair. Each pair step (two k): 2 loads of B, 14 broadcasts, 28 vdpbf16ps.
// The row count is a template parameter, so a tile of fewer rows (a linear layer of a few
// tokens) issues only its rows' dot products. Packing and edge contract: bf16_gemm_ukernels.h.
#include <immintrin.h>

// GCC 12's _mm512_max_ps / _mm512_min_ps pass an _mm512_undefined_ps() pass-through operand
// that -W(maybe-)uninitialized reports once inlined; it is never read (the mask is all ones).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backends/cpu/ukernels/avx512_lane_mask.h"
#include "backends/cpu/ukernels/bf16_gemm_ukernels.h"
#include "backends/cpu/ukernels/f32_transpose_avx512.h"

namespace peregrine::cpu::avx512bf16 {

namespace {

constexpr int kMr = kBf16GemmMr;
// Packed weights are read once per run and stream from memory: a linear layer's B pair rows
// and a conv's A panel are requested far enough ahead to cover memory latency, as in the f32
// kernel (bench/compare.py --precision bf16, BERT and ResNet-50).
constexpr size_t kPrefetchPairs = 32;
constexpr size_t kPrefetchAPairs = 96;
constexpr size_t kPrefetchCMinLdc = 1024;  // floats: C rows a page apart

inline __m512bh as_bh(__m512i v) { return reinterpret_cast<__m512bh&>(v); }

// Pair row q of a tile's B: a packed panel (64-byte aligned, its columns zero-padded to 32).
struct PackedPairs {
  const uint32_t* b;
  static constexpr bool kInPlace = false;
  const uint32_t* row(size_t q) const { return b + q * 32; }
  const uint32_t* prefetch_target(size_t q) const { return row(q + kPrefetchPairs); }
};

// Pair row q at rows[q] + offset, read in place (a phase plane of pairs, kernels/
// conv_phase_planes.h): loads are masked to the tile's columns. As in the f32 kernel's
// indirect rows, each step requests its own run two column tiles further on.
struct IndirectPairs {
  const uint32_t* const* rows;
  size_t offset;
  static constexpr bool kInPlace = true;
  const uint32_t* row(size_t q) const { return rows[q] + offset; }
  const uint32_t* prefetch_target(size_t q) const { return row(q) + 64; }
};

// kPackedA: A is a packed micro-panel (pair q of row i at a[q * MR + i]); else A is read in
// place as rows of kBf16GemmRowPairs pairs (pair q of row i at a[i * kBf16GemmRowPairs + q]),
// L1-resident, so it is not prefetched.
template <int R, bool kPackedA, class B>
void tile(size_t cols, size_t kp, const uint32_t* a, B b, float* c, size_t ldc, float alpha,
          float beta, const F32GemmTileEpilogue* ep) {
  constexpr size_t kPairStep = kPackedA ? kMr : 1;
  constexpr size_t kRowStep = kPackedA ? 1 : kBf16GemmRowPairs;
  const __mmask16 m0 = avx512::first_lanes(cols),
                  m1 = avx512::first_lanes(cols > 16 ? cols - 16 : 0);
  // The tile's C rows (and its residual's) lie a whole C row apart, on a wide map (a page
  // or more) too many streams for the hardware prefetcher: requested before the K loop, they
  // arrive while it runs instead of missing at the store (ResNet-50's 56x56 1x1 convs,
  // bench/compare.py --precision bf16). Closer rows (an attention's score block, small maps)
  // are left to the hardware.
  if (ldc >= kPrefetchCMinLdc) {
#pragma GCC unroll 14
    for (int i = 0; i < R; ++i) {
      __builtin_prefetch(c + i * ldc, 1, 3);
      __builtin_prefetch(c + i * ldc + cols - 1, 1, 3);
    }
    if (ep && ep->residual)
      for (int i = 0; i < R; ++i) {
        __builtin_prefetch(ep->residual + i * ep->ldr, 0, 3);
        __builtin_prefetch(ep->residual + i * ep->ldr + cols - 1, 0, 3);
      }
  }
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
  for (size_t q = 0; q < kp; ++q, a += kPairStep) {
    if constexpr (kPackedA)
      _mm_prefetch(reinterpret_cast<const char*>(a + kPrefetchAPairs * kMr), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(b.prefetch_target(q)), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(b.prefetch_target(q) + 16), _MM_HINT_T0);
    const uint32_t* bq = b.row(q);
    __m512bh b0, b1;
    if constexpr (B::kInPlace) {
      b0 = as_bh(_mm512_maskz_loadu_epi32(m0, bq));
      b1 = as_bh(_mm512_maskz_loadu_epi32(m1, bq + 16));
    } else {
      b0 = as_bh(_mm512_load_si512(bq));
      b1 = as_bh(_mm512_load_si512(bq + 16));
    }
#pragma GCC unroll 14
    for (int i = 0; i < R; ++i) {
      const __m512bh av = as_bh(_mm512_set1_epi32(static_cast<int>(a[i * kRowStep])));
      acc0[i] = _mm512_dpbf16_ps(acc0[i], av, b0);
      acc1[i] = _mm512_dpbf16_ps(acc1[i], av, b1);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  __m512 col0 = _mm512_setzero_ps(), col1 = _mm512_setzero_ps();
  if (ep && ep->bias_col) {
    col0 = _mm512_maskz_loadu_ps(m0, ep->bias_col);
    col1 = _mm512_maskz_loadu_ps(m1, ep->bias_col + 16);
  }
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i) {
    float* row = c + i * ldc;
    __m512 v0 = acc0[i], v1 = acc1[i];
    if (alpha != 1.0f) v0 = _mm512_mul_ps(va, v0), v1 = _mm512_mul_ps(va, v1);
    if (beta != 0.0f) {
      v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), v0);
      v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), v1);
    }
    if (ep) {
      if (ep->bias_row) {
        const __m512 br = _mm512_set1_ps(ep->bias_row[i]);
        v0 = _mm512_add_ps(v0, br), v1 = _mm512_add_ps(v1, br);
      }
      v0 = _mm512_add_ps(v0, col0), v1 = _mm512_add_ps(v1, col1);
      if (ep->residual) {
        const float* r = ep->residual + i * ep->ldr;
        v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, r));
        v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, r + 16));
      }
      // max / min return their second operand when either is NaN: NaN stays NaN.
      const __m512 lo = _mm512_set1_ps(ep->lo), hi = _mm512_set1_ps(ep->hi);
      v0 = _mm512_min_ps(hi, _mm512_max_ps(lo, v0));
      v1 = _mm512_min_ps(hi, _mm512_max_ps(lo, v1));
      if (ep->hardswish) {
        const __m512 sixth = _mm512_set1_ps(1.0f / 6.0f), half = _mm512_set1_ps(0.5f);
        const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
        v0 = _mm512_mul_ps(
            v0, _mm512_min_ps(_mm512_max_ps(_mm512_fmadd_ps(v0, sixth, half), zero), one));
        v1 = _mm512_mul_ps(
            v1, _mm512_min_ps(_mm512_max_ps(_mm512_fmadd_ps(v1, sixth, half), zero), one));
      }
    }
    _mm512_mask_storeu_ps(row, m0, v0);
    _mm512_mask_storeu_ps(row + 16, m1, v1);
  }
}

template <class B>
using TileFn = void (*)(size_t, size_t, const uint32_t*, B, float*, size_t, float, float,
                        const F32GemmTileEpilogue*);
// kTiles<kPackedA, B>[r - 1]: the tile of r rows.
template <bool kPackedA, class B>
constexpr TileFn<B> kTiles[kMr] = {
    tile<1, kPackedA, B>,  tile<2, kPackedA, B>,  tile<3, kPackedA, B>,  tile<4, kPackedA, B>,
    tile<5, kPackedA, B>,  tile<6, kPackedA, B>,  tile<7, kPackedA, B>,  tile<8, kPackedA, B>,
    tile<9, kPackedA, B>,  tile<10, kPackedA, B>, tile<11, kPackedA, B>, tile<12, kPackedA, B>,
    tile<13, kPackedA, B>, tile<14, kPackedA, B>};

// 32 bf16 of two float32 rows r0 (low pair halves) and r1 (high), 16 columns each, interleaved
// into 16 pairs: lanes 2j, 2j + 1 = r0[j], r1[j].
inline __m512i interleave_pairs(__m512 r0, __m512 r1) {
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24,
                                       8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i both = reinterpret_cast<const __m512i&>(
      static_cast<const __m512bh&>(_mm512_cvtne2ps_pbh(r1, r0)));  // lanes 0-15 r0, 16-31 r1
  return _mm512_permutexvar_epi16(idx, both);
}

}  // namespace

void bf16_gemm_ukernel_14x32__avx512bf16(size_t rows, size_t cols, size_t kp, const uint32_t* a,
                                         const uint32_t* b, float* c, size_t ldc, float alpha,
                                         float beta, const F32GemmTileEpilogue* ep) {
  kTiles<true, PackedPairs>[rows - 1](cols, kp, a, PackedPairs{b}, c, ldc, alpha, beta, ep);
}

void bf16_gemm_indirect_ukernel_14x32__avx512bf16(size_t rows, size_t cols, size_t kp,
                                                  const uint32_t* a, const uint32_t* const* b_rows,
                                                  size_t b_offset, float* c, size_t ldc,
                                                  float alpha, float beta,
                                                  const F32GemmTileEpilogue* ep) {
  kTiles<true, IndirectPairs>[rows - 1](cols, kp, a, IndirectPairs{b_rows, b_offset}, c, ldc, alpha,
                                        beta, ep);
}

void bf16_gemm_ukernel_14x32_a_rows__avx512bf16(size_t rows, size_t cols, size_t kp,
                                                const uint32_t* a, const uint32_t* b, float* c,
                                                size_t ldc, float alpha, float beta,
                                                const F32GemmTileEpilogue* ep) {
  kTiles<false, PackedPairs>[rows - 1](cols, kp, a, PackedPairs{b}, c, ldc, alpha, beta, ep);
}

void bf16_interleave_rows__avx512bf16(const float* r0, const float* r1, size_t n, uint32_t* dst) {
  for (size_t j = 0; j < n; j += 16) {
    const __mmask16 m = avx512::first_lanes(n - j);
    const __m512 lo = _mm512_maskz_loadu_ps(m, r0 + j);
    const __m512 hi = r1 ? _mm512_maskz_loadu_ps(m, r1 + j) : _mm512_setzero_ps();
    _mm512_mask_storeu_epi32(dst + j, m, interleave_pairs(lo, hi));
  }
}

void bf16_pack_b_32__avx512bf16(const float* src, size_t ld, size_t k, size_t cols,
                                uint32_t* dst) {
  const __mmask16 m0 = avx512::first_lanes(cols),
                  m1 = avx512::first_lanes(cols > 16 ? cols - 16 : 0);
  for (size_t p = 0; p < k; p += 2, dst += 32) {
    const float* r0 = src + p * ld;
    const float* r1 = r0 + ld;
    const bool second = p + 1 < k;
    const __m512 a0 = _mm512_maskz_loadu_ps(m0, r0), a1 = _mm512_maskz_loadu_ps(m1, r0 + 16);
    const __m512 b0 = second ? _mm512_maskz_loadu_ps(m0, r1) : _mm512_setzero_ps();
    const __m512 b1 = second ? _mm512_maskz_loadu_ps(m1, r1 + 16) : _mm512_setzero_ps();
    _mm512_store_si512(dst, interleave_pairs(a0, b0));
    _mm512_store_si512(dst + 16, interleave_pairs(a1, b1));
  }
}

void bf16_pack_a_14__avx512bf16(const float* src, size_t lda, size_t rows, size_t k,
                                uint32_t* dst) {
  // Each row converted to bf16 is its pairs in order; the panel is those rows transposed:
  // per 16 pairs (32 values), the 14 rows' vectors of 16 pairs (two zero rows below) go
  // through one 16x16 transpose of 32-bit elements, whose first 14 lanes per pair are the
  // panel's next 16 x 14 uint32, contiguous. (A store per pair and row was a visible share of
  // the whisper_tiny_encoder run at bf16, bench/compare.py: its linear layers' activations.)
  constexpr __mmask16 kPanelRow = (1u << kMr) - 1u;
  for (size_t p = 0; p < k; p += 32) {
    const size_t n = k - p < 32 ? k - p : 32;
    const __mmask16 lo = avx512::first_lanes(n), hi = avx512::first_lanes(n > 16 ? n - 16 : 0);
    __m512 r[16];
    for (size_t i = 0; i < 16; ++i) {
      if (i >= rows) {
        r[i] = _mm512_setzero_ps();
        continue;
      }
      const float* row = src + i * lda + p;
      const __m512bh v =
          _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, row + 16), _mm512_maskz_loadu_ps(lo, row));
      r[i] = reinterpret_cast<const __m512&>(v);  // 16 pairs in order
    }
    avx512::transpose16x16(r);  // r[q]: pair p / 2 + q of every row
    const size_t pairs = (n + 1) / 2;
    for (size_t q = 0; q < pairs; ++q)
      _mm512_mask_storeu_ps(reinterpret_cast<float*>(dst + (p / 2 + q) * kMr), kPanelRow, r[q]);
  }
}

}  // namespace peregrine::cpu::avx512bf16
