// Depthwise 2-D conv on small stride-1 planes, one vector per output row, AVX-512 (contract:
// ukernels/f32_dwconv2d_ukernels.h, "Row-vector kernel"). Each plane of the block is copied into
// zero-padded rows of 16 floats (input column c at lane c + pad_l); output row y is then one
// vector, whose lane x needs padded columns x .. x + KW - 1 of padded rows y .. y + KH - 1: each
// padded row is loaded once (aligned) per tap row and shifted down by kx lanes in registers for
// tap column kx. The lanes past out_w are computed and not stored.
// The next plane is copied while this one is computed (two padded buffers): loads overlapping
// stores still in flight would wait for them.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backends/cpu/ukernels/avx512_lane_mask.h"
#include "backends/cpu/ukernels/f32_dwconv2d_ukernels.h"

// GCC 12's _mm512_max_ps / _mm512_min_ps pass an _mm512_undefined_ps() pass-through operand
// that -W(maybe-)uninitialized reports once inlined; it is never read (the mask is all ones).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace peregrine::cpu::avx512 {

namespace {

constexpr int64_t kLanes = kDwConv2dRowsLanes;

// Where one call's padded rows come from.
struct PaddedRows {
  int64_t rows;         // padded rows held: the band's output rows + KH - 1
  int64_t first;        // input row of padded row 0 (negative: padding above the plane)
  __mmask16 copy_mask;  // the input columns copied into a padded row (at lane pad_l)
};

// Plane `in` (in_h, in_w) into the padded rows at dst; lanes and rows outside it stay zero.
inline void copy_plane(const DwConv2dGeometry &g, const PaddedRows &p, const float *in,
                       float *dst) {
  if (p.copy_mask == 0) return;
  const int64_t r_begin = std::max<int64_t>(0, -p.first);
  const int64_t r_end = std::min(p.rows, g.in_h - p.first);
  for (int64_t r = r_begin; r < r_end; ++r)
    _mm512_mask_storeu_ps(dst + r * kLanes + g.pad_l, p.copy_mask,
                          _mm512_maskz_loadu_ps(p.copy_mask, in + (p.first + r) * g.in_w));
}

// acc + taps 1 .. KW - 1 of one padded row: lane x of tap kx is lane x + kx of the row.
template <int KW, int KX = 1>
inline __m512 row_taps(__m512 row, const float *w, __m512 acc) {
  if constexpr (KX < KW) {
    const __m512 shifted = _mm512_castsi512_ps(
        _mm512_alignr_epi32(_mm512_setzero_si512(), _mm512_castps_si512(row), KX));
    return row_taps<KW, KX + 1>(row, w, _mm512_fmadd_ps(shifted, _mm512_set1_ps(w[KX]), acc));
  } else {
    return acc;
  }
}

// Output rows computed together: independent FMA chains, so one row's chain of KH * KW
// dependent FMAs does not wait on the FMA latency alone.
constexpr int64_t kRowsPerStep = kDwConv2dRowsPerStep;

// The band's output rows of one plane: out / res point at the band's first row. The last step
// reads up to kRowsPerStep - 1 padded rows past the band's (zero slack), and stores only rows
// of the band.
template <int KW>
void compute_plane(const DwConv2dGeometry &g, int64_t rows_out, const float *padded, const float *w,
                   float bias, const float *res, float *out, __m512 vmin, __m512 vmax) {
  const __mmask16 out_mask = first_lanes(g.out_w);
  for (int64_t y = 0; y < rows_out; y += kRowsPerStep) {
    __m512 acc[kRowsPerStep];
    for (int64_t r = 0; r < kRowsPerStep; ++r) acc[r] = _mm512_set1_ps(bias);
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const float *wr = w + ky * KW;
      const __m512 w0 = _mm512_set1_ps(wr[0]);
#pragma GCC unroll 4
      for (int64_t r = 0; r < kRowsPerStep; ++r) {
        const __m512 row = _mm512_load_ps(padded + (y + r + ky) * kLanes);
        acc[r] = row_taps<KW>(row, wr, _mm512_fmadd_ps(row, w0, acc[r]));
      }
    }
    const int64_t n = std::min(kRowsPerStep, rows_out - y);
    for (int64_t r = 0; r < n; ++r) {
      __m512 v = acc[r];
      if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(out_mask, res + (y + r) * g.out_w));
      // max / min return their second operand when either is NaN: NaN stays NaN.
      v = _mm512_min_ps(vmax, _mm512_max_ps(vmin, v));
      _mm512_mask_storeu_ps(out + (y + r) * g.out_w, out_mask, v);
    }
  }
}

template <int KW>
void rows_block(const DwConv2dGeometry &g, const DwConv2dC8Block &b, float *scratch) {
  const int64_t rows_out = b.oh_end - b.oh_begin;
  if (rows_out <= 0) return;
  const int64_t channels = b.channels > 0 ? b.channels : kLanes;
  PaddedRows p;
  p.rows = rows_out + g.kh - 1;
  p.first = b.oh_begin - g.pad_t;
  p.copy_mask = first_lanes(std::min(g.in_w, kLanes - g.pad_l));
  // The padded rows are loaded aligned: the buffers start on a 64-byte boundary (the scratch
  // has a vector of slack for it).
  float *base = reinterpret_cast<float *>((reinterpret_cast<uintptr_t>(scratch) + 63) &
                                          ~static_cast<uintptr_t>(63));
  const int64_t buffer = dwconv2d_rows_buffer_floats(g, rows_out);
  float *padded[2] = {base, base + buffer};
  std::fill(base, base + 2 * buffer, 0.0f);
  const int64_t in_plane = g.in_h * g.in_w, plane = g.out_h * g.out_w;
  const int64_t out0 = b.oh_begin * g.out_w;
  const __m512 vmin = _mm512_set1_ps(b.out_min), vmax = _mm512_set1_ps(b.out_max);
  copy_plane(g, p, b.input, padded[0]);
  for (int64_t c = 0; c < channels; ++c) {
    if (c + 1 < channels) copy_plane(g, p, b.input + (c + 1) * in_plane, padded[(c + 1) & 1]);
    compute_plane<KW>(g, rows_out, padded[c & 1], b.weights + c * g.kh * KW,
                      b.bias ? b.bias[c] : 0.0f,
                      b.residual ? b.residual + c * plane + out0 : nullptr,
                      b.output + c * plane + out0, vmin, vmax);
  }
  if (b.epilogue)
    b.epilogue(b.output + out0, static_cast<size_t>(plane), static_cast<size_t>(channels),
               static_cast<size_t>(rows_out * g.out_w), 0, 0, *b.epilogue_params);
}

}  // namespace

void f32_dwconv2d_rows__avx512(const DwConv2dGeometry &g, const DwConv2dC8Block &b,
                               float *scratch) {
  switch (g.kw) {  // f32_dwconv2d_rows_supported: KW 1, 3, 5 or 7
    case 1:
      rows_block<1>(g, b, scratch);
      break;
    case 3:
      rows_block<3>(g, b, scratch);
      break;
    case 5:
      rows_block<5>(g, b, scratch);
      break;
    case 7:
      rows_block<7>(g, b, scratch);
      break;
    default:
      break;
  }
}

}  // namespace peregrine::cpu::avx512
