// Grouped Conv (1 < group < C_in, NCHW) on the direct micro-kernel of
// ukernels/f32_conv2d_grouped_ukernels.h: one task per (image, group, band of output rows), the
// fused bias, residual and activation applied per finished tile.
#pragma once

#include <cstdint>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/ukernels/f32_conv2d_grouped_ukernels.h"

namespace peregrine::cpu {

struct GroupedConvArgs {
  const float *x;         // (N, group * in_c_g, H, W)
  const float *w;         // (group * out_c_g, in_c_g, KH, KW)
  const float *bias;      // (group * out_c_g) or nullptr
  const float *residual;  // like y, or nullptr
  float *y;               // (N, group * out_c_g, OH, OW)
  int64_t batch, group;
  GroupedConv2dGeometry geometry;
};

// Output channels per group the direct kernel takes at most (the rule below; a ConvKernel with
// wider groups packs its weights for the GEMM instead).
constexpr int64_t kConv2dGroupedMaxOutChannels = 32;

// The measured rule: true where the direct kernel beats a GEMM per group on this geometry
// (few output channels per group), and the kernel covers it (taps and scratch bounded).
bool use_conv2d_grouped(const GroupedConv2dGeometry &g);

// Runs the conv with `fused`'s activation through `epilogue` (the GEMM epilogue of the kernel's
// ISA). Requires use_conv2d_grouped(args.geometry).
void conv2d_grouped(F32Conv2dGroupedFn kernel, const GroupedConvArgs &args,
                    const FusedEpilogue &fused, F32GemmEpilogueFn epilogue, int threads);

}  // namespace peregrine::cpu
