// f32 grouped 2-D convolution, direct, on NCHW planes: for groups with few output channels
// (ResNeXt's 4-32, RegNet's 8-24), where a GEMM per group has M = C_out / group rows, far below
// the GEMM tile's, and an im2col panel of only C_in / group * KH * KW rows.
//   avx512 (ukernels/f32-conv2d-grouped-avx512.cc). Other ISA levels have none: their convs keep
//   the GEMM per group.
//
// Algorithm. One call handles one group of one image and a band of output rows:
//   1. fill: the band's input rows of the group's C_in_g channels are copied into scratch,
//      zero-padded on every side and split into stride_w phases (phase p holds padded columns
//      p, p + s, p + 2s, ...), so tap (ki, kj) of output (oh, ow) is element ow + (kj * dil_w) / s
//      of phase (kj * dil_w) % s of padded row oh * stride_h + ki * dil_h: every tap of 16 output
//      columns is one contiguous load and no edge test is left in the inner loop.
//   2. compute: register tiles of up to 4 output channels x 6 output rows x 16 output columns
//      (24 accumulators); per input channel and tap, one load per row and one weight broadcast per
//      channel feed 24 FMAs. The last column block of a row is masked.
//   3. the fused epilogue (bias, residual, activation) runs on each finished tile's rows through
//      the GEMM epilogue of the same ISA, while they are in L1.
// Planes so narrow that a phase row and an output row fit one vector (7x7 outputs with 3x3
// taps: RegNet's and ResNeXt's last stage) are filled as phase planes whose rows are `pitch`
// apart (grouped_conv_pair_pitch), so one vector holds two output rows and fills 14 of 16 lanes
// instead of 7; its lanes are stored to the two rows with two masked stores.
//
// Contract: any plane sizes >= 1, KH, KW >= 1, strides >= 1, dilations >= 1, pads >= 0 (the end
// pads are implied by out_h / out_w). Only the band's output rows of the group's channels are
// written; the input is only read inside the plane. `scratch` holds
// f32_conv2d_grouped_scratch_floats(g, band_rows) floats, 64-byte aligned, private to the caller.
#pragma once

#include <cstdint>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/gemm/f32_gemm.h"

namespace peregrine::cpu {

struct GroupedConv2dGeometry {
  int64_t in_c_g, out_c_g;  // channels per group
  int64_t in_h, in_w, out_h, out_w;
  int64_t kh, kw, stride_h, stride_w, dil_h, dil_w, pad_t, pad_l;
};

// One group of one image, output rows [oh_begin, oh_end).
struct GroupedConv2dBand {
  const float *input;    // the group's planes (in_c_g, in_h, in_w)
  const float *weights;  // (out_c_g, in_c_g, kh, kw)
  float *output;         // the group's planes (out_c_g, out_h, out_w)
  int64_t oh_begin, oh_end;
  // Applied to each finished tile (per channel, its rows' pixels) with the channel's index in
  // the group as row0 and its first pixel as col0; nullptr: none.
  F32GemmEpilogueFn epilogue;
  const GemmEpilogue *epilogue_params;
};

constexpr int64_t kGroupedConvLanes = 16;

// Elements of one phase of a padded row: every tap of out_w rounded up to whole vectors.
inline int64_t grouped_conv_phase_floats(const GroupedConv2dGeometry &g) {
  const int64_t cols = (g.out_w + kGroupedConvLanes - 1) / kGroupedConvLanes * kGroupedConvLanes;
  const int64_t n = cols + (g.kw - 1) * g.dil_w / g.stride_w + 1;
  return (n + kGroupedConvLanes - 1) / kGroupedConvLanes * kGroupedConvLanes;
}
// Padded input rows a band of `rows` output rows reads.
inline int64_t grouped_conv_band_in_rows(const GroupedConv2dGeometry &g, int64_t rows) {
  return (rows - 1) * g.stride_h + (g.kh - 1) * g.dil_h + 1;
}
// The row-pair layout: per input channel, stride_h x stride_w phase planes (plane (a, b) row t,
// column q: padded input row t * stride_h + a, column q * stride_w + b), rows `pitch` apart, so
// the next output row's taps are one pitch on. The pitch, or 0 where two output rows do not fit
// one vector (strides 1 or 2, a stride-2 axis undilated).
inline int64_t grouped_conv_pair_pitch(const GroupedConv2dGeometry &g) {
  const bool rows_ok = g.stride_h == 1 || (g.stride_h == 2 && g.dil_h == 1);
  const bool cols_ok = g.stride_w == 1 || (g.stride_w == 2 && g.dil_w == 1);
  if (!rows_ok || !cols_ok) return 0;
  const int64_t pitch = g.out_w + (g.kw - 1) * g.dil_w / g.stride_w;
  return pitch + g.out_w <= kGroupedConvLanes ? pitch : 0;
}
// Floats of one phase plane for a band of `rows` output rows: its rows for those and one more
// output row (the last vector row may hold a row past the band), then a vector of slack.
inline int64_t grouped_conv_pair_plane_rows(const GroupedConv2dGeometry &g, int64_t rows) {
  return rows + 1 + (g.kh - 1) * g.dil_h / g.stride_h;
}
inline int64_t grouped_conv_pair_plane_floats(const GroupedConv2dGeometry &g, int64_t rows) {
  const int64_t n = grouped_conv_pair_plane_rows(g, rows) * grouped_conv_pair_pitch(g);
  return (n + 2 * kGroupedConvLanes - 1) / kGroupedConvLanes * kGroupedConvLanes;
}
inline int64_t grouped_conv_pair_channel_floats(const GroupedConv2dGeometry &g, int64_t rows) {
  return g.stride_h * g.stride_w * grouped_conv_pair_plane_floats(g, rows);
}
inline int64_t f32_conv2d_grouped_scratch_floats(const GroupedConv2dGeometry &g, int64_t rows) {
  const int64_t split =
      g.in_c_g * grouped_conv_band_in_rows(g, rows) * g.stride_w * grouped_conv_phase_floats(g);
  const int64_t pairs =
      grouped_conv_pair_pitch(g) ? g.in_c_g * grouped_conv_pair_channel_floats(g, rows) : 0;
  return split > pairs ? split : pairs;
}

using F32Conv2dGroupedFn = void (*)(const GroupedConv2dGeometry &g, const GroupedConv2dBand &b,
                                    float *scratch);

// The kernel of `isa`, or nullptr where that ISA level has none (or the CPU lacks it).
F32Conv2dGroupedFn f32_conv2d_grouped_ukernel_for(Isa isa);

namespace avx512 {
void f32_conv2d_grouped__avx512(const GroupedConv2dGeometry &g, const GroupedConv2dBand &b,
                                float *scratch);
}  // namespace avx512

}  // namespace peregrine::cpu
