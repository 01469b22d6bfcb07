// The channel-blocked depthwise kernel (contract: ukernels/f32_dwconv2d_ukernels.h), written
// once over a vector type: each including file (ukernels/f32-dwconv2d-c<lanes>-<isa>.cc, built
// with its ISA's flags) supplies `V` with
//   Reg, kLanes (channels per call = floats per Reg), zero(), loadu(p), storeu(p, v),
//   fmadd(a, b, c), set1(x),
//   fill_tile_row(in, in_plane, in_w, pad_l, tile_w, channels, dst): one zero-padded input row of
//     the block's planes as tile_w pixels of kLanes floats (lanes past `channels` zero),
//   store_block(buf, res, out, plane, n, channels, vmin, vmax): kLanes buffered pixels back to
//     the planes (residual added, clamped), only the first n pixels stored,
// and gets its own internal-linkage copy. The algorithm: ukernels/f32-dwconv2d-c8-avx2.cc.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "backends/cpu/ukernels/f32_dwconv2d_ukernels.h"

namespace peregrine::cpu {
namespace {

constexpr int64_t kDwStep = kDwConv2dC8PixelStep;  // 4: the unrolled pixels below assume it
static_assert(kDwStep == 4);

// One output row of 3x3 taps into buf (pixel ow at buf + kLanes ow), in steps of 4 pixels (the
// last step may write up to 3 pixels past out_w). rows[ki]: the tile row of kernel row ki; ps:
// floats between the tile pixels of adjacent output pixels (kLanes stride_w); od: between
// adjacent taps of a row (kLanes dil_w).
template <typename V>
inline void dw_row_3x3(const float *const *rows, const float *wt, typename V::Reg vbias,
                       int64_t out_w, int64_t ps, int64_t od, float *buf) {
  using Reg = typename V::Reg;
  constexpr int64_t L = V::kLanes;
  Reg w[9];
  for (int t = 0; t < 9; ++t) w[t] = V::loadu(wt + t * L);
  const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2];
  const int64_t od2 = 2 * od;
  for (int64_t ow = 0; ow < out_w; ow += kDwStep, r0 += kDwStep * ps, r1 += kDwStep * ps,
               r2 += kDwStep * ps, buf += kDwStep * L) {
    Reg a0 = vbias, a1 = vbias, a2 = vbias, a3 = vbias;
    auto tap = [&](Reg wv, const float *p) {
      a0 = V::fmadd(wv, V::loadu(p), a0);
      a1 = V::fmadd(wv, V::loadu(p + ps), a1);
      a2 = V::fmadd(wv, V::loadu(p + 2 * ps), a2);
      a3 = V::fmadd(wv, V::loadu(p + 3 * ps), a3);
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
    V::storeu(buf, a0);
    V::storeu(buf + L, a1);
    V::storeu(buf + 2 * L, a2);
    V::storeu(buf + 3 * L, a3);
  }
}

// One output row of any KH x KW through a tap loop (same contract as dw_row_3x3).
template <typename V>
inline void dw_row_any(const float *const *rows, const float *wt, typename V::Reg vbias, int64_t kh,
                       int64_t kw, int64_t out_w, int64_t ps, int64_t od, float *buf) {
  using Reg = typename V::Reg;
  constexpr int64_t L = V::kLanes;
  for (int64_t ow = 0; ow < out_w; ow += kDwStep, buf += kDwStep * L) {
    Reg a0 = vbias, a1 = vbias, a2 = vbias, a3 = vbias;
    const float *w = wt;
    for (int64_t ki = 0; ki < kh; ++ki) {
      const float *p = rows[ki] + ow * ps;
      for (int64_t kj = 0; kj < kw; ++kj, w += L, p += od) {
        const Reg wv = V::loadu(w);
        a0 = V::fmadd(wv, V::loadu(p), a0);
        a1 = V::fmadd(wv, V::loadu(p + ps), a1);
        a2 = V::fmadd(wv, V::loadu(p + 2 * ps), a2);
        a3 = V::fmadd(wv, V::loadu(p + 3 * ps), a3);
      }
    }
    V::storeu(buf, a0);
    V::storeu(buf + L, a1);
    V::storeu(buf + 2 * L, a2);
    V::storeu(buf + 3 * L, a3);
  }
}

// One output row of KH x KW taps, stride SW, no column dilation, register-blocked along the
// row: per kernel row, the 3 SW + KW input pixels the step's 4 outputs read are loaded once and
// each tap's weight once, so a step of a 5x5 conv loads 13 vectors per kernel row for 20 FMAs
// where a load per tap and pixel would take 25 (the 5x5 layers of MnasNet and EfficientNet,
// bench/compare.py, were bound by those loads). Same contract as dw_row_3x3.
template <typename V, int KW, int SW>
inline void dw_row_blocked(const float *const *rows, const float *wt, typename V::Reg vbias,
                           int64_t kh, int64_t out_w, float *buf) {
  using Reg = typename V::Reg;
  constexpr int64_t L = V::kLanes;
  constexpr int kIn = (kDwStep - 1) * SW + KW;
  for (int64_t ow = 0; ow < out_w; ow += kDwStep, buf += kDwStep * L) {
    Reg acc[kDwStep] = {vbias, vbias, vbias, vbias};
    const float *w = wt;
    for (int64_t ki = 0; ki < kh; ++ki, w += KW * L) {
      const float *p = rows[ki] + ow * SW * L;
      Reg in[kIn];
#pragma GCC unroll 32
      for (int j = 0; j < kIn; ++j) {
        in[j] = V::loadu(p + j * L);
        // Opaque to the compiler, which would otherwise fold each use back into an FMA's
        // memory operand: the loads this row is blocked to save.
        asm("" : "+v"(in[j]));
      }
#pragma GCC unroll 16
      for (int kj = 0; kj < KW; ++kj) {
        const Reg wv = V::loadu(w + kj * L);
#pragma GCC unroll 4
        for (int px = 0; px < kDwStep; ++px) acc[px] = V::fmadd(wv, in[px * SW + kj], acc[px]);
      }
    }
#pragma GCC unroll 4
    for (int px = 0; px < kDwStep; ++px) V::storeu(buf + px * L, acc[px]);
  }
}

// dw_row_blocked for 3x3 with the nine weights kept in registers as well: 4 accumulators, 9
// weights and 3 SW + 3 inputs fit the 32 registers of AVX-512 (not AVX2's 16), and a step then
// loads only its inputs (MobileNet-family 3x3 layers, bench/compare.py).
template <typename V, int SW>
inline void dw_row_3x3_blocked(const float *const *rows, const float *wt, typename V::Reg vbias,
                               int64_t /*kh*/, int64_t out_w, float *buf) {
  using Reg = typename V::Reg;
  constexpr int64_t L = V::kLanes;
  constexpr int kIn = (kDwStep - 1) * SW + 3;
  Reg w[9];
#pragma GCC unroll 9
  for (int t = 0; t < 9; ++t) w[t] = V::loadu(wt + t * L);
  for (int64_t ow = 0; ow < out_w; ow += kDwStep, buf += kDwStep * L) {
    Reg acc[kDwStep] = {vbias, vbias, vbias, vbias};
#pragma GCC unroll 3
    for (int ki = 0; ki < 3; ++ki) {
      const float *p = rows[ki] + ow * SW * L;
      Reg in[kIn];
#pragma GCC unroll 16
      for (int j = 0; j < kIn; ++j) {
        in[j] = V::loadu(p + j * L);
        asm("" : "+v"(in[j]));  // as in dw_row_blocked
      }
#pragma GCC unroll 3
      for (int kj = 0; kj < 3; ++kj)
#pragma GCC unroll 4
        for (int px = 0; px < kDwStep; ++px)
          acc[px] = V::fmadd(w[ki * 3 + kj], in[px * SW + kj], acc[px]);
    }
#pragma GCC unroll 4
    for (int px = 0; px < kDwStep; ++px) V::storeu(buf + px * L, acc[px]);
  }
}

// The register-blocked row for this kernel width and stride, or nullptr (dilated columns,
// other widths): dw_row_3x3 or dw_row_any then.
template <typename V>
using DwRowFn = void (*)(const float *const *, const float *, typename V::Reg, int64_t, int64_t,
                         float *);
template <typename V>
DwRowFn<V> blocked_row_for(const DwConv2dGeometry &g) {
  if (g.dil_w != 1) return nullptr;
  if (V::kLanes == 16 && g.kh == 3 && g.kw == 3 && g.stride_w == 1) return dw_row_3x3_blocked<V, 1>;
  if (V::kLanes == 16 && g.kh == 3 && g.kw == 3 && g.stride_w == 2) return dw_row_3x3_blocked<V, 2>;
  if (g.kw == 5 && g.stride_w == 1) return dw_row_blocked<V, 5, 1>;
  if (g.kw == 5 && g.stride_w == 2) return dw_row_blocked<V, 5, 2>;
  if (g.kw == 7 && g.stride_w == 1) return dw_row_blocked<V, 7, 1>;
  if (g.kw == 7 && g.stride_w == 2) return dw_row_blocked<V, 7, 2>;
  return nullptr;
}

template <typename V>
void dwconv2d_channel_block(const DwConv2dGeometry &g, const DwConv2dC8Block &b, float *scratch) {
  using Reg = typename V::Reg;
  constexpr int64_t L = V::kLanes;
  const int64_t channels = b.channels > 0 ? b.channels : L;
  const int64_t taps = g.kh * g.kw;
  const int64_t tile_w = dwconv2d_c8_tile_w(g, L), row_floats = tile_w * L;
  const int64_t ring = dwconv2d_c8_tile_rows(g);
  // Scratch: wt (taps rounded up to L, L) | bias (L) | zero row | ring of tile rows | pixel buffer.
  float *wt = scratch;
  float *bias = wt + (taps + L - 1) / L * L * L;
  float *zero_row = bias + L;
  float *tile = zero_row + row_floats;
  float *buf = tile + ring * row_floats;
  // The weights (channels, taps) are `channels` planes of one row of `taps` pixels: the tile
  // row transpose makes them tap-major, L channels per tap.
  V::fill_tile_row(b.weights, taps, taps, 0, (taps + L - 1) / L * L, channels, wt);
  for (int64_t c = 0; c < L; ++c) bias[c] = b.bias && c < channels ? b.bias[c] : 0.0f;
  const Reg vbias = V::loadu(bias);
  const Reg vmin = V::set1(b.out_min), vmax = V::set1(b.out_max);
  // The epilogue is an activation alone (no bias, no residual: the contract), elementwise; it
  // commutes with the clamp only when the clamp is none.
  const bool activation_first = b.epilogue && !b.residual &&
                                b.out_min == -std::numeric_limits<float>::infinity() &&
                                b.out_max == std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < row_floats; i += L) V::storeu(zero_row + i, V::zero());
  // The last partial block's transpose also reads buffer pixels past the valid ones (and drops
  // them): keep its first L pixels finite.
  for (int64_t i = 0; i < L * L; i += L) V::storeu(buf + i, V::zero());

  int64_t tags[kDwConv2dC8MaxTileRows];  // the padded input row each ring slot holds
  std::fill(tags, tags + ring, int64_t{-1});
  const int64_t in_plane = g.in_h * g.in_w, plane = g.out_h * g.out_w;
  const int64_t ps = g.stride_w * L, od = g.dil_w * L;
  const bool is_3x3 = g.kh == 3 && g.kw == 3;
  const DwRowFn<V> blocked_row = blocked_row_for<V>(g);
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
        V::fill_tile_row(b.input + ih * g.in_w, in_plane, g.in_w, g.pad_l, tile_w, channels, dst);
        tags[slot] = r;
      }
      rows[ki] = dst;
    }
    float *row_buf = buf + lead * L;
    if (blocked_row) {
      blocked_row(rows, wt, vbias, g.kh, g.out_w, row_buf);
    } else if (is_3x3) {
      dw_row_3x3<V>(rows, wt, vbias, g.out_w, ps, od, row_buf);
    } else {
      dw_row_any<V>(rows, wt, vbias, g.kh, g.kw, g.out_w, ps, od, row_buf);
    }
    const int64_t avail = lead + g.out_w;
    // Without a residual the activation may run before the transpose back, on the buffer's
    // pixels as one contiguous row; after it, each plane's run of pixels is a short row of its
    // own, with a masked tail per plane.
    if (activation_first && avail >= L)
      b.epilogue(buf, static_cast<size_t>(avail / L * L * L), 1,
                 static_cast<size_t>(avail / L * L * L), 0, 0, *b.epilogue_params);
    int64_t i = 0;
    for (; i + L <= avail; i += L)
      V::store_block(buf + i * L, b.residual ? b.residual + q + i : nullptr, b.output + q + i,
                     plane, L, channels, vmin, vmax);
    if (b.epilogue && !activation_first && i > 0)
      b.epilogue(b.output + q, static_cast<size_t>(plane), static_cast<size_t>(channels),
                 static_cast<size_t>(i), 0, 0, *b.epilogue_params);
    lead = avail - i;
    if (i > 0)  // the leftover pixels to the front (lead < L <= i: no overlap)
      for (int64_t j = 0; j < lead; ++j) V::storeu(buf + j * L, V::loadu(buf + (i + j) * L));
    q += i;
  }
  if (lead > 0) {
    if (activation_first)
      b.epilogue(buf, static_cast<size_t>(lead * L), 1, static_cast<size_t>(lead * L), 0, 0,
                 *b.epilogue_params);
    V::store_block(buf, b.residual ? b.residual + q : nullptr, b.output + q, plane, lead, channels,
                   vmin, vmax);
    if (b.epilogue && !activation_first)
      b.epilogue(b.output + q, static_cast<size_t>(plane), static_cast<size_t>(channels),
                 static_cast<size_t>(lead), 0, 0, *b.epilogue_params);
  }
}

}  // namespace
}  // namespace peregrine::cpu
