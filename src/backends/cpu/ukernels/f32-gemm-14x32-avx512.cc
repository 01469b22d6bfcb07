// f32 GEMM micro-kernels, AVX-512F: MR = 14, NR = 32.
// Registers: 28 zmm accumulators (14 rows x 2 vectors of 16), 2 for the B row, 1 broadcast
// of A: 31 of 32. Each k step: 2 loads of B, 14 broadcasts of A, 28 FMAs.
// Four entry points: the plain tile, the fused tile (epilogue in registers), the partial tile,
// which takes any rows <= 14 and columns <= 32 of a tile, a B row stride (packed panels or a
// row-major B read in place) and an optional epilogue, and stores straight into C, and the
// indirect tile: the partial one with a pointer per B row (indirect convolution). One K loop
// each, templated on how B's rows are found (StridedRows, IndirectRows).
// Packing and edge contract: ukernels/f32_gemm_ukernels.h.
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/ukernels/avx512_lane_mask.h"
#include "backends/cpu/ukernels/f32_gemm_ukernels.h"

// GCC 12's _mm512_max_ps / _mm512_min_ps pass an _mm512_undefined_ps() pass-through operand
// that -W(maybe-)uninitialized reports once inlined; it is never read (the mask is all ones).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace peregrine::cpu::avx512 {

namespace {

constexpr int kMr = 14;

// B rows requested this many k steps ahead. A linear layer's B is its packed weights, read once
// per run from memory, so the request must cover memory latency, not only L2's (BERT, ViT,
// DistilBERT and EfficientNet-B0 in bench/compare.py; ResNet-50 unchanged).
constexpr size_t kPrefetchRows = 16;
// A (the packed weights of a conv) requested this many k steps ahead: on 7x7 to 28x28 maps an
// A panel feeds only a few tiles, so the weights stream from memory and the request must run a
// memory latency ahead of the FMAs (every CNN of bench/compare.py's suite; a linear layer's A,
// packed whole and in L2, unchanged).
constexpr size_t kPrefetchA = 96;

// Row p of a tile's B at b + p * ldb: a packed panel (ldb = 32) or a row-major B read in place.
struct StridedRows {
  const float* b;
  size_t ldb;
  static constexpr bool kPrefetch = true;
  const float* row(size_t p) const { return b + p * ldb; }
  const float* prefetch_target(size_t p) const { return row(p + kPrefetchRows); }
  StridedRows shifted(size_t columns) const { return {b + columns, ldb}; }
};

// Row p of a tile's B at rows[p] + offset: a tap's run of input pixels (indirect convolution).
// The runs lie in as many places as there are taps, too many streams for the hardware
// prefetcher, so each k step requests its own run two column tiles further on, which the
// tiles after this one read (the strided convs of yolo_style_640 and r3d_18, bench/compare.py).
struct IndirectRows {
  const float* const* rows;
  size_t offset;
  static constexpr bool kPrefetch = true;
  const float* row(size_t p) const { return rows[p] + offset; }
  const float* prefetch_target(size_t p) const { return row(p) + 64; }
  IndirectRows shifted(size_t columns) const { return {rows, offset + columns}; }
};

// acc(14, 32) = A panel (kc, 14) * B (kc, 32), all 28 accumulators in registers.
template <class B>
inline __attribute__((always_inline)) void accumulate_14x32(size_t kc, const float* a, B b,
                                                            __m512 (&acc0)[kMr],
                                                            __m512 (&acc1)[kMr]) {
  __m512 r0[kMr], r1[kMr];
#pragma GCC unroll 14
  for (int i = 0; i < kMr; ++i) r0[i] = r1[i] = _mm512_setzero_ps();
  for (size_t p = 0; p < kc; ++p) {
    const float* bp = b.row(p);
    // Past a panel's end these touch the next panel (or nothing that faults: a prefetch).
    _mm_prefetch(reinterpret_cast<const char*>(a + kPrefetchA * kMr), _MM_HINT_T0);
    if constexpr (B::kPrefetch) {
      _mm_prefetch(reinterpret_cast<const char*>(b.prefetch_target(p)), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(b.prefetch_target(p) + 16), _MM_HINT_T0);
    }
    const __m512 b0 = _mm512_loadu_ps(bp);       // B(p, 0:16)
    const __m512 b1 = _mm512_loadu_ps(bp + 16);  // B(p, 16:32)
#pragma GCC unroll 14
    for (int i = 0; i < kMr; ++i) {
      const __m512 av = _mm512_set1_ps(a[i]);
      r0[i] = _mm512_fmadd_ps(av, b0, r0[i]);
      r1[i] = _mm512_fmadd_ps(av, b1, r1[i]);
    }
    a += kMr;
  }
#pragma GCC unroll 14
  for (int i = 0; i < kMr; ++i) acc0[i] = r0[i], acc1[i] = r1[i];
}

// Rows 0..R-1 of a tile from registers to C: alpha * acc + beta * C, then, with `ep`, the bias,
// the residual and the clamp; the columns masked by m0 (0..15) and m1 (16..31, V == 2).
template <int R, int V>
inline __attribute__((always_inline)) void store_rows(const __m512 (&acc0)[R],
                                                      const __m512 (&acc1)[R], __mmask16 m0,
                                                      __mmask16 m1, float* c, size_t ldc,
                                                      float alpha, float beta,
                                                      const F32GemmTileEpilogue* ep) {
  __m512 col0 = _mm512_setzero_ps(), col1 = _mm512_setzero_ps();
  if (ep && ep->bias_col) {
    col0 = _mm512_maskz_loadu_ps(m0, ep->bias_col);
    if constexpr (V == 2) col1 = _mm512_maskz_loadu_ps(m1, ep->bias_col + 16);
  }
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i) {
    float* row = c + i * ldc;
    __m512 v0 = acc0[i], v1 = acc1[i];
    if (alpha != 1.0f) {
      v0 = _mm512_mul_ps(_mm512_set1_ps(alpha), v0);
      if constexpr (V == 2) v1 = _mm512_mul_ps(_mm512_set1_ps(alpha), v1);
    }
    if (beta != 0.0f) {
      v0 = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(m0, row), v0);
      if constexpr (V == 2)
        v1 = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(m1, row + 16), v1);
    }
    if (ep) {
      if (ep->bias_row) {
        const __m512 br = _mm512_set1_ps(ep->bias_row[i]);
        v0 = _mm512_add_ps(v0, br);
        if constexpr (V == 2) v1 = _mm512_add_ps(v1, br);
      }
      if (ep->bias_col) {
        v0 = _mm512_add_ps(v0, col0);
        if constexpr (V == 2) v1 = _mm512_add_ps(v1, col1);
      }
      if (ep->residual) {
        const float* r = ep->residual + i * ep->ldr;
        v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, r));
        if constexpr (V == 2) v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, r + 16));
      }
      // max / min return their second operand when either is NaN: NaN stays NaN.
      const __m512 lo = _mm512_set1_ps(ep->lo), hi = _mm512_set1_ps(ep->hi);
      v0 = _mm512_min_ps(hi, _mm512_max_ps(lo, v0));
      if constexpr (V == 2) v1 = _mm512_min_ps(hi, _mm512_max_ps(lo, v1));
      if (ep->hardswish) {
        const __m512 sixth = _mm512_set1_ps(1.0f / 6.0f), half = _mm512_set1_ps(0.5f);
        const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
        v0 = _mm512_mul_ps(v0, _mm512_min_ps(_mm512_max_ps(_mm512_fmadd_ps(v0, sixth, half), zero), one));
        if constexpr (V == 2)
          v1 = _mm512_mul_ps(v1, _mm512_min_ps(_mm512_max_ps(_mm512_fmadd_ps(v1, sixth, half), zero), one));
      }
    }
    _mm512_mask_storeu_ps(row, m0, v0);
    if constexpr (V == 2) _mm512_mask_storeu_ps(row + 16, m1, v1);
  }
}

// A whole tile, K loop unmasked, stored by store_rows. The K loop and the epilogue are inlined
// together so the accumulators reach the epilogue in registers (through a call they took 28
// stores and 28 loads, a cost that showed on the K = 16-24 1x1 convs of MobileNetV2).
template <class B>
inline __attribute__((always_inline)) void full_tile(size_t kc, const float* a, B b, float* c,
                                                     size_t ldc, float alpha, float beta,
                                                     const F32GemmTileEpilogue* ep) {
  __m512 acc0[kMr], acc1[kMr];
  accumulate_14x32(kc, a, b, acc0, acc1);
  store_rows<kMr, 2>(acc0, acc1, 0xFFFF, 0xFFFF, c, ldc, alpha, beta, ep);
}

// full_tile as a call of its own, for the partial kernel's whole tiles (a B read in place):
// inlined into vector_part, the ResNet-50 stem's GEMM shape with B in place (147 rows 50 KB
// apart) ran markedly slower in alternating runs, with the same K loop.
template <class B>
__attribute__((noinline)) void full_tile_call(size_t kc, const float* a, B b, float* c, size_t ldc,
                                              float alpha, float beta,
                                              const F32GemmTileEpilogue* ep) {
  full_tile(kc, a, b, c, ldc, alpha, beta, ep);
}

// The first R rows and V vectors of 16 columns of an edge tile (the A panel keeps its 14-row
// stride), K loop and epilogue in one call as in full_tile: a tile 4 columns wide costs half a
// full one, not all of it.
template <class B, int R, int V>
__attribute__((noinline)) void part_tile(size_t kc, const float* a, B b, __mmask16 m0, __mmask16 m1,
                                         float* c, size_t ldc, float alpha, float beta,
                                         const F32GemmTileEpilogue* ep) {
  __m512 r0[R], r1[R];
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i) r0[i] = r1[i] = _mm512_setzero_ps();
  for (size_t p = 0; p < kc; ++p) {
    _mm_prefetch(reinterpret_cast<const char*>(a + kPrefetchA * kMr), _MM_HINT_T0);
    // Masked to the tile's columns: a B read in place must not run past its last row.
    const float* bp = b.row(p);
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, bp);
    const __m512 b1 = V == 2 ? _mm512_maskz_loadu_ps(m1, bp + 16) : _mm512_setzero_ps();
#pragma GCC unroll 14
    for (int i = 0; i < R; ++i) {
      const __m512 av = _mm512_set1_ps(a[i]);
      r0[i] = _mm512_fmadd_ps(av, b0, r0[i]);
      if constexpr (V == 2) r1[i] = _mm512_fmadd_ps(av, b1, r1[i]);
    }
    a += kMr;
  }
  store_rows<R, V>(r0, r1, m0, m1, c, ldc, alpha, beta, ep);
}

template <class B>
using PartTileFn = void (*)(size_t, const float*, B, __mmask16, __mmask16, float*, size_t, float,
                            float, const F32GemmTileEpilogue*);
// kRowsOf<B, v>[r - 1]: the first r rows, v vectors.
template <class B, int V>
constexpr PartTileFn<B> kRowsOf[kMr] = {
    part_tile<B, 1, V>,  part_tile<B, 2, V>,  part_tile<B, 3, V>,  part_tile<B, 4, V>,
    part_tile<B, 5, V>,  part_tile<B, 6, V>,  part_tile<B, 7, V>,  part_tile<B, 8, V>,
    part_tile<B, 9, V>,  part_tile<B, 10, V>, part_tile<B, 11, V>, part_tile<B, 12, V>,
    part_tile<B, 13, V>, part_tile<B, 14, V>};

// Columns 0..C-1 of B against the A panel, one vector over the 14 rows per column: one FMA per
// k and column, where a vector of 16 columns costs one per k and row. Even and odd k alternate
// two accumulator sets to halve the FMA latency chains.
template <class B, int C>
__attribute__((noinline)) void accumulate_columns(size_t kc, const float* a, B b,
                                                  __m512 (&acc)[kMr]) {
  constexpr __mmask16 kRows = (1u << kMr) - 1u;  // masked: the last k must not read past A
  __m512 even[C], odd[C];
#pragma GCC unroll 13
  for (int j = 0; j < C; ++j) even[j] = odd[j] = _mm512_setzero_ps();
  size_t p = 0;
  for (; p + 2 <= kc; p += 2) {
    _mm_prefetch(reinterpret_cast<const char*>(a + (p + kPrefetchA) * kMr), _MM_HINT_T0);
    const __m512 a0 = _mm512_maskz_loadu_ps(kRows, a + p * kMr);
    const __m512 a1 = _mm512_maskz_loadu_ps(kRows, a + (p + 1) * kMr);
    const float* b0 = b.row(p);
    const float* b1 = b.row(p + 1);
#pragma GCC unroll 13
    for (int j = 0; j < C; ++j) {
      even[j] = _mm512_fmadd_ps(a0, _mm512_set1_ps(b0[j]), even[j]);
      odd[j] = _mm512_fmadd_ps(a1, _mm512_set1_ps(b1[j]), odd[j]);
    }
  }
  if (p < kc) {
    const __m512 a0 = _mm512_maskz_loadu_ps(kRows, a + p * kMr);
    const float* b0 = b.row(p);
#pragma GCC unroll 13
    for (int j = 0; j < C; ++j) even[j] = _mm512_fmadd_ps(a0, _mm512_set1_ps(b0[j]), even[j]);
  }
#pragma GCC unroll 13
  for (int j = 0; j < C; ++j) acc[j] = _mm512_add_ps(even[j], odd[j]);
}

template <class B>
using AccumulateColumnsFn = void (*)(size_t, const float*, B, __m512 (&)[kMr]);
// kColumns<B>[c - 1]: the first c columns (c < 14: beyond that a vector of 16 is as cheap).
template <class B>
constexpr AccumulateColumnsFn<B> kColumns[13] = {
    accumulate_columns<B, 1>,  accumulate_columns<B, 2>,  accumulate_columns<B, 3>,
    accumulate_columns<B, 4>,  accumulate_columns<B, 5>,  accumulate_columns<B, 6>,
    accumulate_columns<B, 7>,  accumulate_columns<B, 8>,  accumulate_columns<B, 9>,
    accumulate_columns<B, 10>, accumulate_columns<B, 11>, accumulate_columns<B, 12>,
    accumulate_columns<B, 13>};

// Columns [first, first + count) of the tile (count < 14) through accumulate_columns, with the
// epilogue element by element (at most 14 x 13 of them).
template <class B>
void column_part(size_t rows, size_t first, size_t count, size_t kc, const float* a, B b, float* c,
                 size_t ldc, float alpha, float beta, const F32GemmTileEpilogue* ep) {
  __m512 acc[kMr];
  kColumns<B>[count - 1](kc, a, b.shifted(first), acc);
  alignas(64) float sums[13][16];  // sums[j][i]: row i of column first + j
  for (size_t j = 0; j < count; ++j) _mm512_store_ps(sums[j], acc[j]);
  for (size_t i = 0; i < rows; ++i) {
    float* row = c + i * ldc + first;
    for (size_t j = 0; j < count; ++j) {
      float v = alpha * sums[j][i];
      if (beta != 0.0f) v += beta * row[j];
      if (ep) {
        float add = ep->bias_col ? ep->bias_col[first + j] : 0.0f;
        if (ep->bias_row) add += ep->bias_row[i];
        v += add;
        if (ep->residual) v += ep->residual[i * ep->ldr + first + j];
        v = v < ep->lo ? ep->lo : v > ep->hi ? ep->hi : v;  // NaN stays NaN
        if (ep->hardswish) v *= std::min(std::max(v * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
      }
      row[j] = v;
    }
  }
}

// Requests the tile's C lines for writing before its K loop: the tile is stored (and read, when
// beta != 0) only after it, and on a wide map its 14 rows are a C row apart, too many streams for
// the hardware prefetcher, so each line would otherwise be a demand miss at the store. Short K
// loops end before such a request is served, so the lines of the tile two on along C's rows
// (the drivers' order) are requested too.
inline void prefetch_c_tile(float* c, size_t ldc, size_t rows, size_t cols) {
  for (size_t i = 0; i < rows; ++i) {
    __builtin_prefetch(c + i * ldc, 1, 3);
    __builtin_prefetch(c + i * ldc + cols - 1, 1, 3);
    __builtin_prefetch(c + i * ldc + 64, 1, 3);
    __builtin_prefetch(c + i * ldc + 80, 1, 3);
  }
}

// Columns [0, cols) of the tile as one or two masked vectors of 16 per row.
template <class B>
void vector_part(size_t rows, size_t cols, size_t kc, const float* a, B b, float* c, size_t ldc,
                 float alpha, float beta, const F32GemmTileEpilogue* ep) {
  prefetch_c_tile(c, ldc, rows, cols);
  if (rows == kMr && cols == 32) {  // a whole tile: no masks in the K loop
    full_tile_call(kc, a, b, c, ldc, alpha, beta, ep);
    return;
  }
  // Columns 0..15 and 16..31 that exist in C: every load and store is masked to them.
  const __mmask16 m0 = first_lanes(static_cast<int64_t>(cols));
  const __mmask16 m1 = first_lanes(static_cast<int64_t>(cols) - 16);
  (cols <= 16 ? kRowsOf<B, 1> : kRowsOf<B, 2>)[rows - 1](kc, a, b, m0, m1, c, ldc, alpha, beta, ep);
}

// Any rows <= 14 and columns <= 32 of a tile. The columns past the last whole vector cost
// `rest` FMAs per k as columns and `rows` as a masked vector: a 49-pixel map's last tile (17
// columns) is a vector and a column, not two vectors, a 196-pixel map's (4 columns) four
// columns.
template <class B>
void partial_tile(size_t rows, size_t cols, size_t kc, const float* a, B b, float* c, size_t ldc,
                  float alpha, float beta, const F32GemmTileEpilogue* ep) {
  size_t rest = cols % 16;
  if (rest >= rows) rest = 0;
  const size_t vector_cols = cols - rest;
  if (vector_cols > 0) vector_part(rows, vector_cols, kc, a, b, c, ldc, alpha, beta, ep);
  if (rest > 0) column_part(rows, vector_cols, rest, kc, a, b, c, ldc, alpha, beta, ep);
}

}  // namespace

void f32_gemm_partial_ukernel_14x32__avx512(size_t rows, size_t cols, size_t kc, const float* a,
                                            const float* b, size_t ldb, float* c, size_t ldc,
                                            float alpha, float beta,
                                            const F32GemmTileEpilogue* ep) {
  partial_tile(rows, cols, kc, a, StridedRows{b, ldb}, c, ldc, alpha, beta, ep);
}

void f32_gemm_indirect_ukernel_14x32__avx512(size_t rows, size_t cols, size_t kc, const float* a,
                                             const float* const* b_rows, size_t b_offset, float* c,
                                             size_t ldc, float alpha, float beta,
                                             const F32GemmTileEpilogue* ep) {
  partial_tile(rows, cols, kc, a, IndirectRows{b_rows, b_offset}, c, ldc, alpha, beta, ep);
}

void f32_gemm_ukernel_14x32__avx512(size_t kc, const float* a, const float* b, float* c, size_t ldc,
                                    float alpha, float beta) {
  prefetch_c_tile(c, ldc, kMr, 32);
  full_tile(kc, a, StridedRows{b, 32}, c, ldc, alpha, beta, nullptr);
}

void f32_gemm_fused_ukernel_14x32__avx512(size_t kc, const float* a, const float* b, float* c,
                                          size_t ldc, float alpha, float beta,
                                          const F32GemmTileEpilogue& ep) {
  prefetch_c_tile(c, ldc, kMr, 32);
  full_tile(kc, a, StridedRows{b, 32}, c, ldc, alpha, beta, &ep);
}

}  // namespace peregrine::cpu::avx512
