// Convolution as a GEMM whose B rows are shifted views of the input: no im2col copy.
//
// The input of one group is copied once, zero-padded, into stride_d * stride_h * stride_w
// "phase planes" per channel: plane (a, b) of a 2-D conv holds the padded pixels (a + stride_h t,
// b + stride_w u). Output pixel (oh, ow) under tap (ki, kj) reads padded pixel (oh stride_h +
// ki dil_h, ow stride_w + kj dil_w), which is element (oh + (ki dil_h) / stride_h, ow + (kj dil_w)
// / stride_w) of the plane of phase ((ki dil_h) % stride_h, (kj dil_w) % stride_w). Numbering the
// output pixels on the plane's grid, q = oh * pitch + ow, makes every tap's B row one
// contiguous run of its plane: B(tap, q) = plane[offset(tap) + q]. The GEMM
//   C(Cout_g, q) = W(Cout_g, Cin_g * KH * KW) * B(Cin_g * KH * KW, q)
// reads B through one pointer per row with the indirect micro-kernel: nothing is packed per
// run but the planes, and tiles run across output rows (no per-row edge tiles). The columns
// with ow >= OW (pitch - OW per row) are computed and dropped: each task's chunk of C goes to
// a buffer of its own and is compacted into Y while it is in cache, unless pitch == OW, where
// C is Y. The pitch is plane_w, or less where
// consecutive rows share their zero padding (a 1x7 conv with pads 3 on a 17-wide map: 20, not
// 23; a padded 3x3 on a 7-wide map: 8, not 9).
// 3-D convs add a depth axis the same way (planes of plane_d x plane_h x plane_w, q = (od
// plane_h + oh) plane_w + ow, also dropping the rows with oh >= OH); 1-D convs are one row.
#pragma once

#include <cstdint>

#include "backends/cpu/gemm/bf16_gemm.h"
#include "backends/cpu/gemm/f32_gemm.h"

namespace peregrine::cpu {

struct PhasePlanesConvShape {
  int64_t in_c, in_h, in_w;  // of one group of one image
  int64_t out_c, out_h, out_w;
  int64_t kh, kw;
  int64_t stride_h, stride_w, dil_h, dil_w, pad_t, pad_l;
  // The depth axis of a 3-D conv (1-D and 2-D convs keep these).
  int64_t in_d = 1, out_d = 1, kd = 1, stride_d = 1, dil_d = 1, pad_f = 0;
};

// Depth slices, rows and columns of one phase plane.
int64_t phase_plane_d(const PhasePlanesConvShape& s);
int64_t phase_plane_h(const PhasePlanesConvShape& s);
int64_t phase_plane_w(const PhasePlanesConvShape& s);
// Floats from one plane row to the next (2-D convs): less than the width where consecutive
// rows can share their zero padding (row t's columns past its last input pixel are row t + 1's
// columns before its first), so fewer grid columns are computed and dropped.
int64_t phase_plane_pitch(const PhasePlanesConvShape& s);

// The share of the GEMM's columns that are output pixels (OW / plane_w, times OH / plane_h for
// a 3-D conv).
double phase_planes_useful_fraction(const PhasePlanesConvShape& s);

// The rule for the automatic choice: true where the planes beat im2col packing (see conv.cc).
bool use_conv_phase_planes(const PhasePlanesConvShape& s);

// Floats of scratch conv_phase_planes needs (the planes).
int64_t phase_planes_scratch_floats(const PhasePlanesConvShape& s);

// y(Cout_g, OD * OH * OW) = epilogue(W * im2col(x)) for one group of one image: `w` the weights
// packed as A (Cout_g, Cin_g * KD * KH * KW) for `kernel`, which must have an indirect_ukernel;
// `ep` as for the GEMM on Y (per-row bias, residual in Y's layout, activation); `scratch`
// of phase_planes_scratch_floats(s) floats, 64-byte aligned.
void conv_phase_planes(const GemmKernelInfo& kernel, const PackedMatrix& w, const float* x,
                       const PhasePlanesConvShape& s, float* y, const GemmEpilogue& ep,
                       float* scratch, int num_threads);

// bf16 (--precision bf16): the same GEMM with bf16 products, its B rows the planes of channel
// pairs (one uint32 per pixel: channel 2 cp in the low half, 2 cp + 1 in the high, the second
// zero past Cin_g), built once per run, and its K ordered (KD, KH, KW, Cin_g rounded up to even)
// so a pair never straddles two taps. `w` from pack_phase_planes_bf16_weights, `epilogue`
// applies what the tiles cannot take in registers; `scratch` of
// phase_planes_bf16_scratch_floats(s) floats, 64-byte aligned.
int64_t phase_planes_bf16_scratch_floats(const PhasePlanesConvShape& s);
// K of the bf16 weights: KD * KH * KW * Cin_g rounded up to even.
int64_t phase_planes_bf16_depth(const PhasePlanesConvShape& s);
// `w` (Cout_g, Cin_g, KD, KH, KW) float32, reordered and packed as the bf16 GEMM's A.
Bf16PackedMatrix pack_phase_planes_bf16_weights(const Bf16GemmKernelInfo& kernel, const float* w,
                                                const PhasePlanesConvShape& s);
void conv_phase_planes_bf16(const Bf16GemmKernelInfo& kernel, const Bf16PackedMatrix& w,
                            F32GemmEpilogueFn epilogue, const float* x,
                            const PhasePlanesConvShape& s, float* y, const GemmEpilogue& ep,
                            float* scratch, int num_threads);

}  // namespace peregrine::cpu
