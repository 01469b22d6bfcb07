#include "backends/cpu/kernels/conv_depthwise_chw.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "backends/cpu/kernels/conv_scratch.h"
#include "backends/cpu/thread_pool.h"

namespace peregrine::cpu {

namespace {

constexpr int64_t kMaxKernel = 16;              // ukernels' tag / offset arrays
constexpr int64_t kMaxScratchFloats = 1 << 20;  // 4 MiB per thread: wider rows use the loop

// PEREGRINE_DWCONV_ALGO's choice in *algo (kAuto when unset, empty or "auto"); false for any
// other value.
bool parse_dwconv_algo_env(DwConvAlgo *algo) {
  const char *v = std::getenv("PEREGRINE_DWCONV_ALGO");
  *algo = DwConvAlgo::kAuto;
  if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0) return true;
  if (std::strcmp(v, "plane") == 0) *algo = DwConvAlgo::kPlane;
  if (std::strcmp(v, "c8") == 0) *algo = DwConvAlgo::kC8;
  return *algo != DwConvAlgo::kAuto;
}

}  // namespace

DwConvAlgo dwconv_algo_from_env() {
  DwConvAlgo algo;
  parse_dwconv_algo_env(&algo);  // an unknown value is rejected when the conv is prepared
  return algo;
}

Status check_dwconv_algo_env() {
  DwConvAlgo algo;
  if (parse_dwconv_algo_env(&algo)) return Status::ok();
  return invalid_input(std::string("PEREGRINE_DWCONV_ALGO='") +
                       std::getenv("PEREGRINE_DWCONV_ALGO") + "': expected plane, c8 or auto");
}

// Measured on an AMD EPYC (Zen 3, 32 KiB L1d, 512 KiB L2), 1 thread, plane vs c8 on the shapes
// of peregrine_dwconv_bench (bias + Clip: MobileNetV2's 3x3 layers, 5x5, 7x7, 1x1 and wide 3x3
// planes up to 8x1280x720) and on MobileNetV2's 17 depthwise layers in the model (peregrine
// profile): c8 won everywhere, least on the widest planes and most on small or stride-2 ones:
// its cost per vector does not depend on the row width, while the plane kernel pays per row and
// per plane. Beyond the measured range, where the c8 tile ring and buffer (~51K floats at 1280
// wide) would outgrow half of L2, keep the plane kernel.
bool use_dwconv2d_c8(const DwConv2dGeometry &g) {
  constexpr int64_t kMaxRuleScratchFloats = 64 * 1024;  // 256 KiB
  return f32_dwconv2d_c8_scratch_floats(g) <= kMaxRuleScratchFloats;
}

bool depthwise_chw_supported(const DwConv2dGeometry &g) {
  return g.kh >= 1 && g.kw >= 1 && g.kh <= kMaxKernel && g.kw <= kMaxKernel &&
         (g.stride_w == 1 || g.stride_w == 2) && g.stride_h >= 1 && g.dil_h >= 1 && g.dil_w >= 1 &&
         g.pad_t >= 0 && g.pad_l >= 0 && g.in_h >= 1 && g.in_w >= 1 &&
         f32_dwconv2d_chw_scratch_floats(g) <= kMaxScratchFloats;
}

const char *depthwise_chw(const DwConv2dUkernelInfo &isa_kernel, const DepthwiseChwArgs &a,
                          const FusedEpilogue &fused, F32GemmEpilogueFn epilogue, int threads,
                          DwConvAlgo algo) {
  const DwConv2dGeometry &g = a.geometry;
  const DwConv2dUkernelInfo &kernel = dwconv2d_ukernel_for_plane(isa_kernel, g);
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
  if (algo == DwConvAlgo::kAuto) algo = dwconv_algo_from_env();
  if (algo == DwConvAlgo::kAuto) algo = use_dwconv2d_c8(g) ? DwConvAlgo::kC8 : DwConvAlgo::kPlane;
  const int64_t lanes = kernel.block_channels;
  const int64_t c8_floats = kernel.c8 ? kernel.c8_scratch_floats(g, lanes) : 0;
  // Channel blocks per image for the channel-blocked kernel; the channels past the last whole
  // block take a partial block where the kernel has them, else the plane kernel.
  const bool blocked = algo == DwConvAlgo::kC8 && kernel.c8 && multiplier == 1 &&
                       kernel.c8_supported(g) && c8_floats <= kMaxScratchFloats;
  const int64_t blocks = !blocked                ? 0
                         : kernel.partial_blocks ? (a.out_c + lanes - 1) / lanes
                                                 : a.out_c / lanes;
  // Bands of output rows per block, so that a few blocks still feed every thread (a band
  // re-transposes the KH - stride_h input rows it shares with the band above).
  int64_t bands = 1;
  if (blocks > 0 && threads > 1 && a.batch * blocks < 4 * threads)
    bands = std::min(g.out_h, (4 * threads + a.batch * blocks - 1) / (a.batch * blocks));
  const int64_t band_rows = (g.out_h + bands - 1) / bands;
  bands = (g.out_h + band_rows - 1) / band_rows;
  const int64_t c8_tasks = a.batch * blocks * bands;
  const int64_t plane_channels = std::max<int64_t>(0, a.out_c - lanes * blocks);  // per image
  const size_t plane_floats = static_cast<size_t>(f32_dwconv2d_chw_scratch_floats(g));
  auto task = [&](int64_t t, int) {
    if (t < c8_tasks) {
      const int64_t band = t % bands, nb = t / bands;  // nb = n * blocks + block
      const int64_t n = nb / blocks, c0 = (nb % blocks) * lanes;
      DwConv2dC8Block b;
      b.input = a.x + (n * a.in_c + c0) * in_plane;  // multiplier 1: channel c reads plane c
      b.weights = a.w + c0 * g.kh * g.kw;
      b.bias = a.bias ? a.bias + c0 : nullptr;
      b.residual = a.residual ? a.residual + (n * a.out_c + c0) * out_plane : nullptr;
      b.output = a.y + (n * a.out_c + c0) * out_plane;
      b.oh_begin = band * band_rows;
      b.oh_end = std::min(g.out_h, b.oh_begin + band_rows);
      b.out_min = lo;
      b.out_max = hi;
      b.epilogue = row_activation ? epilogue : nullptr;
      b.epilogue_params = &row_ep;
      b.channels = std::min(lanes, a.out_c - c0);
      kernel.c8(g, b, conv_scratch_floats(static_cast<size_t>(c8_floats)));
      return;
    }
    t -= c8_tasks;
    const int64_t n = t / plane_channels, oc = lanes * blocks + t % plane_channels;
    const int64_t plane_index = n * a.out_c + oc;
    DwConv2dPlane p;
    p.input = a.x + (n * a.in_c + oc / multiplier) * in_plane;
    p.weights = a.w + oc * g.kh * g.kw;
    p.bias = a.bias ? a.bias[oc] : 0.0f;
    p.residual = a.residual ? a.residual + plane_index * out_plane : nullptr;
    p.output = a.y + plane_index * out_plane;
    p.out_min = lo;
    p.out_max = hi;
    p.row_epilogue = row_activation ? epilogue : nullptr;
    p.row_epilogue_params = &row_ep;
    kernel.plane(g, p, conv_scratch_floats(plane_floats));
  };
  cpu_thread_pool().parallel_for(c8_tasks + a.batch * plane_channels, threads, task);
  return blocks > 0 ? kernel.c8_name : kernel.name;
}

}  // namespace peregrine::cpu
