#include "backends/cpu/kernels/conv_grouped.h"

#include <algorithm>

#include "backends/cpu/kernels/conv_scratch.h"
#include "backends/cpu/thread_pool.h"

namespace peregrine::cpu {

namespace {

constexpr int64_t kMaxTaps = 256;              // the kernel's tap-offset table
constexpr int64_t kBandScratchFloats = 64 * 1024;  // a band's padded input within L2 (256 KiB)
constexpr int64_t kMaxScratchFloats = 1 << 20;     // one output row's input at most (4 MiB)
constexpr int64_t kTileRows = 6;                   // the kernel's register tile rows

}  // namespace

F32Conv2dGroupedFn f32_conv2d_grouped_ukernel_for(Isa isa) {
  if (isa == Isa::kAvx512 && isa_supported(isa)) return avx512::f32_conv2d_grouped__avx512;
  return nullptr;
}

// The GEMM per group pads M = out_c_g to the GEMM tile's 14 rows and packs an im2col panel of
// in_c_g * KH * KW rows per group; up to 32 channels per group the direct kernel was faster on
// every grouped layer of bench/real_models resnext50_32x4d and on single RegNet-shaped layers (8
// and 24 per group; peregrine profile, 1 thread). Wider groups (AlexNet-style group = 2) fill the
// GEMM tile and stay on it.
bool use_conv2d_grouped(const GroupedConv2dGeometry &g) {
  return g.in_c_g >= 1 && g.out_c_g >= 1 && g.out_c_g <= kConv2dGroupedMaxOutChannels &&
         g.kh >= 1 && g.kw >= 1 &&
         g.kh * g.kw <= kMaxTaps && g.stride_h >= 1 && g.stride_w >= 1 && g.dil_h >= 1 &&
         g.dil_w >= 1 && g.pad_t >= 0 && g.pad_l >= 0 && g.in_h >= 1 && g.in_w >= 1 &&
         g.out_h >= 1 && g.out_w >= 1 &&
         f32_conv2d_grouped_scratch_floats(g, 1) <= kMaxScratchFloats;
}

void conv2d_grouped(F32Conv2dGroupedFn kernel, const GroupedConvArgs &a,
                    const FusedEpilogue &fused, F32GemmEpilogueFn epilogue, int threads) {
  const GroupedConv2dGeometry &g = a.geometry;
  // Bands: as many output rows as keep the padded input in L2, whole register tiles where
  // possible, and enough tasks that every thread gets several.
  const int64_t per_row = g.in_c_g * g.stride_w * grouped_conv_phase_floats(g) * g.stride_h;
  int64_t band_rows = std::clamp<int64_t>(kBandScratchFloats / std::max<int64_t>(per_row, 1), 1,
                                          g.out_h);
  const int64_t planes = a.batch * a.group;
  if (threads > 1 && planes * ((g.out_h + band_rows - 1) / band_rows) < 4 * threads) {
    const int64_t wanted_bands = (4 * threads + planes - 1) / planes;
    band_rows = std::min(band_rows, (g.out_h + wanted_bands - 1) / wanted_bands);
  }
  if (band_rows > kTileRows) band_rows = band_rows / kTileRows * kTileRows;
  band_rows = std::max<int64_t>(band_rows, 1);
  const int64_t bands = (g.out_h + band_rows - 1) / band_rows;
  const int64_t out_plane = g.out_h * g.out_w, in_plane = g.in_h * g.in_w;
  const int64_t out_c = a.group * g.out_c_g, in_c = a.group * g.in_c_g;
  const bool any_epilogue =
      a.bias != nullptr || a.residual != nullptr || fused.activation != Activation::kNone;
  const size_t scratch = static_cast<size_t>(f32_conv2d_grouped_scratch_floats(g, band_rows));
  auto task = [&](int64_t t, int) {
    const int64_t band = t % bands, plane = t / bands;  // plane = n * group + grp
    const int64_t n = plane / a.group, grp = plane % a.group;
    const int64_t first_out = n * out_c + grp * g.out_c_g;
    GemmEpilogue ep = activation_epilogue(fused);
    if (a.bias) {
      ep.bias_kind = GemmEpilogue::Bias::kPerRow;
      ep.bias = a.bias + grp * g.out_c_g;
    }
    ep.residual = a.residual ? a.residual + first_out * out_plane : nullptr;
    ep.ldr = out_plane;
    GroupedConv2dBand b;
    b.input = a.x + (n * in_c + grp * g.in_c_g) * in_plane;
    b.weights = a.w + grp * g.out_c_g * g.in_c_g * g.kh * g.kw;
    b.output = a.y + first_out * out_plane;
    b.oh_begin = band * band_rows;
    b.oh_end = std::min(g.out_h, b.oh_begin + band_rows);
    b.epilogue = any_epilogue ? epilogue : nullptr;
    b.epilogue_params = &ep;
    kernel(g, b, conv_scratch_floats(scratch));
  };
  cpu_thread_pool().parallel_for(planes * bands, threads, task);
}

}  // namespace peregrine::cpu
