// Window pooling over whole planes, AVX-512: the planes are one flat array, 16 positions per
// vector whatever the row width, so a 7x7 or 14x14 map costs no per-row calls or row tails.
// Each lane carries its row and column; a tap's lanes whose input falls outside the plane
// are masked off (the masked load does not touch them), which also keeps every load within
// the lane's own plane. Contract: ukernels/f32_vector_ukernels.h.
#include <immintrin.h>

#include <algorithm>
#include <limits>

#include "backends/cpu/ukernels/avx512_lane_mask.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"

namespace peregrine::cpu::avx512 {

namespace {

// Lanes whose coordinate + offset lies in [0, size): one unsigned compare covers both ends.
inline __mmask16 inside(__m512i coord, int64_t offset, size_t size) {
  const __m512i shifted = _mm512_add_epi32(coord, _mm512_set1_epi32(static_cast<int>(offset)));
  return _mm512_cmplt_epu32_mask(shifted, _mm512_set1_epi32(static_cast<int>(size)));
}

// Row and column of each lane of a vector of 16 consecutive positions of (rows, cols) planes,
// advanced 16 positions at a time: columns carry into rows, rows wrap at the plane (several
// times per step on a row shorter than 16).
struct LaneCoords {
  __m512i row, col;
  __m512i step_rows, step_cols, width, height;
  LaneCoords(size_t rows, size_t cols) {
    alignas(64) int32_t r0[16], c0[16];
    for (size_t l = 0; l < 16; ++l) {
      c0[l] = static_cast<int32_t>(l % cols);
      r0[l] = static_cast<int32_t>((l / cols) % rows);
    }
    row = _mm512_load_si512(r0);
    col = _mm512_load_si512(c0);
    step_rows = _mm512_set1_epi32(static_cast<int>(16 / cols));
    step_cols = _mm512_set1_epi32(static_cast<int>(16 % cols));
    width = _mm512_set1_epi32(static_cast<int>(cols));
    height = _mm512_set1_epi32(static_cast<int>(rows));
  }
  // kRows false: the columns only (a horizontal pass does not read the rows).
  template <bool kRows>
  void advance() {
    col = _mm512_add_epi32(col, step_cols);
    const __mmask16 carry = _mm512_cmpge_epi32_mask(col, width);
    col = _mm512_mask_sub_epi32(col, carry, col, width);
    if constexpr (!kRows) return;
    row = _mm512_add_epi32(row, step_rows);
    row = _mm512_mask_add_epi32(row, carry, row, _mm512_set1_epi32(1));
    for (__mmask16 wrap = _mm512_cmpge_epi32_mask(row, height); wrap != 0;
         wrap = _mm512_cmpge_epi32_mask(row, height))
      row = _mm512_mask_sub_epi32(row, wrap, row, height);
  }
};

// One separable pass over n positions: out[i] = max / sum over t < taps of the input t *
// dilation - pad rows (kRows) or columns away, each tap kept only on the lanes whose row /
// column it leaves inside the plane. K > 0: the tap count at compile time (unrolled, masks in
// registers; the runtime loop costs more instructions than the taps); 0: at run time.
template <bool kMax, bool kRows, size_t K>
void window_pass(const float* in, size_t n, size_t rows, size_t cols, size_t taps, size_t dilation,
                 size_t pad, float* out) {
  if constexpr (K > 0) taps = K;
  LaneCoords lanes(rows, cols);
  const size_t size = kRows ? rows : cols;
  const int64_t unit = kRows ? static_cast<int64_t>(cols) : 1;  // floats per coordinate step
  const __m512 identity = _mm512_set1_ps(kMax ? -std::numeric_limits<float>::infinity() : 0.0f);
  // The vector at position i, its lanes limited to `live` (all 16 but in the last vector).
  auto vector = [&](size_t i, __mmask16 live) {
    const __m512i coord = kRows ? lanes.row : lanes.col;
    __m512 acc = identity;
#pragma GCC unroll 16
    for (size_t t = 0; t < taps; ++t) {
      const int64_t d = static_cast<int64_t>(t * dilation) - static_cast<int64_t>(pad);
      const __mmask16 m = live & inside(coord, d, size);
      const __m512 v = _mm512_maskz_loadu_ps(m, in + static_cast<int64_t>(i) + d * unit);
      acc = kMax ? _mm512_mask_max_ps(acc, m, acc, v) : _mm512_add_ps(acc, v);
    }
    _mm512_mask_storeu_ps(out + i, live, acc);
    lanes.template advance<kRows>();
  };
  size_t i = 0;
  for (; i + 16 <= n; i += 16) vector(i, static_cast<__mmask16>(0xFFFF));
  if (i < n) vector(i, first_lanes(n - i));
}

using PassFn = void (*)(const float*, size_t, size_t, size_t, size_t, size_t, size_t, float*);

// The pass for `taps` taps: unrolled for 1 to 5 (the pools CNNs use), else at run time.
template <bool kMax, bool kRows>
PassFn pass_for(size_t taps) {
  constexpr PassFn kUnrolled[] = {window_pass<kMax, kRows, 0>, window_pass<kMax, kRows, 1>,
                                  window_pass<kMax, kRows, 2>, window_pass<kMax, kRows, 3>,
                                  window_pass<kMax, kRows, 4>, window_pass<kMax, kRows, 5>};
  return taps <= 5 ? kUnrolled[taps] : kUnrolled[0];
}

}  // namespace

void f32_window_planes__avx512(const float* x, size_t planes, size_t in_h, size_t in_w, size_t kh,
                               size_t kw, size_t dh, size_t dw, size_t pad_t, size_t pad_l,
                               float* s, bool max, float* scratch) {
  // Separable: the column of KH rows into scratch, then KW of those along the row into s.
  const size_t n = planes * in_h * in_w;
  (max ? pass_for<true, true>(kh) : pass_for<false, true>(kh))(x, n, in_h, in_w, kh, dh, pad_t,
                                                               scratch);
  (max ? pass_for<true, false>(kw) : pass_for<false, false>(kw))(scratch, n, in_h, in_w, kw, dw,
                                                                 pad_l, s);
}

}  // namespace peregrine::cpu::avx512
