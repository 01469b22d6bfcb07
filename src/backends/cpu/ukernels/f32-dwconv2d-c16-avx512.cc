// Depthwise 2-D conv, channel-blocked: up to 16 channels of one image per call, AVX-512 (contract:
// ukernels/f32_dwconv2d_ukernels.h). The algorithm of f32-dwconv2d-c8-avx2.cc with one vector =
// one pixel of 16 channels: each call's fixed work (weights to tap-major, the zero row, the
// ring's first rows) and each tap's load and FMA cover twice the channels, the transposes are
// 16x16, and row ends and a last block of fewer than 16 channels are masked (cheap with AVX-512
// masks, unlike AVX2's masked moves on AMD), so every channel count takes this kernel.
#include <immintrin.h>

#include "backends/cpu/ukernels/f32_dwconv2d_ukernels.h"
#include "backends/cpu/ukernels/f32_transpose_avx512.h"

// GCC 12's _mm512_max_ps / _mm512_min_ps pass an _mm512_undefined_ps() pass-through operand
// that -Wmaybe-uninitialized reports once inlined; it is never read (the mask is all ones).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace peregrine::cpu::avx512 {

namespace {

constexpr int64_t kLanes = 16;
constexpr int64_t kStep = kDwConv2dC8PixelStep;  // 4: the unrolled pixels below assume it
static_assert(kStep == 4);

inline __mmask16 first_lanes(int64_t n) {
  return static_cast<__mmask16>(n >= kLanes ? 0xFFFFu : (1u << n) - 1u);
}

// Tile row (tile_w pixels of 16 floats) of the input row `in` of plane 0 (plane c at in + c *
// in_plane, c < channels; the other lanes are zero).
void fill_tile_row(const float *in, int64_t in_plane, int64_t in_w, int64_t pad_l, int64_t tile_w,
                   int64_t channels, float *dst) {
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t x = 0; x < pad_l; ++x) _mm512_storeu_ps(dst + x * kLanes, zero);
  float *d = dst + pad_l * kLanes;
  __m512 r[16];
  for (int64_t iw = 0; iw < in_w; iw += kLanes, d += kLanes * kLanes) {
    const __mmask16 m = first_lanes(in_w - iw);  // the last block: nothing read past the row
    for (int64_t c = 0; c < kLanes; ++c)
      r[c] = c < channels ? _mm512_maskz_loadu_ps(m, in + c * in_plane + iw) : zero;
    transpose16x16(r);
    for (int j = 0; j < 16; ++j) _mm512_storeu_ps(d + j * kLanes, r[j]);
  }
  for (float *end = dst + tile_w * kLanes; d < end; d += kLanes) _mm512_storeu_ps(d, zero);
}

// The 16 buffered pixels at `buf` (pixel-major, 16 x 16) back to the planes at out (plane c at
// out + c * plane, c < channels), residual (same layout) added, clamped; only the first n pixels
// are stored (n <= 16).
inline void store_block(const float *buf, const float *res, float *out, int64_t plane, int64_t n,
                        int64_t channels, __m512 vmin, __m512 vmax) {
  __m512 r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(buf + i * kLanes);
  transpose16x16(r);  // r[c]: channel c, 16 consecutive pixels
  const __mmask16 m = first_lanes(n);
  for (int64_t c = 0; c < channels; ++c) {
    __m512 v = r[c];
    if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, res + c * plane));
    // max / min return their second operand when either is NaN: NaN stays NaN.
    _mm512_mask_storeu_ps(out + c * plane, m, _mm512_min_ps(vmax, _mm512_max_ps(vmin, v)));
  }
}

// One output row of 3x3 taps into buf (pixel ow at buf + 16 ow), in steps of 4 pixels (the last
// step may write up to 3 pixels past out_w). rows[ki]: the tile row of kernel row ki; ps: floats
// between the tile pixels of adjacent output pixels (16 stride_w); od: between adjacent taps of a
// row (16 dil_w).
inline void row_3x3(const float *const *rows, const float *wt, __m512 vbias, int64_t out_w,
                    int64_t ps, int64_t od, float *buf) {
  __m512 w[9];
  for (int t = 0; t < 9; ++t) w[t] = _mm512_loadu_ps(wt + t * kLanes);
  const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2];
  const int64_t od2 = 2 * od;
  for (int64_t ow = 0; ow < out_w;
       ow += kStep, r0 += kStep * ps, r1 += kStep * ps, r2 += kStep * ps, buf += kStep * kLanes) {
    __m512 a0 = vbias, a1 = vbias, a2 = vbias, a3 = vbias;
    auto tap = [&](__m512 wv, const float *p) {
      a0 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p), a0);
      a1 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p + ps), a1);
      a2 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p + 2 * ps), a2);
      a3 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p + 3 * ps), a3);
    };
    tap(w[0], r0);
    tap(w[1], r0 + od);
    tap(w[2], r0 + od2);
    tap(w[3], r1);
    tap(w[4], r1 + od);
    tap(w[5], r1 + od2);
    tap(w[6], r2);
    tap(w[7], r2 + od);
    tap(w[8], r2 + od2);
    _mm512_storeu_ps(buf, a0);
    _mm512_storeu_ps(buf + kLanes, a1);
    _mm512_storeu_ps(buf + 2 * kLanes, a2);
    _mm512_storeu_ps(buf + 3 * kLanes, a3);
  }
}

// One output row of any KH x KW through a tap loop (same contract as row_3x3).
inline void row_any(const float *const *rows, const float *wt, __m512 vbias, int64_t kh, int64_t kw,
                    int64_t out_w, int64_t ps, int64_t od, float *buf) {
  for (int64_t ow = 0; ow < out_w; ow += kStep, buf += kStep * kLanes) {
    __m512 a0 = vbias, a1 = vbias, a2 = vbias, a3 = vbias;
    const float *w = wt;
    for (int64_t ki = 0; ki < kh; ++ki) {
      const float *p = rows[ki] + ow * ps;
      for (int64_t kj = 0; kj < kw; ++kj, w += kLanes, p += od) {
        const __m512 wv = _mm512_loadu_ps(w);
        a0 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p), a0);
        a1 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p + ps), a1);
        a2 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p + 2 * ps), a2);
        a3 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p + 3 * ps), a3);
      }
    }
    _mm512_storeu_ps(buf, a0);
    _mm512_storeu_ps(buf + kLanes, a1);
    _mm512_storeu_ps(buf + 2 * kLanes, a2);
    _mm512_storeu_ps(buf + 3 * kLanes, a3);
  }
}

}  // namespace

void f32_dwconv2d_c16__avx512(const DwConv2dGeometry &g, const DwConv2dC8Block &b, float *scratch) {
  const int64_t channels = b.channels > 0 ? b.channels : kLanes;
  const int64_t taps = g.kh * g.kw;
  const int64_t tile_w = dwconv2d_c8_tile_w(g, kLanes), row_floats = tile_w * kLanes;
  const int64_t ring = dwconv2d_c8_tile_rows(g);
  // Scratch: wt (taps, 16) | bias (16) | zero row | ring of tile rows | pixel buffer.
  float *wt = scratch;
  float *bias = wt + taps * kLanes;
  float *zero_row = bias + kLanes;
  float *tile = zero_row + row_floats;
  float *buf = tile + ring * row_floats;
  for (int64_t c = 0; c < kLanes; ++c) {
    for (int64_t t = 0; t < taps; ++t)
      wt[t * kLanes + c] = c < channels ? b.weights[c * taps + t] : 0.0f;
    bias[c] = b.bias && c < channels ? b.bias[c] : 0.0f;
  }
  const __m512 vbias = _mm512_loadu_ps(bias);
  const __m512 vmin = _mm512_set1_ps(b.out_min), vmax = _mm512_set1_ps(b.out_max);
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t i = 0; i < row_floats; i += kLanes) _mm512_storeu_ps(zero_row + i, zero);
  // The last partial block's transpose also reads buffer pixels past the valid ones (and drops
  // them): keep its first 16 pixels finite.
  for (int64_t i = 0; i < kLanes * kLanes; i += kLanes) _mm512_storeu_ps(buf + i, zero);

  int64_t tags[kDwConv2dC8MaxTileRows];  // the padded input row each ring slot holds
  std::fill(tags, tags + ring, int64_t{-1});
  const int64_t in_plane = g.in_h * g.in_w, plane = g.out_h * g.out_w;
  const int64_t ps = g.stride_w * kLanes, od = g.dil_w * kLanes;
  const bool is_3x3 = g.kh == 3 && g.kw == 3;
  const float *rows[kDwConv2dC8MaxKernel];
  int64_t q = b.oh_begin * g.out_w;  // flat output pixel of buf's first pixel
  int64_t lead = 0;                  // pixels in buf not stored yet
  for (int64_t oh = b.oh_begin; oh < b.oh_end; ++oh) {
    int64_t r = oh * g.stride_h;  // padded input row of kernel row 0
    for (int64_t ki = 0; ki < g.kh; ++ki, r += g.dil_h) {
      const int64_t ih = r - g.pad_t;
      if (ih < 0 || ih >= g.in_h) {
        rows[ki] = zero_row;
        continue;
      }
      const int64_t slot = r % ring;
      float *dst = tile + slot * row_floats;
      if (tags[slot] != r) {
        fill_tile_row(b.input + ih * g.in_w, in_plane, g.in_w, g.pad_l, tile_w, channels, dst);
        tags[slot] = r;
      }
      rows[ki] = dst;
    }
    float *row_buf = buf + lead * kLanes;
    if (is_3x3) {
      row_3x3(rows, wt, vbias, g.out_w, ps, od, row_buf);
    } else {
      row_any(rows, wt, vbias, g.kh, g.kw, g.out_w, ps, od, row_buf);
    }
    const int64_t avail = lead + g.out_w;
    int64_t i = 0;
    for (; i + kLanes <= avail; i += kLanes)
      store_block(buf + i * kLanes, b.residual ? b.residual + q + i : nullptr, b.output + q + i,
                  plane, kLanes, channels, vmin, vmax);
    if (b.epilogue && i > 0)
      b.epilogue(b.output + q, static_cast<size_t>(plane), static_cast<size_t>(channels),
                 static_cast<size_t>(i), 0, 0, *b.epilogue_params);
    lead = avail - i;
    if (i > 0)  // the leftover pixels to the front (lead < 16 <= i: no overlap)
      for (int64_t j = 0; j < lead; ++j)
        _mm512_storeu_ps(buf + j * kLanes, _mm512_loadu_ps(buf + (i + j) * kLanes));
    q += i;
  }
  if (lead > 0) {
    store_block(buf, b.residual ? b.residual + q : nullptr, b.output + q, plane, lead, channels,
                vmin, vmax);
    if (b.epilogue)
      b.epilogue(b.output + q, static_cast<size_t>(plane), static_cast<size_t>(channels),
                 static_cast<size_t>(lead), 0, 0, *b.epilogue_params);
  }
}

}  // namespace peregrine::cpu::avx512
