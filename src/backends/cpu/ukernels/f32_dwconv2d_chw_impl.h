// The ISA-independent part of the NCHW depthwise kernels (ukernels/f32_dwconv2d_ukernels.h): the
// scratch-row layout and the row cache that walks the output rows of one plane. Each including file
// (ukernels/f32-dwconv2d-chw-<isa>.cc, built with its ISA's flags) gets its own internal-linkage
// copy, instantiated with its own row fill and row kernel.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backends/cpu/ukernels/f32_dwconv2d_ukernels.h"

namespace peregrine::cpu {
namespace {

constexpr int64_t kDwConv2dMaxKernel = 16;  // KH and KW bound (the slot and offset arrays)

// Where a scratch row's input lies, the same for every row of a plane (computed once: the divisions
// stay out of the row loop). Phase p (of stride_w) starts at p * pf; its elements [t_lo[p],
// t_hi[p]) are input columns t * s + p - pad_l (inside [0, in_w)) and the rest of [0, valid) is
// zero padding; [valid, pf) is slack a fill may overwrite with whole vectors.
struct DwConv2dRowLayout {
  int64_t pf, valid;
  int64_t t_lo[2], t_hi[2];
};

inline DwConv2dRowLayout dwconv2d_row_layout(const DwConv2dGeometry &g) {
  DwConv2dRowLayout l;
  l.pf = dwconv2d_chw_phase_floats(g);
  l.valid = dwconv2d_chw_phase_valid(g);
  const int64_t s = g.stride_w;
  for (int64_t p = 0; p < s; ++p) {
    l.t_lo[p] = std::min(l.valid, g.pad_l > p ? (g.pad_l - p + s - 1) / s : 0);
    const int64_t last = g.in_w - 1 + g.pad_l - p;  // t * s <= last
    l.t_hi[p] = std::clamp<int64_t>(last < 0 ? 0 : last / s + 1, l.t_lo[p], l.valid);
  }
  return l;
}

// The scratch row of input row `in_row` with plain loops: dst[p * pf + t] = in_row[t * s + p -
// pad_l] for t < valid, 0 outside the row.
inline void dwconv2d_fill_row_scalar(const DwConv2dRowLayout &l, int64_t stride_w, int64_t pad_l,
                                     const float *in_row, float *dst) {
  for (int64_t p = 0; p < stride_w; ++p, dst += l.pf) {
    std::fill(dst, dst + l.t_lo[p], 0.0f);
    const float *src = in_row + l.t_lo[p] * stride_w + p - pad_l;
    for (int64_t t = l.t_lo[p]; t < l.t_hi[p]; ++t, src += stride_w) dst[t] = *src;
    std::fill(dst + l.t_hi[p], dst + l.valid, 0.0f);
  }
}

// Walks the output rows of one plane. For output row oh, rows[ki] is the scratch row of input row
// oh * stride_h - pad_t + ki * dil_h (a zero row when outside the plane), and `compute_row(rows,
// col_off, res_row, out_row)` produces the row; col_off[kj] is tap kj's offset inside a scratch row
// (phase * pf + index). `fill_row(layout, in_row, dst)` writes a scratch row (as
// dwconv2d_fill_row_scalar does; it may also store into the slack). Small planes
// (dwconv2d_chw_whole_plane) have every input row copied first. Otherwise scratch rows live in KH
// tagged slots; a missing row takes the slot with the oldest (smallest) input row among those this
// output row has not claimed yet, so rows shared by consecutive output rows are filled once, and a
// slot in use by the current row is never overwritten.
template <typename FillRow, typename ComputeRow>
inline void dwconv2d_chw_plane(const DwConv2dGeometry &g, const DwConv2dPlane &p, float *scratch,
                               FillRow fill_row, ComputeRow compute_row) {
  const DwConv2dRowLayout layout = dwconv2d_row_layout(g);
  const int64_t slot_floats = g.stride_w * layout.pf;
  const bool whole_plane = dwconv2d_chw_whole_plane(g);
  float *zero_row = scratch + dwconv2d_chw_scratch_rows(g) * slot_floats;
  bool zero_row_ready = false;
  int64_t col_off[kDwConv2dMaxKernel];
  for (int64_t kj = 0; kj < g.kw; ++kj) {
    const int64_t c = kj * g.dil_w;
    col_off[kj] = (c % g.stride_w) * layout.pf + c / g.stride_w;
  }
  const float *rows[kDwConv2dMaxKernel];
  auto finish_row = [&](int64_t oh) {
    float *out_row = p.output + oh * g.out_w;
    compute_row(rows, col_off, p.residual ? p.residual + oh * g.out_w : nullptr, out_row);
    if (p.row_epilogue)
      p.row_epilogue(out_row, static_cast<size_t>(g.out_w), 1, static_cast<size_t>(g.out_w), 0, 0,
                     *p.row_epilogue_params);
  };
  if (whole_plane) {  // scratch row ih holds input row ih
    for (int64_t ih = 0; ih < g.in_h; ++ih)
      fill_row(layout, p.input + ih * g.in_w, scratch + ih * slot_floats);
    std::fill(zero_row, zero_row + slot_floats, 0.0f);
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      int64_t ih = oh * g.stride_h - g.pad_t;
      for (int64_t ki = 0; ki < g.kh; ++ki, ih += g.dil_h)
        rows[ki] = ih < 0 || ih >= g.in_h ? zero_row : scratch + ih * slot_floats;
      finish_row(oh);
    }
    return;
  }
  int64_t tags[kDwConv2dMaxKernel];
  std::fill(tags, tags + g.kh, int64_t{-1});
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    uint32_t claimed = 0;  // slots this output row uses
    int64_t ih = oh * g.stride_h - g.pad_t;
    for (int64_t ki = 0; ki < g.kh; ++ki, ih += g.dil_h) {
      if (ih < 0 || ih >= g.in_h) {
        if (!zero_row_ready) {
          std::fill(zero_row, zero_row + slot_floats, 0.0f);
          zero_row_ready = true;
        }
        rows[ki] = zero_row;
        continue;
      }
      int64_t slot = 0;
      while (slot < g.kh && tags[slot] != ih) ++slot;
      if (slot == g.kh) {  // not cached: the oldest unclaimed slot (one exists:
                           // ki < kh claimed)
        slot = -1;
        for (int64_t s = 0; s < g.kh; ++s)
          if (!(claimed >> s & 1u) && (slot < 0 || tags[s] < tags[slot])) slot = s;
        fill_row(layout, p.input + ih * g.in_w, scratch + slot * slot_floats);
        tags[slot] = ih;
      }
      claimed |= 1u << slot;
      rows[ki] = scratch + slot * slot_floats;
    }
    finish_row(oh);
  }
}

}  // namespace
}  // namespace peregrine::cpu
