// Depthwise 2-D conv, channel-blocked: 8 channels of one image per call, AVX2 + FMA (contract:
// ukernels/f32_dwconv2d_ukernels.h).
//
// Why: the per-plane kernel (f32-dwconv2d-chw-avx2.cc) vectorizes along W, so a 7- or 14-wide row
// is one or two vectors with masked edges, a stride-2 row needs even / odd shuffles, and every row
// of every plane pays its own fill and bookkeeping. Here one vector holds one pixel of 8 channels
// (NCHWc8, inside the kernel only), so the work per vector does not depend on the width or stride.
//
// Algorithm, for output rows [oh_begin, oh_end) of the 8 planes:
//   1. Weights -> tap-major (KH * KW, 8), bias -> (8), once per call.
//   2. Tile: padded input row r (input row r - pad_t) lives in ring slot r % tile_rows as tile_w
//      pixels of 8 floats: zeros for the left padding, the row transposed 8 columns at a time (8
//      row loads, an 8x8 register transpose, 8 aligned stores; the last partial block by masked
//      loads, whose zero lanes become zero pixels right of the row), then zeros. Rows above / below
//      the input are one shared zero row. Output rows walk down, so each input row a call needs is
//      transposed once (tile_rows = the rows one output row reads).
//   3. Output row oh, pixel ow = bias + sum over taps (ki, kj) of w(ki, kj) * tile[oh * sh + ki *
//      dh][ow * sw + kj * dw]: one aligned load and one FMA per tap, no edge test, any stride or
//      dilation. 4 pixels per step (4 independent FMA chains); 3x3 is unrolled with the 9 weight
//      vectors in registers, other sizes loop over the taps. The pixels go to a pixel-major buffer
//      after the (< 8) pixels left over from the previous row.
//   4. Each complete block of 8 buffered pixels is transposed back into 8 channel vectors of 8
//      consecutive pixels of the flattened output planes (a block may span two rows, so a 7-wide
//      plane still stores whole vectors), the residual added, clamped, stored unmasked; the
//      leftover pixels move to the buffer's front. Only a call's last block is partial (4 / 2 / 1
//      float stores: masked stores are slow on AMD). The epilogue (activations that are not a
//      clamp) then runs over the (8, n) pixels just stored, while they are in L1.
#include <immintrin.h>

#include "backends/cpu/ukernels/f32_dwconv2d_ukernels.h"
#include "backends/cpu/ukernels/f32_vmask_avx2.h"

namespace peregrine::cpu::avx2 {

namespace {

constexpr int64_t kStep = kDwConv2dC8PixelStep;  // 4: the unrolled pixels below assume it
static_assert(kStep == 4);

// In-register transpose of the 8x8 block r (r[i] = row i): afterwards r[j] holds column j.
inline void transpose8x8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  // Per 128-bit lane, u0 = rows 0..3 of columns 0 | 4, u1 = 1 | 5, u2 = 2 | 6, u3 = 3 | 7; u4..u7
  // the same for rows 4..7.
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// Tile row (tile_w pixels of 8 floats, 32-byte aligned) of the input row `in` of plane 0 (plane c
// at in + c * in_plane); layout in the file comment.
void fill_tile_row(const float *in, int64_t in_plane, int64_t in_w, int64_t pad_l, int64_t tile_w,
                   float *dst) {
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t x = 0; x < pad_l; ++x) _mm256_store_ps(dst + x * 8, zero);
  float *d = dst + pad_l * 8;
  __m256 r[8];
  int64_t iw = 0;
  for (; iw + 8 <= in_w; iw += 8, d += 64) {
    for (int c = 0; c < 8; ++c) r[c] = _mm256_loadu_ps(in + c * in_plane + iw);
    transpose8x8(r);
    for (int j = 0; j < 8; ++j) _mm256_store_ps(d + j * 8, r[j]);
  }
  if (iw < in_w) {  // masked loads read nothing past the row; their zero lanes pad it
    const __m256i mask = tail_mask(in_w - iw);
    for (int c = 0; c < 8; ++c) r[c] = _mm256_maskload_ps(in + c * in_plane + iw, mask);
    transpose8x8(r);
    for (int j = 0; j < 8; ++j) _mm256_store_ps(d + j * 8, r[j]);
    d += 64;
  }
  for (float *end = dst + tile_w * 8; d < end; d += 8) _mm256_store_ps(d, zero);
}

// The first n (< 8) floats of v to p: 4 / 2 / 1 float stores.
inline void store_partial(float *p, __m256 v, int64_t n) {
  __m128 lo = _mm256_castps256_ps128(v);
  if (n & 4) {
    _mm_storeu_ps(p, lo);
    lo = _mm256_extractf128_ps(v, 1);
    p += 4;
  }
  if (n & 2) {
    _mm_storel_pi(reinterpret_cast<__m64 *>(p), lo);
    lo = _mm_movehl_ps(lo, lo);
    p += 2;
  }
  if (n & 1) _mm_store_ss(p, lo);
}

// The 8 buffered pixels at `buf` (pixel-major, 8 x 8) back to the 8 planes at out (plane c at out
// + c * plane), residual (same layout) added, clamped; only the first n pixels are stored (n <= 8).
inline void store_block(const float *buf, const float *res, float *out, int64_t plane, int64_t n,
                        __m256 vmin, __m256 vmax) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_load_ps(buf + i * 8);
  transpose8x8(r);  // r[c]: channel c, 8 consecutive pixels
  if (n == 8) {
    for (int c = 0; c < 8; ++c) {
      __m256 v = r[c];
      if (res) v = _mm256_add_ps(v, _mm256_loadu_ps(res + c * plane));
      _mm256_storeu_ps(out + c * plane, clamp(v, vmin, vmax));
    }
    return;
  }
  const __m256i mask = tail_mask(n);
  for (int c = 0; c < 8; ++c) {
    __m256 v = r[c];
    if (res) v = _mm256_add_ps(v, _mm256_maskload_ps(res + c * plane, mask));
    store_partial(out + c * plane, clamp(v, vmin, vmax), n);
  }
}

// One output row of 3x3 taps into buf (pixel ow at buf + 8 ow), in steps of 4 pixels (the last
// step may write up to 3 pixels past out_w). rows[ki]: the tile row of kernel row ki; ps: floats
// between the tile pixels of adjacent output pixels (8 stride_w); od: between adjacent taps of a
// row (8 dil_w).
inline void row_3x3(const float *const *rows, const float *wt, __m256 vbias, int64_t out_w,
                    int64_t ps, int64_t od, float *buf) {
  const __m256 w00 = _mm256_load_ps(wt + 0), w01 = _mm256_load_ps(wt + 8);
  const __m256 w02 = _mm256_load_ps(wt + 16), w10 = _mm256_load_ps(wt + 24);
  const __m256 w11 = _mm256_load_ps(wt + 32), w12 = _mm256_load_ps(wt + 40);
  const __m256 w20 = _mm256_load_ps(wt + 48), w21 = _mm256_load_ps(wt + 56);
  const __m256 w22 = _mm256_load_ps(wt + 64);
  const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2];
  const int64_t od2 = 2 * od;
  for (int64_t ow = 0; ow < out_w;
       ow += kStep, r0 += kStep * ps, r1 += kStep * ps, r2 += kStep * ps, buf += kStep * 8) {
    __m256 a0 = vbias, a1 = vbias, a2 = vbias, a3 = vbias;
    auto tap = [&](__m256 w, const float *p) {
      a0 = _mm256_fmadd_ps(w, _mm256_load_ps(p), a0);
      a1 = _mm256_fmadd_ps(w, _mm256_load_ps(p + ps), a1);
      a2 = _mm256_fmadd_ps(w, _mm256_load_ps(p + 2 * ps), a2);
      a3 = _mm256_fmadd_ps(w, _mm256_load_ps(p + 3 * ps), a3);
    };
    tap(w00, r0);
    tap(w01, r0 + od);
    tap(w02, r0 + od2);
    tap(w10, r1);
    tap(w11, r1 + od);
    tap(w12, r1 + od2);
    tap(w20, r2);
    tap(w21, r2 + od);
    tap(w22, r2 + od2);
    _mm256_store_ps(buf, a0);
    _mm256_store_ps(buf + 8, a1);
    _mm256_store_ps(buf + 16, a2);
    _mm256_store_ps(buf + 24, a3);
  }
}

// One output row of any KH x KW through a tap loop (same contract as row_3x3).
inline void row_any(const float *const *rows, const float *wt, __m256 vbias, int64_t kh, int64_t kw,
                    int64_t out_w, int64_t ps, int64_t od, float *buf) {
  for (int64_t ow = 0; ow < out_w; ow += kStep, buf += kStep * 8) {
    __m256 a0 = vbias, a1 = vbias, a2 = vbias, a3 = vbias;
    const float *w = wt;
    for (int64_t ki = 0; ki < kh; ++ki) {
      const float *p = rows[ki] + ow * ps;
      for (int64_t kj = 0; kj < kw; ++kj, w += 8, p += od) {
        const __m256 wv = _mm256_load_ps(w);
        a0 = _mm256_fmadd_ps(wv, _mm256_load_ps(p), a0);
        a1 = _mm256_fmadd_ps(wv, _mm256_load_ps(p + ps), a1);
        a2 = _mm256_fmadd_ps(wv, _mm256_load_ps(p + 2 * ps), a2);
        a3 = _mm256_fmadd_ps(wv, _mm256_load_ps(p + 3 * ps), a3);
      }
    }
    _mm256_store_ps(buf, a0);
    _mm256_store_ps(buf + 8, a1);
    _mm256_store_ps(buf + 16, a2);
    _mm256_store_ps(buf + 24, a3);
  }
}

}  // namespace

void f32_dwconv2d_c8__avx2(const DwConv2dGeometry &g, const DwConv2dC8Block &b, float *scratch) {
  const int64_t taps = g.kh * g.kw;
  const int64_t tile_w = dwconv2d_c8_tile_w(g), row_floats = tile_w * 8;
  const int64_t ring = dwconv2d_c8_tile_rows(g);
  // Scratch: wt (taps, 8) | bias (8) | zero row | ring of tile rows | pixel buffer.
  float *wt = scratch;
  float *bias = wt + taps * 8;
  float *zero_row = bias + 8;
  float *tile = zero_row + row_floats;
  float *buf = tile + ring * row_floats;
  for (int64_t c = 0; c < 8; ++c) {
    for (int64_t t = 0; t < taps; ++t) wt[t * 8 + c] = b.weights[c * taps + t];
    bias[c] = b.bias ? b.bias[c] : 0.0f;
  }
  const __m256 vbias = _mm256_load_ps(bias);
  const __m256 vmin = _mm256_set1_ps(b.out_min), vmax = _mm256_set1_ps(b.out_max);
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t i = 0; i < row_floats; i += 8) _mm256_store_ps(zero_row + i, zero);
  // The last partial block's transpose also reads buffer pixels past the valid ones (and drops
  // them): keep its first 8 pixels finite.
  for (int64_t i = 0; i < 64; i += 8) _mm256_store_ps(buf + i, zero);

  int64_t tags[kDwConv2dC8MaxTileRows];  // the padded input row each ring slot holds
  std::fill(tags, tags + ring, int64_t{-1});
  const int64_t in_plane = g.in_h * g.in_w, plane = g.out_h * g.out_w;
  const int64_t ps = g.stride_w * 8, od = g.dil_w * 8;
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
        fill_tile_row(b.input + ih * g.in_w, in_plane, g.in_w, g.pad_l, tile_w, dst);
        tags[slot] = r;
      }
      rows[ki] = dst;
    }
    float *row_buf = buf + lead * 8;
    if (is_3x3) {
      row_3x3(rows, wt, vbias, g.out_w, ps, od, row_buf);
    } else {
      row_any(rows, wt, vbias, g.kh, g.kw, g.out_w, ps, od, row_buf);
    }
    const int64_t avail = lead + g.out_w;
    int64_t i = 0;
    for (; i + 8 <= avail; i += 8)
      store_block(buf + i * 8, b.residual ? b.residual + q + i : nullptr, b.output + q + i, plane,
                  8, vmin, vmax);
    if (b.epilogue && i > 0)
      b.epilogue(b.output + q, static_cast<size_t>(plane), 8, static_cast<size_t>(i), 0, 0,
                 *b.epilogue_params);
    lead = avail - i;
    if (i > 0)  // the leftover pixels to the front (lead < 8 <= i: no overlap)
      for (int64_t j = 0; j < lead; ++j)
        _mm256_store_ps(buf + j * 8, _mm256_load_ps(buf + (i + j) * 8));
    q += i;
  }
  if (lead > 0) {
    store_block(buf, b.residual ? b.residual + q : nullptr, b.output + q, plane, lead, vmin, vmax);
    if (b.epilogue)
      b.epilogue(b.output + q, static_cast<size_t>(plane), 8, static_cast<size_t>(lead), 0, 0,
                 *b.epilogue_params);
  }
}

}  // namespace peregrine::cpu::avx2
