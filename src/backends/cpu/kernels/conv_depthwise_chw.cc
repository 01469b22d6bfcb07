#include "backends/cpu/kernels/conv_depthwise_chw.h"

#include <limits>

#include "backends/cpu/kernels/conv_scratch.h"
#include "backends/cpu/thread_pool.h"

namespace peregrine::cpu {

namespace {

constexpr int64_t kMaxKernel = 16;              // ukernels' tag / offset arrays
constexpr int64_t kMaxScratchFloats = 1 << 20;  // 4 MiB per thread: wider rows use the loop

}  // namespace

bool depthwise_chw_supported(const DwConv2dGeometry &g) {
  return g.kh >= 1 && g.kw >= 1 && g.kh <= kMaxKernel && g.kw <= kMaxKernel &&
         (g.stride_w == 1 || g.stride_w == 2) && g.stride_h >= 1 && g.dil_h >= 1 && g.dil_w >= 1 &&
         g.pad_t >= 0 && g.pad_l >= 0 && g.in_h >= 1 && g.in_w >= 1 &&
         f32_dwconv2d_chw_scratch_floats(g) <= kMaxScratchFloats;
}

void depthwise_chw(const DwConv2dUkernelInfo &kernel, const DepthwiseChwArgs &a,
                   const FusedEpilogue &fused, F32GemmEpilogueFn epilogue, int threads) {
  const DwConv2dGeometry &g = a.geometry;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float lo = -kInf, hi = kInf;
  GemmEpilogue row_ep = activation_epilogue(fused);  // activation only: no bias, no residual
  bool row_activation = false;
  if (fused.activation == Activation::kRelu) {
    lo = 0.0f;
  } else if (fused.activation == Activation::kClip) {
    lo = fused.p0;
    hi = fused.p1;
  } else if (fused.activation != Activation::kNone) {
    row_activation = true;
  }
  const int64_t multiplier = a.out_c / a.in_c;
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  const size_t scratch_floats = static_cast<size_t>(f32_dwconv2d_chw_scratch_floats(g));
  auto plane_task = [&](int64_t t, int) {
    const int64_t n = t / a.out_c, oc = t % a.out_c;
    DwConv2dPlane p;
    p.input = a.x + (n * a.in_c + oc / multiplier) * in_plane;
    p.weights = a.w + oc * g.kh * g.kw;
    p.bias = a.bias ? a.bias[oc] : 0.0f;
    p.residual = a.residual ? a.residual + t * out_plane : nullptr;
    p.output = a.y + t * out_plane;
    p.out_min = lo;
    p.out_max = hi;
    p.row_epilogue = row_activation ? epilogue : nullptr;
    p.row_epilogue_params = &row_ep;
    kernel.plane(g, p, conv_scratch_floats(scratch_floats));
  };
  cpu_thread_pool().parallel_for(a.batch * a.out_c, threads, plane_task);
}

}  // namespace peregrine::cpu
