// Depthwise Conv on NCHW planes (group == C_in, C_out = multiplier * C_in) with the micro-kernels
// of ukernels/f32_dwconv2d_ukernels.h, the fused bias, residual and activation applied while the
// output is hot. Two algorithms, chosen per layer by use_dwconv2d_c8():
//   plane: the row-buffered per-plane kernel, one task per output plane;
//   c8:    a block kernel: the channel-blocked kernel on blocks of 8 channels, or with AVX-512
//          16 on planes up to 28 wide and the row-vector kernel on 12-16-wide stride-1 planes
//          (multiplier 1 and an ISA that has one), one task per (image, block[, band of output
//          rows]); the last channels short of a block take a partial block where the kernel has
//          them (AVX-512), else the plane kernel.
#pragma once

#include <cstdint>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/ukernels/f32_dwconv2d_ukernels.h"
#include "peregrine/status.h"

namespace peregrine::cpu {

struct DepthwiseChwArgs {
  const float *x;         // (N, C_in, H, W)
  const float *w;         // (C_out, 1, KH, KW); output channel oc reads input channel oc / mult
  const float *bias;      // (C_out) or nullptr
  const float *residual;  // (N, C_out, OH, OW) or nullptr
  float *y;               // (N, C_out, OH, OW)
  int64_t batch, in_c, out_c;
  DwConv2dGeometry geometry;
};

enum class DwConvAlgo { kAuto, kPlane, kC8 };

// kAuto, unless PEREGRINE_DWCONV_ALGO=plane|c8 forces one (benchmarks; c8 only where supported).
DwConvAlgo dwconv_algo_from_env();
// An error naming PEREGRINE_DWCONV_ALGO when it is set to anything but plane, c8 or auto
// (checked when a conv is prepared, so a typo is not silently the rule).
Status check_dwconv_algo_env();

// The measured rule: true when the channel-blocked kernel beats the plane kernel on this geometry.
bool use_dwconv2d_c8(const DwConv2dGeometry &g);

// True when the micro-kernels cover this geometry (stride_w 1 or 2, KH and KW <= 16, bounded
// scratch); otherwise the caller runs its generic loop.
bool depthwise_chw_supported(const DwConv2dGeometry &g);

// Runs the conv with `fused`'s activation: Relu / Clip as the kernel's clamp, any other activation
// through `epilogue` (the GEMM epilogue of the same ISA) on each finished row. `algo` kAuto: the
// rule (or PEREGRINE_DWCONV_ALGO). Requires depthwise_chw_supported(args.geometry). Returns the
// name of the kernel that ran (kernel.c8_name when any channel block took the c8 kernel).
const char *depthwise_chw(const DwConv2dUkernelInfo &kernel, const DepthwiseChwArgs &args,
                          const FusedEpilogue &fused, F32GemmEpilogueFn epilogue, int threads,
                          DwConvAlgo algo = DwConvAlgo::kAuto);

}  // namespace peregrine::cpu
