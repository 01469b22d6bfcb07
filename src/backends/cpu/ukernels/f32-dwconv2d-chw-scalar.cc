// Depthwise 2-D conv on one NCHW plane, scalar (contract and algorithm:
// ukernels/f32_dwconv2d_ukernels.h). The output row is the accumulator: bias (+ residual), then one
// pass per tap over the row, then the clamp; each pass is a plain loop the compiler may vectorize
// at the baseline width. Also the per-ISA table.
#include <algorithm>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/ukernels/f32_dwconv2d_chw_impl.h"

namespace peregrine::cpu {

namespace scalar {

void f32_dwconv2d_chw__scalar(const DwConv2dGeometry &g, const DwConv2dPlane &p, float *scratch) {
  const int64_t ow_n = g.out_w;
  auto fill_row = [&](const DwConv2dRowLayout &l, const float *in_row, float *dst) {
    dwconv2d_fill_row_scalar(l, g.stride_w, g.pad_l, in_row, dst);
  };
  auto compute_row = [&](const float *const *rows, const int64_t *col_off, const float *res,
                         float *out) {
    for (int64_t ow = 0; ow < ow_n; ++ow) out[ow] = p.bias;
    for (int64_t ki = 0; ki < g.kh; ++ki)
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const float w = p.weights[ki * g.kw + kj];
        const float *__restrict r = rows[ki] + col_off[kj];
        float *__restrict o = out;
        for (int64_t ow = 0; ow < ow_n; ++ow) o[ow] += w * r[ow];
      }
    if (res)
      for (int64_t ow = 0; ow < ow_n; ++ow) out[ow] += res[ow];
    for (int64_t ow = 0; ow < ow_n; ++ow)
      out[ow] = std::min(std::max(out[ow], p.out_min), p.out_max);
  };
  dwconv2d_chw_plane(g, p, scratch, fill_row, compute_row);
}

}  // namespace scalar

namespace {

// The 16-channel block kernel on planes up to 28 columns wide, and up to 112 where 512-bit
// shuffles run at full width: its 16x16 transposes then cost no more per channel than the
// 8-channel kernel's 8x8 ones and each call's fixed work covers twice the channels. Wider
// planes, whose 16-channel tile ring outgrows the caches, keep the 8-channel kernel
// (peregrine_dwconv_bench: MobileNetV2/*, K5/*, K7/* and Wide/*).
bool c16_preferred(const DwConv2dGeometry &g) {
  return g.in_w <= 28 || (g.in_w <= 112 && !cpu_features().avx512_split);
}

// The row-vector kernel where at least 12 of its 16 lanes are output pixels. MobileNetV2 in the
// model against the c16 kernel (per layer, 1 and 2 threads): faster on 14x14 planes, slower on
// 7x7 ones (7 of 16 lanes).
bool rows_preferred(const DwConv2dGeometry &g) {
  return f32_dwconv2d_rows_supported(g) && g.out_w >= 12;
}

const DwConv2dUkernelInfo kKernels[] = {
    {Isa::kScalar, "f32_dwconv2d_chw__scalar", scalar::f32_dwconv2d_chw__scalar, nullptr, nullptr,
     8, false, nullptr, nullptr, nullptr, nullptr},
    {Isa::kAvx2, "f32_dwconv2d_chw__avx2", avx2::f32_dwconv2d_chw__avx2, "f32_dwconv2d_c8__avx2",
     avx2::f32_dwconv2d_c8__avx2, 8, false, f32_dwconv2d_c8_supported,
     f32_dwconv2d_c8_scratch_floats, nullptr, nullptr},
    {Isa::kAvx512, "f32_dwconv2d_chw__avx2", avx2::f32_dwconv2d_chw__avx2,
     "f32_dwconv2d_c16__avx512", avx512::f32_dwconv2d_c16__avx512, 16, true,
     f32_dwconv2d_c8_supported, f32_dwconv2d_c8_scratch_floats, c16_preferred, &kKernels[1]},
    {Isa::kAvx512, "f32_dwconv2d_chw__avx2", avx2::f32_dwconv2d_chw__avx2,
     "f32_dwconv2d_rows__avx512", avx512::f32_dwconv2d_rows__avx512, 16, true,
     f32_dwconv2d_rows_supported, f32_dwconv2d_rows_scratch_floats, rows_preferred, &kKernels[2]},
};

}  // namespace

const DwConv2dUkernelInfo *f32_dwconv2d_chw_ukernel_for(Isa isa) {
  if (!isa_supported(isa)) return nullptr;
  return isa == Isa::kScalar ? &kKernels[0] : isa == Isa::kAvx2 ? &kKernels[1] : &kKernels[3];
}

const DwConv2dUkernelInfo &f32_dwconv2d_chw_ukernel() {
  const Expected<Isa> &isa = selected_isa();
  const DwConv2dUkernelInfo *k =
      f32_dwconv2d_chw_ukernel_for(isa.is_ok() ? isa.value() : cpu_features().best_isa());
  return k ? *k : kKernels[0];
}

}  // namespace peregrine::cpu
