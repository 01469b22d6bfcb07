// Depthwise Conv on NCHW planes (group == C_in, C_out = multiplier * C_in) with the row-buffered
// micro-kernels of ukernels/f32_dwconv2d_ukernels.h: one task per output plane, the fused bias,
// residual and activation applied per output row while it is hot.
#pragma once

#include <cstdint>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/ukernels/f32_dwconv2d_ukernels.h"

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

// True when the micro-kernels cover this geometry (stride_w 1 or 2, KH and KW <= 16, bounded
// scratch); otherwise the caller runs its generic loop.
bool depthwise_chw_supported(const DwConv2dGeometry &g);

// Runs the conv with `fused`'s activation: Relu / Clip as the kernel's clamp, any other activation
// through `epilogue` (the GEMM epilogue of the same ISA) on each finished row. Requires
// depthwise_chw_supported(args.geometry).
void depthwise_chw(const DwConv2dUkernelInfo &kernel, const DepthwiseChwArgs &args,
                   const FusedEpilogue &fused, F32GemmEpilogueFn epilogue, int threads);

}  // namespace peregrine::cpu
