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

// 3x3 / 2 max pooling of one plane (contract: f32_vector_ukernels.h), the AVX2 kernel's
// algorithm with 16 lanes and masked tails: per output row the vertical max of its input rows
// into `row` (-inf around), then the max of the even, odd and next even columns, 16 outputs per
// step from two 32-column permutes. Taken where the AVX2 kernel would end each output row with
// two or more outputs one by one, on planes up to 32 columns (SqueezeNet 1.1's 27 -> 13 pool,
// GoogLeNet's 14 -> 7, single layers in peregrine profile); elsewhere the AVX2 kernel's 8-lane
// steps were as fast or faster (Inception-v3's 17 -> 8 and 35 -> 17).
void f32_max_pool_3x3s2__avx512(const float* x, size_t in_h, size_t in_w, size_t pad_t,
                                size_t pad_l, float* y, size_t out_h, size_t out_w, float* row) {
  constexpr size_t kMaxWidth = 32;
  if (in_w > kMaxWidth || out_w % 8 < 2) {
    avx2::f32_max_pool_3x3s2__avx2(x, in_h, in_w, pad_t, pad_l, y, out_h, out_w, row);
    return;
  }
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512i evens =
      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  // Every vertical row of the plane first, then every horizontal one, for the reason the AVX2
  // kernel gives for narrow planes: rows[oh] at row + oh * len.
  const size_t len = max_pool_3x3s2_scratch_floats(in_w, 1);
  for (size_t i = 0; i < len * out_h; i += 16)
    _mm512_mask_storeu_ps(row + i, first_lanes(static_cast<int64_t>(len * out_h - i)), neg_inf);
  for (size_t oh = 0; oh < out_h; ++oh) {
    const float* rows[3];
    size_t count = 0;
    for (size_t ki = 0; ki < 3; ++ki) {
      const size_t ih = 2 * oh + ki;  // + pad_t offset: ih - pad_t is the input row
      if (ih >= pad_t && ih - pad_t < in_h) rows[count++] = x + (ih - pad_t) * in_w;
    }
    float* v = row + oh * len + pad_l;
    for (size_t i = 0; i < in_w; i += 16) {
      const __mmask16 m = first_lanes(static_cast<int64_t>(in_w - i));
      __m512 acc = _mm512_maskz_loadu_ps(m, rows[0] + i);
      for (size_t r = 1; r < count; ++r)
        acc = _mm512_mask_max_ps(acc, m, acc, _mm512_maskz_loadu_ps(m, rows[r] + i));
      _mm512_mask_storeu_ps(v + i, m, acc);
    }
  }
  for (size_t oh = 0; oh < out_h; ++oh) {
    const float* h = row + oh * len;
    float* out = y + oh * out_w;
    // Reads h[2 j .. 2 j + 33]: within the row (len = in_w + 40 >= 2 out_w + 34).
    for (size_t j = 0; j < out_w; j += 16) {
      const float* p = h + 2 * j;
      const __m512 a = _mm512_loadu_ps(p), b = _mm512_loadu_ps(p + 16);
      const __m512 a2 = _mm512_loadu_ps(p + 2), b2 = _mm512_loadu_ps(p + 18);
      const __m512 even = _mm512_permutex2var_ps(a, evens, b);
      const __m512 odd = _mm512_permutex2var_ps(a, odds, b);
      const __m512 next = _mm512_permutex2var_ps(a2, evens, b2);
      const __m512 m =
          _mm512_mask_max_ps(even, 0xFFFF, _mm512_mask_max_ps(even, 0xFFFF, even, odd), next);
      _mm512_mask_storeu_ps(out + j, first_lanes(static_cast<int64_t>(out_w - j)), m);
    }
  }
}

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
