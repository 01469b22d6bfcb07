// f32 depthwise 2-D convolution on one NCHW plane (one input channel -> one output channel), one
// kernel per ISA level, each in its ISA's namespace:
//   scalar (ukernels/f32-dwconv2d-chw-scalar.cc): plain loops.
//   avx2   (ukernels/f32-dwconv2d-chw-avx2.cc): 8 output columns per vector, 3x3 unrolled with
//          the weights in registers, any other KH x KW through a tap loop.
// and, where the ISA has one, a channel-blocked kernel on 8 or 16 planes at once (DwConv2dC8Block
// below; avx2: ukernels/f32-dwconv2d-c8-avx2.cc, avx512: ukernels/f32-dwconv2d-c16-avx512.cc and,
// for small stride-1 planes, the row-vector kernel ukernels/f32-dwconv2d-rows-avx512.cc).
//
// Algorithm (row-buffered, memory-bound by design): each input row the plane needs is copied once
// into a small per-thread scratch row, zero-padded left and right and split into stride_w phases
// (phase p holds padded columns p, p + s, p + 2s, ...), so tap kj of output column ow is element ow
// + (kj * dil_w) / s of phase (kj * dil_w) % s: every tap of every output vector is one contiguous
// load, with no edge test in the inner loop. A padded input row above or below the plane is a
// shared zero row. Small planes are copied whole before the first output row (so the vector loads
// never wait on the copy's stores still in flight: a load spanning two recent stores cannot be
// forwarded); larger ones keep KH tagged row slots, so with stride_h <= KH every input row is still
// copied once per plane. Each output row is produced whole in registers: bias, then the residual
// row, then the clamp [out_min, out_max] (Relu, Clip), and then an optional row epilogue (the other
// activations) while the row is still in L1; the output is written exactly once and never read
// back.
//
// Contract: any plane sizes >= 1, KH, KW >= 1, stride_h >= 1, stride_w in {1, 2}, dilations >= 1,
// pads >= 0 (pads_end are implied by out_h / out_w). The output row and residual row are only
// touched in [0, out_w); input is only read inside the plane. `scratch` holds at least
// f32_dwconv2d_chw_scratch_floats(g) floats, 32-byte aligned, and is private to the caller.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/gemm/f32_gemm.h"

namespace peregrine::cpu {

struct DwConv2dGeometry {
  int64_t in_h, in_w;    // input plane
  int64_t out_h, out_w;  // output plane
  int64_t kh, kw;
  int64_t stride_h, stride_w;  // stride_w: 1 or 2
  int64_t dil_h, dil_w;
  int64_t pad_t, pad_l;
};

// One plane's operands.
struct DwConv2dPlane {
  const float *input;      // (in_h, in_w), contiguous
  const float *weights;    // (kh, kw), contiguous
  float bias;              // added to every output
  const float *residual;   // (out_h, out_w) contiguous, added after the bias; or nullptr
  float *output;           // (out_h, out_w), contiguous
  float out_min, out_max;  // clamp applied after the residual (-inf, +inf: none)
  // Applied to each finished output row (as a 1 x out_w tile at (0, 0)) after the clamp, while it
  // is hot; nullptr: none. Used for the activations that are not a clamp.
  F32GemmEpilogueFn row_epilogue;
  const GemmEpilogue *row_epilogue_params;
};

// Output columns each scratch row is sized for: out_w rounded up to the widest vector (8).
inline int64_t dwconv2d_chw_padded_out_w(const DwConv2dGeometry &g) {
  return (g.out_w + 7) / 8 * 8;
}
// Elements of one phase of a scratch row the kernels fill (zeros or input): every tap of the padded
// output columns, rounded up to 8.
inline int64_t dwconv2d_chw_phase_valid(const DwConv2dGeometry &g) {
  const int64_t n = dwconv2d_chw_padded_out_w(g) + (g.kw - 1) * g.dil_w / g.stride_w + 1;
  return (n + 7) / 8 * 8;
}
// Distance between phases: the valid part plus one vector of slack, so a fill may store whole
// vectors past the valid part.
inline int64_t dwconv2d_chw_phase_floats(const DwConv2dGeometry &g) {
  return dwconv2d_chw_phase_valid(g) + 8;
}
// Planes whose scratch rows all fit in this many floats (24 KiB, within L1) are copied whole before
// the first output row; larger ones go through a ring of KH rows.
constexpr int64_t kDwConv2dWholePlaneFloats = 6 * 1024;
// Scratch rows the kernels keep, plus one zero row: every input row (whole-plane mode) or KH.
inline int64_t dwconv2d_chw_scratch_rows(const DwConv2dGeometry &g) {
  const int64_t slot = g.stride_w * dwconv2d_chw_phase_floats(g);
  return (g.in_h + 1) * slot <= kDwConv2dWholePlaneFloats ? g.in_h : g.kh;
}
inline bool dwconv2d_chw_whole_plane(const DwConv2dGeometry &g) {
  return dwconv2d_chw_scratch_rows(g) == g.in_h;
}
// Scratch floats the kernels need: the scratch rows and the zero row, stride_w phases each.
inline int64_t f32_dwconv2d_chw_scratch_floats(const DwConv2dGeometry &g) {
  return (dwconv2d_chw_scratch_rows(g) + 1) * g.stride_w * dwconv2d_chw_phase_floats(g);
}

using F32DwConv2dChwFn = void (*)(const DwConv2dGeometry &g, const DwConv2dPlane &p,
                                  float *scratch);

// ---------------------------------------------------------------------------------------------
// Channel-blocked kernel (ukernels/f32-dwconv2d-c8-avx2.cc, 8 channels; f32-dwconv2d-c16-avx512.cc,
// 16): a block of channels of one image at a time, so its cost per vector does not depend on the
// row width or stride, unlike the plane kernel's per row and per plane overhead (small planes,
// stride 2; the rule is use_dwconv2d_c8() in kernels/conv_depthwise_chw.h). Input rows are
// transposed into a zero-padded pixel-major tile (one block of channels per vector), every output
// pixel is a sum of tap vectors with no edge test and no shuffle, and finished pixels are
// transposed back into the block's output planes. Contract: as the plane kernel's, but any
// stride_w >= 1 (f32_dwconv2d_c8_supported); multiplier 1 (channel c of the block reads input
// plane c). Input is only read inside the block's planes, output and residual only touched in
// rows [oh_begin, oh_end).

// Operands of one block of consecutive channels: the kernel's block_channels (8 or 16), or fewer
// for a kernel that takes partial blocks (`channels`).
struct DwConv2dC8Block {
  const float *input;        // the block's planes (in_h, in_w), one after another
  const float *weights;      // (channels, kh, kw)
  const float *bias;         // (channels), or nullptr: none
  const float *residual;     // the planes (out_h, out_w) added after the bias, or nullptr
  float *output;             // the planes (out_h, out_w)
  int64_t oh_begin, oh_end;  // the output rows to produce, of every plane
  float out_min, out_max;    // clamp applied after the residual (-inf, +inf: none)
  // Applied after the clamp to each run of finished pixels, as the (channels, n) tile at output + q
  // with ldc = out_h * out_w (the planes' pixels [q, q + n)); nullptr: none.
  F32GemmEpilogueFn epilogue;
  const GemmEpilogue *epilogue_params;
  // Channels of this block, 1..block_channels, where the kernel takes partial blocks; 0: all.
  // Planes past it are neither read nor written.
  int64_t channels = 0;
};

// Bounds of the c8 kernels: KH and KW (the row pointer array) and the tile rows (the ring's tags).
constexpr int64_t kDwConv2dC8MaxKernel = 16;
constexpr int64_t kDwConv2dC8MaxTileRows = 64;

// Output pixels per step of the c8 kernels' compute loop: rows are computed in whole steps (the
// extra pixels of the last step are discarded).
constexpr int64_t kDwConv2dC8PixelStep = 4;
// Pixels (of 8 floats) in one row of the pixel-major input tile: the left padding, the input row in
// whole blocks of 8 pixels (the last block's pixels past in_w are zeros), and whatever the last
// compute step reads beyond them.
// `lanes`: the kernel's block_channels (its transposes take blocks of that many pixels).
inline int64_t dwconv2d_c8_tile_w(const DwConv2dGeometry &g, int64_t lanes = 8) {
  const int64_t steps_w = (g.out_w + kDwConv2dC8PixelStep - 1) / kDwConv2dC8PixelStep;
  const int64_t reach =
      (steps_w * kDwConv2dC8PixelStep - 1) * g.stride_w + (g.kw - 1) * g.dil_w + 1;
  return std::max(g.pad_l + (g.in_w + lanes - 1) / lanes * lanes, reach);
}
// Tile rows kept (a ring): the rows one output row reads.
inline int64_t dwconv2d_c8_tile_rows(const DwConv2dGeometry &g) { return (g.kh - 1) * g.dil_h + 1; }
// Pixels of the pixel-major output buffer: up to 7 pixels left over from the previous row plus
// one row in whole compute steps, rounded up to whole blocks of 8.
inline int64_t dwconv2d_c8_out_pixels(const DwConv2dGeometry &g, int64_t lanes = 8) {
  const int64_t row =
      (g.out_w + kDwConv2dC8PixelStep - 1) / kDwConv2dC8PixelStep * kDwConv2dC8PixelStep;
  return (lanes - 1 + row + lanes - 1) / lanes * lanes;
}
// Scratch floats of one c8 call: the tap-major weights (transposed in whole blocks of `lanes`
// taps) and bias, a zero tile row, the ring of tile rows and the output buffer (each part a
// multiple of 8 floats, so each stays 32-byte aligned).
inline int64_t f32_dwconv2d_c8_scratch_floats(const DwConv2dGeometry &g, int64_t lanes = 8) {
  const int64_t tile_row = dwconv2d_c8_tile_w(g, lanes) * lanes;
  const int64_t weight_pixels = (g.kh * g.kw + lanes - 1) / lanes * lanes;  // whole transposes
  return weight_pixels * lanes + lanes + tile_row * (1 + dwconv2d_c8_tile_rows(g)) +
         dwconv2d_c8_out_pixels(g, lanes) * lanes;
}

// True when the c8 kernels take this geometry (the caller also bounds the scratch size).
inline bool f32_dwconv2d_c8_supported(const DwConv2dGeometry &g) {
  return g.kh >= 1 && g.kw >= 1 && g.kh <= kDwConv2dC8MaxKernel && g.kw <= kDwConv2dC8MaxKernel &&
         g.stride_h >= 1 && g.stride_w >= 1 && g.dil_h >= 1 && g.dil_w >= 1 && g.pad_t >= 0 &&
         g.pad_l >= 0 && g.in_h >= 1 && g.in_w >= 1 && g.out_h >= 1 && g.out_w >= 1 &&
         dwconv2d_c8_tile_rows(g) <= kDwConv2dC8MaxTileRows;
}

// `scratch`: f32_dwconv2d_c8_scratch_floats(g) floats, 32-byte aligned, private to the caller.
using F32DwConv2dC8Fn = void (*)(const DwConv2dGeometry &g, const DwConv2dC8Block &b,
                                 float *scratch);

// ---------------------------------------------------------------------------------------------
// Row-vector kernel (ukernels/f32-dwconv2d-rows-avx512.cc): the channel-blocked interface
// (DwConv2dC8Block: up to 16 channels, bands, partial blocks) for small stride-1 planes whose
// padded rows fit one vector of 16 (out_w + KW - 1 <= 16: MobileNet's 14x14 and 7x7 maps). Each
// plane is copied into zero-padded rows of 16 floats; an output row is then one vector, and tap
// (ky, kx) of it is padded row y + ky shifted down by kx lanes (one aligned load per ky, one
// in-register shift per kx): no transposes, which cost the channel-blocked kernel more than its
// taps on planes this small.
constexpr int64_t kDwConv2dRowsLanes = 16;
constexpr int64_t kDwConv2dRowsMaxKh = 16;

// Output rows the kernel computes at once (the last step's extra rows read zero slack).
constexpr int64_t kDwConv2dRowsPerStep = 4;
// Floats of one padded plane for a band of `rows_out` output rows, with the slack.
inline int64_t dwconv2d_rows_buffer_floats(const DwConv2dGeometry &g, int64_t rows_out) {
  return (rows_out + g.kh - 1 + kDwConv2dRowsPerStep - 1) * kDwConv2dRowsLanes;
}
// Two padded planes (the one computed and the next one being copied) for the whole plane, and
// a vector of slack to align them to 64 bytes.
inline int64_t f32_dwconv2d_rows_scratch_floats(const DwConv2dGeometry &g, int64_t /*lanes*/) {
  return 2 * dwconv2d_rows_buffer_floats(g, g.out_h) + kDwConv2dRowsLanes;
}
inline bool f32_dwconv2d_rows_supported(const DwConv2dGeometry &g) {
  return g.kh >= 1 && g.kh <= kDwConv2dRowsMaxKh &&
         (g.kw == 1 || g.kw == 3 || g.kw == 5 || g.kw == 7) && g.stride_h == 1 && g.stride_w == 1 &&
         g.dil_h == 1 && g.dil_w == 1 && g.pad_t >= 0 && g.pad_l >= 0 && g.in_h >= 1 &&
         g.in_w >= 1 && g.out_h >= 1 && g.out_w >= 1 && g.out_w + g.kw - 1 <= kDwConv2dRowsLanes;
}

struct DwConv2dUkernelInfo {
  Isa isa;
  const char *name;  // "f32_dwconv2d_chw__avx2"
  F32DwConv2dChwFn plane;
  const char *c8_name;     // "f32_dwconv2d_c8__avx2", or nullptr
  F32DwConv2dC8Fn c8;      // the channel-blocked kernel, or nullptr where this ISA has none
  int64_t block_channels;  // channels per c8 call (and its scratch lanes): 8 or 16
  bool partial_blocks;     // c8 also takes a last block of fewer channels (DwConv2dC8Block)
  // The geometries c8 takes, and the scratch floats one call needs (for `block_channels` lanes).
  bool (*c8_supported)(const DwConv2dGeometry &g);
  int64_t (*c8_scratch_floats)(const DwConv2dGeometry &g, int64_t lanes);
  // Where `preferred` is false for a plane, `otherwise` runs it (nullptr: this entry runs all).
  // The AVX-512 chain: the row-vector kernel on stride-1 planes 12-16 output columns wide, else
  // the c16 kernel on planes up to 28 wide (up to 112 where 512-bit shuffles run at full
  // width), else the AVX2 c8 kernel (the rules: f32-dwconv2d-chw-scalar.cc).
  bool (*preferred)(const DwConv2dGeometry &g);
  const DwConv2dUkernelInfo *otherwise;
};

// The entry that runs planes of geometry g: k, or the first entry down its `otherwise` chain
// that prefers g.
inline const DwConv2dUkernelInfo &dwconv2d_ukernel_for_plane(const DwConv2dUkernelInfo &k,
                                                             const DwConv2dGeometry &g) {
  const DwConv2dUkernelInfo *e = &k;
  while (e->otherwise != nullptr && !e->preferred(g)) e = e->otherwise;
  return *e;
}

// The kernel for `isa` (AVX-512: the AVX2 plane kernel and the head of the block kernels' chain),
// or nullptr when this CPU cannot run it.
const DwConv2dUkernelInfo *f32_dwconv2d_chw_ukernel_for(Isa isa);
// The kernel for selected_isa() (the best level when PEREGRINE_ISA is invalid).
const DwConv2dUkernelInfo &f32_dwconv2d_chw_ukernel();

namespace scalar {
void f32_dwconv2d_chw__scalar(const DwConv2dGeometry &g, const DwConv2dPlane &p, float *scratch);
}  // namespace scalar

namespace avx2 {
void f32_dwconv2d_chw__avx2(const DwConv2dGeometry &g, const DwConv2dPlane &p, float *scratch);
void f32_dwconv2d_c8__avx2(const DwConv2dGeometry &g, const DwConv2dC8Block &b, float *scratch);
}  // namespace avx2
namespace avx512 {
void f32_dwconv2d_c16__avx512(const DwConv2dGeometry &g, const DwConv2dC8Block &b, float *scratch);
void f32_dwconv2d_rows__avx512(const DwConv2dGeometry &g, const DwConv2dC8Block &b, float *scratch);
}  // namespace avx512

}  // namespace peregrine::cpu
