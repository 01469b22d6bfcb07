// CPU kernel of Conv (float32, 2-D, NCHW, any stride / pad / dilation / group).
//   depthwise (group == C_in, one input channel per group): the channel-blocked (8 or 16 channels
//     per vector) or per-plane row-buffered micro-kernels (kernels/conv_depthwise_chw.h, chosen by
//     use_dwconv2d_c8()) with the epilogue fused; shapes outside their
//     contract (stride_w > 2, kernels above 16) use direct_depthwise, a direct loop per output
//     plane, the valid output column range precomputed per kernel tap.
//   1x1, stride 1, no padding: a GEMM per (image, group) on the input planes as they are:
//     Y_g(Cout_g, HW) = W_g(Cout_g, Cin_g) * X_g(Cin_g, HW).
//   otherwise: the same GEMM with K = Cin_g * KH * KW, its B the im2col matrix packed on the
//     fly into the GEMM's panels (Im2colPacker), never written out whole; or, for stride-2
//     columns where the GEMM kernel has an indirect variant (AVX-512), f32_gemm_indirect on
//     the input rows split into even and odd columns (StrideTwoConvRows): no im2col at all.
//   grouped (1 < group < C_in) with at most 32 output channels per group, constant weights, where
//     the ISA has the kernel (AVX-512): the direct kernel of kernels/conv_grouped.h, reading W as
//     it is (use_conv2d_grouped(); PEREGRINE_CONV_ALGO=im2col forces the GEMM per group).
//   3x3, stride 1, dilation 1, group 1, constant weights, pads <= 2: Winograd F(4x4, 3x3)
//     (kernels/conv_winograd_f4x3.h) where use_winograd_f4x3() or PEREGRINE_CONV_ALGO says so,
//     else Winograd F(2x2, 3x3) (kernels/conv_winograd_f2x3.h, small maps) where
//     use_winograd_f2x3() or PEREGRINE_CONV_ALGO says so.
// Weights (constant) are packed once per group as the GEMM's A; the bias is the epilogue's
// per-row bias.
// A node at bf16 precision (passes/assign_precision.h) runs every non-depthwise conv with at
// least 14 output channels per group on the bf16 GEMM (gemm/bf16_gemm.h): the input planes
// (1x1), the phase planes of channel pairs (group 1, where the float32 rule would take planes;
// Winograd F(2x2) only on wide 3x3 layers, bf16_phase_planes_beat_winograd), or the im2col
// packer's panels converted while packed, or tap-wise, with bf16 products, its weights packed
// once in bf16. Depthwise convs, which are bound by memory rather than multiply-adds, and
// narrower groups stay float32.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm/bf16_gemm.h"
#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/kernels/conv_depthwise_chw.h"
#include "backends/cpu/kernels/conv_grouped.h"
#include "backends/cpu/kernels/conv_phase_planes.h"
#include "backends/cpu/kernels/conv_scratch.h"
#include "backends/cpu/kernels/conv_winograd_f2x3.h"
#include "backends/cpu/kernels/conv_winograd_f4x3.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"
#include "ops/conv_geometry.h"

namespace peregrine::cpu {

float* conv_scratch_floats(size_t count) {
  struct Buffer {
    float* data = nullptr;
    size_t capacity = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buffer;
  if (count > buffer.capacity) {
    std::free(buffer.data);
    buffer.data =
        static_cast<float*>(std::aligned_alloc(64, (count * sizeof(float) + 63) / 64 * 64));
    if (buffer.data == nullptr) throw std::bad_alloc();
    buffer.capacity = count;
  }
  return buffer.data;
}

namespace {

struct Conv2dShape {
  int64_t batch, in_c, in_h, in_w;
  int64_t out_c, out_h, out_w;
  int64_t kh, kw, group;
  int64_t stride_h, stride_w, dil_h, dil_w, pad_t, pad_l;
};

// Implicit im2col: B(K, OH * OW) of one group of one image, row r = (ci, ki, kj), column q =
// output pixel q, element = the input under tap (ki, kj) of pixel q (0 in the padding), packed
// straight into the GEMM's panels. The block's columns split into runs that share a panel and an
// output row; a run whose taps all land inside the input row is one contiguous (stride 1) or
// strided copy, the rest check each tap. Rows are packed one after another across all panels, so
// the input is read as a few sequential streams rather than kc rows at once.
class Im2colPacker : public BPanelPacker {
 public:
  Im2colPacker(const float* x_group, const Conv2dShape& s) : x_(x_group), s_(s) {}

  void pack(int64_t p0, int64_t j0, int64_t kc, int64_t nc, int nr, int64_t panel_stride,
            float* dst) const override {
    // Runs of columns within one panel and one output row: (offset in dst of the run's first
    // element in row 0, length, oh, ow). Kept per thread: no allocation once sizes are seen.
    struct Run {
      int64_t offset, len, oh, ow;
    };
    thread_local std::vector<Run> runs;
    runs.clear();
    for (int64_t jr = 0; jr < nc; jr += nr) {
      const int64_t cols = std::min<int64_t>(nr, nc - jr);
      for (int64_t q = 0; q < cols;) {
        const int64_t pix = j0 + jr + q, oh = pix / s_.out_w, ow = pix % s_.out_w;
        const int64_t len = std::min(cols - q, s_.out_w - ow);
        runs.push_back(Run{(jr / nr) * panel_stride + q, len, oh, ow});
        q += len;
      }
    }
    const F32CopyRowFn copy_row = vector_ukernels().copy_row;
    const int64_t taps = s_.kh * s_.kw, in_plane = s_.in_h * s_.in_w;
    const int64_t last_cols = nc - (nc - 1) / nr * nr;  // columns of the last panel
    float* last_panel = dst + (nc - 1) / nr * panel_stride;
    for (int64_t p = 0; p < kc; ++p) {
      const int64_t r = p0 + p, ci = r / taps, ki = (r / s_.kw) % s_.kh, kj = r % s_.kw;
      const float* plane = x_ + ci * in_plane;
      float* row_dst = dst + p * nr;
      for (const Run& run : runs) {
        float* o = row_dst + run.offset;
        const int64_t ih = run.oh * s_.stride_h - s_.pad_t + ki * s_.dil_h;
        if (ih < 0 || ih >= s_.in_h) {
          std::fill(o, o + run.len, 0.0f);
          continue;
        }
        const float* in_row = plane + ih * s_.in_w;
        const int64_t sw = s_.stride_w;
        const int64_t iw0 = run.ow * sw - s_.pad_l + kj * s_.dil_w;  // tap of column j: iw0 + j sw
        // Columns [lo, hi) read the row; those left and right of them read the padding. Split
        // so the middle takes the vector copies (a run of a row as wide as the panel is a
        // border run for every tap column but the middle ones: element-by-element bounds tests
        // made packing most of a 32x32 conv's time, models/zoo.py's tiny model).
        // x / sw for x >= 0 without a division in the common strides (an idiv per run was a
        // visible share of packing).
        auto over_sw = [sw](int64_t x) { return sw == 1 ? x : sw == 2 ? x >> 1 : x / sw; };
        const int64_t lo = iw0 >= 0 ? 0 : std::min<int64_t>(run.len, over_sw(-iw0 + sw - 1));
        const int64_t last = s_.in_w - 1 - iw0;  // j * sw <= last
        const int64_t hi =
            std::max<int64_t>(lo, last < 0 ? 0 : std::min<int64_t>(run.len, over_sw(last) + 1));
        std::fill(o, o + lo, 0.0f);
        std::fill(o + hi, o + run.len, 0.0f);
        if (hi == lo) continue;  // every tap in the padding
        const float* src = in_row + iw0 + lo * sw;
        float* out = o + lo;
        const int64_t count = hi - lo;
        if (sw == 1 && count == 16) {
          std::memcpy(out, src, 16 * sizeof(float));  // constant size: inlined
        } else if (sw == 1) {
          std::copy(src, src + count, out);
        } else if (sw == 2) {  // even / odd shuffles (3x3 / 2, 1x1 / 2; stems below AVX-512)
          copy_row(src, 2, out, static_cast<size_t>(count));
        } else {
          for (int64_t j = 0; j < count; ++j) out[j] = src[j * sw];
        }
      }
      float* tail = last_panel + p * nr;
      std::fill(tail + last_cols, tail + nr, 0.0f);
    }
  }

 private:
  const float* x_;
  const Conv2dShape& s_;
};

// Where auto takes the indirect GEMM: output rows at least kIndirectConvMinWidth wide, and an
// input split that is small next to the im2col copies it replaces: at most
// kIndirectConvMaxChannels input channels (stems), or kernels of 25+ taps (im2col copies each
// input element ~taps / 4 times, the split once). Measured against im2col (1 thread, Zen 4,
// AVX-512): faster on the 112-wide stems of ResNet-50 (7x7) and MobileNetV2 (3x3) and on YOLO's
// 3 -> 32 stem at 320 wide; slower on its 32 -> 64 and 64 -> 128 3x3 / 2 convs (160 and 80
// wide, 14 and 8 MB of split input); on 3x3 / 2 convs by output width with the input hot in
// cache, faster at 80 and 56, slower at 40 and 28 (a row's last 8-12 columns go one by one,
// where im2col tiles run across rows).
constexpr int64_t kIndirectConvMinWidth = 48;
constexpr int64_t kIndirectConvMaxChannels = 8;
constexpr int64_t kIndirectConvMinTaps = 25;

// B of a column-stride-2 conv for f32_gemm_indirect. The input rows, zero-padded, are split once
// into their even and odd columns; output column ow under tap column kj reads padded column
// 2 ow + kj dw, element ow + (kj dw) / 2 of half (kj dw) % 2. So each tap of an output row is
// one contiguous run of that row's pixels: no im2col copy (a large share of a stride-2 conv's
// time); the split is one pass over the input.
class StrideTwoConvRows : public IndirectB {
 public:
  // Floats of one half row: the last output column's farthest tap, in whole vectors.
  static int64_t half_len(const Conv2dShape& s) {
    return (s.out_w + (s.kw - 1) * s.dil_w / 2 + 15) / 16 * 16;
  }
  // Scratch the halves take: every row of every input channel of the group, and a zero row.
  static int64_t buffer_floats(const Conv2dShape& s, int64_t in_c_g) {
    return (in_c_g * s.in_h * 2 + 1) * half_len(s);
  }

  StrideTwoConvRows(const float* x_group, int64_t in_c_g, const Conv2dShape& s, float* buffer,
                    int threads)
      : s_(s), in_c_(in_c_g), len_(half_len(s)), buffer_(buffer) {
    zero_row_ = buffer + in_c_g * s.in_h * 2 * len_;
    std::fill(zero_row_, zero_row_ + len_, 0.0f);
    const F32CopyRowFn copy_row = vector_ukernels().copy_row;
    auto split = [&](int64_t ci, int) {
      for (int64_t ih = 0; ih < s.in_h; ++ih) {
        const float* src = x_group + (ci * s.in_h + ih) * s.in_w;
        for (int64_t phase = 0; phase < 2; ++phase) {
          // half[c] = src[2c + phase - pad_l] where that is inside the row, else 0.
          float* half = half_row(ci, ih, phase);
          const int64_t lead = s.pad_l - phase, last = s.in_w - 1 + s.pad_l - phase;
          const int64_t first = std::min(len_, lead <= 0 ? 0 : (lead + 1) / 2);
          const int64_t end = std::max(first, std::min(len_, last < 0 ? 0 : last / 2 + 1));
          std::fill(half, half + first, 0.0f);
          if (end > first)
            copy_row(src + 2 * first - lead, 2, half + first, static_cast<size_t>(end - first));
          std::fill(half + end, half + len_, 0.0f);
        }
      }
    };
    cpu_thread_pool().parallel_for(in_c_g, threads, split);
  }

  int64_t rows() const override { return s_.out_h; }
  int64_t row_len() const override { return s_.out_w; }
  void row_pointers(int64_t oh, const float** dst) const override {
    for (int64_t ci = 0; ci < in_c_; ++ci)
      for (int64_t ki = 0; ki < s_.kh; ++ki) {
        const int64_t ih = oh * s_.stride_h - s_.pad_t + ki * s_.dil_h;
        const bool inside = ih >= 0 && ih < s_.in_h;
        for (int64_t kj = 0; kj < s_.kw; ++kj, ++dst) {
          const int64_t col = kj * s_.dil_w;
          *dst = inside ? half_row(ci, ih, col & 1) + (col >> 1) : zero_row_;
        }
      }
  }

 private:
  float* half_row(int64_t ci, int64_t ih, int64_t phase) const {
    return buffer_ + ((ci * s_.in_h + ih) * 2 + phase) * len_;
  }

  const Conv2dShape& s_;
  int64_t in_c_, len_;
  float* buffer_;
  float* zero_row_;
};

// Direct depthwise conv: output channel oc reads input channel oc / multiplier.
void direct_depthwise(const float* x, const float* w, const float* bias, float* y,
                      const Conv2dShape& s, int threads) {
  const int64_t multiplier = s.out_c / s.in_c;
  const int64_t out_plane = s.out_h * s.out_w, in_plane = s.in_h * s.in_w;
  auto plane_task = [&](int64_t t, int) {
    const int64_t n = t / s.out_c, oc = t % s.out_c;
    const float* in = x + (n * s.in_c + oc / multiplier) * in_plane;
    const float* wk = w + oc * s.kh * s.kw;  // (KH, KW)
    float* out = y + t * out_plane;          // (OH, OW)
    std::fill(out, out + out_plane, bias ? bias[oc] : 0.0f);
    for (int64_t kj = 0; kj < s.kw; ++kj) {
      // Output columns whose tap kj lands inside the row: 0 <= ow * sw - pl + kj * dw < W.
      const int64_t off = kj * s.dil_w - s.pad_l;
      int64_t ow_lo = off >= 0 ? 0 : (-off + s.stride_w - 1) / s.stride_w;
      int64_t ow_hi = s.in_w - 1 - off < 0 ? 0 : (s.in_w - 1 - off) / s.stride_w + 1;
      ow_lo = std::min(ow_lo, s.out_w);
      ow_hi = std::min(ow_hi, s.out_w);
      for (int64_t ki = 0; ki < s.kh; ++ki) {
        const float wv = wk[ki * s.kw + kj];
        for (int64_t oh = 0; oh < s.out_h; ++oh) {
          const int64_t ih = oh * s.stride_h - s.pad_t + ki * s.dil_h;
          if (ih < 0 || ih >= s.in_h) continue;
          const float* in_row = in + ih * s.in_w + off;
          float* out_row = out + oh * s.out_w;
          if (s.stride_w == 1) {
            for (int64_t ow = ow_lo; ow < ow_hi; ++ow) out_row[ow] += wv * in_row[ow];
          } else {
            for (int64_t ow = ow_lo; ow < ow_hi; ++ow) out_row[ow] += wv * in_row[ow * s.stride_w];
          }
        }
      }
    }
  };
  cpu_thread_pool().parallel_for(s.batch * s.out_c, threads, plane_task);
}

// The share of an im2col conv's multiply-adds that read inside the input, counted per tap as
// the output rows it reads in times the output columns it reads in (stride 1).
double tapwise_useful_fraction(const Conv2dShape& s) {
  int64_t useful = 0;
  for (int64_t ky = 0; ky < s.kh; ++ky) {
    const int64_t oy = ky * s.dil_h - s.pad_t;
    const int64_t rows = std::max<int64_t>(
        0, std::min<int64_t>(s.out_h, s.in_h - oy) - std::max<int64_t>(0, -oy));
    for (int64_t kx = 0; kx < s.kw; ++kx) {
      const int64_t ox = kx * s.dil_w - s.pad_l;
      const int64_t cols = std::max<int64_t>(
          0, std::min<int64_t>(s.out_w, s.in_w - ox) - std::max<int64_t>(0, -ox));
      useful += rows * cols;
    }
  }
  return static_cast<double>(useful) /
         static_cast<double>(std::max<int64_t>(1, s.kh * s.kw * s.out_h * s.out_w));
}

// Tap-wise convolution pays where at most this share of im2col's work is useful: it computes
// whole output rows per tap (columns that read padding included) and copies the input once per
// kernel column. Rule measured on DeepLabV3's ASPP convs (bench/real_models).
constexpr double kTapwiseMaxUsefulFraction = 0.75;

// Winograd saves multiply-adds in proportion to in_c * out_c per tile and pays its transforms
// in proportion to in_c + out_c per tile, so against the phase-plane GEMM (no transforms, no
// im2col) it wins only where h = in_c out_c / (in_c + out_c) is large for the map: F(4x4) where
// h * sqrt(tiles per image) >= 185, F(2x2) where h >= 40. Rule fitted on the 3x3 sweep of
// bench/kernels/conv_bench.cc (Sweep/*: 32-512 channels, 7x7 to 112x112 maps).
// F(4x4) also needs kWinogradMinOutChannels output channels: its 36 GEMMs per block of tiles
// have out_c rows, and with fewer the register tiles run part-empty while the transforms cost
// the same (every out_c = 32 shape of the conv_bench, Sweep/3x3_*to32_* and YOLO's 32to32,
// ran slower on Winograd than on the phase planes, at 1 and 2 threads), and kWinogradMinInChannels
// input channels, the K of those GEMMs: with 32, each tile's few k steps leave its loads and
// stores of C and the transforms dominant (every in_c = 32 shape of the conv_bench,
// Sweep/3x3_32to*_* and InceptionV3/3x3_32to64_147x147, ran as fast or faster on the planes),
// while with 48 F(4x4) still wins (Sweep/3x3_48to64_28x28, EfficientNetV2-S's 48 -> 192 convs
// in bench/compare.py).
constexpr int64_t kWinogradMinOutChannels = 64;
constexpr int64_t kWinogradMinInChannels = 48;

// Spatial convs of fewer products per output stay float32 at bf16 (ConvKernel's constructor).
constexpr int64_t kBf16MinDepth = 32;

// At bf16 the phase planes (their B converted once per run, K in pairs of channels) beat
// Winograd F(2x2) but where the channels are many for the map: h >= kBf16WinogradMinH on maps
// of kBf16WinogradMinMap and up (smaller maps leave F(2x2)'s tiles part-empty). Rule from the
// bf16 variants of bench/kernels/conv_bench.cc: ResNet50 layer3, YOLO's 256to256 and VGG16
// on Winograd, every other ResNet50, YOLO, Sweep and Small shape on the planes.
constexpr double kBf16WinogradMinH = 110.0;
constexpr int64_t kBf16WinogradMinMap = 14;

bool bf16_phase_planes_beat_winograd(const WinogradConvShape& s) {
  const double h = static_cast<double>(s.in_c) * static_cast<double>(s.out_c) /
                   static_cast<double>(s.in_c + s.out_c);
  return h < kBf16WinogradMinH || std::min(s.out_h, s.out_w) < kBf16WinogradMinMap;
}

bool phase_planes_beat_winograd(const WinogradConvShape& s, int64_t tile) {
  const double h = static_cast<double>(s.in_c) * static_cast<double>(s.out_c) /
                   static_cast<double>(s.in_c + s.out_c);
  if (tile == WinogradF2x3Conv::kTile) return h < 40.0;
  if (s.out_c < kWinogradMinOutChannels || s.in_c < kWinogradMinInChannels) return true;
  const int64_t tiles = ((s.out_h + tile - 1) / tile) * ((s.out_w + tile - 1) / tile);
  return h * std::sqrt(static_cast<double>(tiles)) < 185.0;
}

class ConvKernel : public PreparedKernel {
 public:
  // unit_steps: strides and dilations are all 1 (a Winograd candidate).
  // bf16: the bf16 GEMM for a node at bf16 precision, else nullptr.
  ConvKernel(const GemmKernelInfo& gemm, const Bf16GemmKernelInfo* bf16, int64_t group,
             const Tensor* constant_w, const FusedEpilogue& fused, ConvAlgoChoice algo,
             bool unit_steps)
      : gemm_(gemm), bf16_(bf16), fused_(fused), group_(group), algo_(algo) {
    // The Winograd weights (F(4x4): 4x the 3x3 weights, F(2x2): 16/9x) are built on the first
    // run that chooses that algorithm, so layers the rule leaves on im2col never hold them.
    if (constant_w && constant_w->rank() == 4 && group == 1 && constant_w->dim(2) == 3 &&
        constant_w->dim(3) == 3 && unit_steps && algo != ConvAlgoChoice::kIm2col)
      winograd_weights_ = *constant_w;
    // At bf16, convs with fewer output channels per group than the bf16 tile's rows stay
    // float32: converting each input element would feed only those few rows (RegNetY's 8-wide
    // groups were slower at bf16 than at float32, bench/real_models regnet_y_400mf). So do
    // spatial convs of fewer than kBf16MinDepth products per output (3-channel 3x3 stems): bf16
    // halves their few k steps while the input's conversion and C's traffic stay
    // (yolo_style_640's 640x640 stem ran slower at bf16; 1x1 convs of 16 channels still gain).
    const bool shallow =
        constant_w && constant_w->rank() == 4 && constant_w->dim(2) * constant_w->dim(3) > 1 &&
        constant_w->dim(1) * constant_w->dim(2) * constant_w->dim(3) < kBf16MinDepth;
    if (bf16 && constant_w && constant_w->rank() == 4 && constant_w->dim(0) % group == 0 &&
        !(constant_w->dim(1) == 1 && group > 1) && constant_w->dim(0) / group >= bf16->mr &&
        !shallow) {
      // The float32 original stays for fallbacks (reads_constant_data).
      const int64_t out_c_group = constant_w->dim(0) / group;
      const int64_t k = constant_w->dim(1) * constant_w->dim(2) * constant_w->dim(3);
      for (int64_t g = 0; g < group; ++g)
        packed_w_bf16_.push_back(Bf16PackedMatrix::pack_a(
            *bf16, MatrixView{constant_w->data<float>() + g * out_c_group * k, k, 1},
            out_c_group, k));
      return;
    }
    if (constant_w && constant_w->rank() == 4 && constant_w->dim(0) % group == 0) {
      const int64_t out_c = constant_w->dim(0), out_c_group = out_c / group;
      const int64_t k = constant_w->dim(1) * constant_w->dim(2) * constant_w->dim(3);
      const bool depthwise = constant_w->dim(1) == 1 && group > 1;  // packing unused
      // Narrow groups run on the direct kernel, which reads W as it is; packing is kept for
      // the rest (and a shape the direct kernel refuses runs the GEMM on W unpacked).
      if (group > 1 && !depthwise && out_c_group <= kConv2dGroupedMaxOutChannels)
        grouped_ = f32_conv2d_grouped_ukernel_for(gemm.isa);
      if (!depthwise && !grouped_) {
        for (int64_t g = 0; g < group; ++g)
          packed_w_.push_back(PackedMatrix::pack_a(
              gemm, MatrixView{constant_w->data<float>() + g * out_c_group * k, k, 1}, out_c_group,
              k));
      }
    }
  }

  std::string name() const override {  // the algorithm of the last run
    if (const char* dw = last_run_depthwise_.load()) return std::string("cpu/conv-") + dw;
    if (last_run_winograd_ && winograd_)
      return std::string("cpu/conv-winograd_f4x3-") + winograd_->gemm_name();
    if (last_run_winograd_f2x3_ && winograd_f2x3_)
      return std::string("cpu/conv-winograd_f2x3-") + winograd_f2x3_->gemm_name();
    if (!packed_w_bf16_.empty())
      return std::string(last_run_tapwise_  ? "cpu/conv-tapwise-"
                         : last_run_planes_ ? "cpu/conv-phase_planes-"
                                            : "cpu/conv-") +
             packed_w_bf16_[0].kernel()->name;
    if (last_run_grouped_) return "cpu/conv-f32_conv2d_grouped__avx512";  // the only ISA with one
    if (last_run_planes_) return std::string("cpu/conv-phase_planes-") + gemm_.name;
    if (last_run_indirect_) return std::string("cpu/conv-indirect-") + gemm_.name;
    if (last_run_tapwise_) return std::string("cpu/conv-tapwise-") + gemm_.name;
    return std::string("cpu/conv-") + gemm_.name;
  }

  // The packed A per group is all a GEMM conv reads of constant weights (a fallback unpacks
  // them), unless it may take Winograd, which builds its weights from the original.
  bool reads_constant_data(size_t input) const override {
    return input != 1 || packed_w_.empty() || winograd_weights_.rank() == 4;
  }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (x.dtype() != DType::kFloat32 || w.dtype() != DType::kFloat32 || x.rank() != 4 ||
        w.rank() != 4 || (bias && bias->dtype() != DType::kFloat32))
      return run_reference_on_w(ctx);
    if (w.dim(1) * group_ != x.dim(1) || w.dim(0) % group_ != 0)
      return ctx.error("input channels do not match the weight and group");
    if (bias && bias->numel() != w.dim(0)) return ctx.error("bias has the wrong size");
    // The window of the last run's sizes: resolving it parses the node's attributes (string-keyed
    // lookups, six vectors), which is too slow to repeat on every run of a small model.
    const std::array<int64_t, 4> sizes = {x.dim(2), x.dim(3), w.dim(2), w.dim(3)};
    if (!window_ || window_sizes_ != sizes) {
      PG_ASSIGN_OR_RETURN(WindowGeometry resolved, resolve_window(ctx.node(), {x.dim(2), x.dim(3)},
                                                                  {w.dim(2), w.dim(3)}, false));
      window_ = std::move(resolved);
      window_sizes_ = sizes;
    }
    const WindowGeometry& g = *window_;
    const Conv2dShape s{x.dim(0),       x.dim(1),       x.dim(2),        x.dim(3),
                        w.dim(0),       g.output[0],    g.output[1],     w.dim(2),
                        w.dim(3),       group_,         g.strides[0],    g.strides[1],
                        g.dilations[0], g.dilations[1], g.pads_begin[0], g.pads_begin[1]};
    Tensor& y = ctx.output_for_overwrite(0);
    if (y.numel() == 0) return Status::ok();
    bool broadcast_z = false;
    const Tensor* z = residual_input(ctx, fused_, y, &broadcast_z);
    if (broadcast_z) return run_reference_on_w(ctx);
    const ConvIo io{x.data<float>(), w.data<float>(), bias ? bias->data<float>() : nullptr,
                    z ? z->data<float>() : nullptr,  // (N, Cout, OH, OW) like y
                    y.data<float>()};
    const int threads = ctx.num_threads();
    if (group_ > 1 && group_ == s.in_c && w.dim(1) == 1) {
      run_depthwise(s, io, threads);
      return Status::ok();
    }
    last_run_depthwise_ = nullptr;
    if (run_grouped_direct(s, io, threads)) return Status::ok();
    const int64_t out_c_g = s.out_c / group_, k = s.in_c / group_ * s.kh * s.kw;
    const bool use_packed = static_cast<int64_t>(packed_w_.size()) == group_ &&
                            packed_w_[0].rows() == out_c_g && packed_w_[0].cols() == k;
    const bool planes_ok =
        gemm_.indirect_ukernel != nullptr && use_packed && !is_pointwise(s, g) && k > 0;
    if (run_winograd_if_chosen(s, g, io, planes_ok, threads)) return Status::ok();
    if (!packed_w_bf16_.empty()) {
      last_run_tapwise_ = tapwise_applies(s) && packed_w_bf16_.size() == 1;
      if (last_run_tapwise_) {
        run_tapwise(io.w, io.x, io.b, io.z, io.y, s, threads);
        return Status::ok();
      }
      return run_bf16(ctx, io.x, io.w, io.b, io.z, io.y, s, g);
    }
    if (!use_packed && !packed_w_.empty()) return run_reference_on_w(ctx);
    last_run_tapwise_ = use_packed && tapwise_applies(s);
    if (last_run_tapwise_) {
      last_run_indirect_ = false;
      last_run_planes_ = false;
      run_tapwise(nullptr, io.x, io.b, io.z, io.y, s, threads);
      return Status::ok();
    }
    run_gemm_groups(s, g, io, use_packed, planes_ok, threads);
    return Status::ok();
  }

 private:
  // The buffers of one run: input, weights, bias and residual (nullptr when absent), output.
  struct ConvIo {
    const float* x;
    const float* w;
    const float* b;
    const float* z;
    float* y;
  };

  // Depthwise: the row-buffered kernel with the epilogue fused per row where it applies, else
  // the direct kernel followed by one epilogue pass over the output.
  void run_depthwise(const Conv2dShape& s, const ConvIo& io, int threads) {
    const DwConv2dGeometry dg{s.in_h,     s.in_w,     s.out_h, s.out_w, s.kh,    s.kw,
                              s.stride_h, s.stride_w, s.dil_h, s.dil_w, s.pad_t, s.pad_l};
    if (depthwise_chw_supported(dg)) {
      last_run_depthwise_ = depthwise_chw(
          f32_dwconv2d_chw_ukernel(),
          DepthwiseChwArgs{io.x, io.w, io.b, io.z, io.y, s.batch, s.in_c, s.out_c, dg}, fused_,
          gemm_.epilogue, threads);
      return;
    }
    last_run_depthwise_ = "direct_depthwise";
    direct_depthwise(io.x, io.w, io.b, io.y, s, threads);
    if (!io.z && fused_.activation == Activation::kNone) return;
    // Residual and activation over the whole output, one row per plane.
    const int64_t planes = s.batch * s.out_c, plane = s.out_h * s.out_w;
    GemmEpilogue ep = activation_epilogue(fused_);
    ep.residual = io.z;
    ep.ldr = plane;
    cpu_thread_pool().parallel_for(planes, threads, [&](int64_t t, int) {
      gemm_.epilogue(io.y + t * plane, static_cast<size_t>(plane), 1, static_cast<size_t>(plane),
                     static_cast<size_t>(t), 0, ep);
    });
  }

  // Narrow groups on the direct grouped kernel, where it was chosen at preparation and takes
  // the shape; false leaves the conv to the GEMM paths.
  bool run_grouped_direct(const Conv2dShape& s, const ConvIo& io, int threads) {
    last_run_grouped_ = false;
    if (!grouped_ || !packed_w_bf16_.empty() || algo_ == ConvAlgoChoice::kIm2col) return false;
    const GroupedConv2dGeometry gg{
        s.in_c / group_, s.out_c / group_, s.in_h,  s.in_w,  s.out_h, s.out_w, s.kh, s.kw,
        s.stride_h,      s.stride_w,       s.dil_h, s.dil_w, s.pad_t, s.pad_l};
    if (!use_conv2d_grouped(gg)) return false;
    last_run_grouped_ = true;
    conv2d_grouped(grouped_, GroupedConvArgs{io.x, io.w, io.b, io.z, io.y, s.batch, group_, gg},
                   fused_, gemm_.epilogue, threads);
    return true;
  }

  // Winograd F(4x4) or F(2x2) where the algorithm override or the rules above pick it; its
  // transformed weights are built on the first run that takes it. False: neither applies.
  bool run_winograd_if_chosen(const Conv2dShape& s, const WindowGeometry& g, const ConvIo& io,
                              bool planes_ok, int threads) {
    const WinogradConvShape ws{s.batch, s.in_c,  s.in_h,  s.in_w, s.out_c,
                               s.out_h, s.out_w, s.pad_t, s.pad_l};
    const bool winograd_ok = winograd_weights_.rank() == 4 && s.in_c > 0 && s.stride_h == 1 &&
                             s.stride_w == 1 && s.dil_h == 1 && s.dil_w == 1 && s.kh == 3 &&
                             s.kw == 3 && winograd_weights_.dim(0) == s.out_c &&
                             winograd_weights_.dim(1) == s.in_c &&
                             std::max({s.pad_t, s.pad_l, g.pads_end[0], g.pads_end[1]}) <= 2;
    const bool is_auto = algo_ == ConvAlgoChoice::kAuto;
    // At bf16 the rule never picks F(4x4): U and V rounded to bf16 after its transforms
    // (coefficients up to 5) leave a layer about 10x the error of the direct bf16 conv, where
    // F(2x2)'s is 2x (CpuBf16Conv.WinogradWithinBf16Error); F(2x2) takes the layers F(4x4)
    // would.
    last_run_winograd_ =
        winograd_ok &&
        (algo_ == ConvAlgoChoice::kWinograd ||
         (is_auto && !bf16_ && use_winograd_f4x3(ws) &&
          !(planes_ok && phase_planes_beat_winograd(ws, WinogradF4x3Conv::kTile))));
    const bool bf16_planes_ok =
        bf16_ && bf16_->indirect_ukernel != nullptr && !packed_w_bf16_.empty() && group_ == 1;
    last_run_winograd_f2x3_ =
        winograd_ok && !last_run_winograd_ &&
        (algo_ == ConvAlgoChoice::kWinogradF2x3 ||
         (is_auto && (use_winograd_f2x3(ws) || (bf16_ && use_winograd_f4x3(ws))) &&
          !(planes_ok && !bf16_ && phase_planes_beat_winograd(ws, WinogradF2x3Conv::kTile)) &&
          !(bf16_planes_ok && bf16_phase_planes_beat_winograd(ws))));
    GemmEpilogue ep = activation_epilogue(fused_);
    ep.residual = io.z;
    if (last_run_winograd_f2x3_) {
      if (!winograd_f2x3_)
        winograd_f2x3_ = std::make_unique<WinogradF2x3Conv>(
            winograd_gemm(WinogradF2x3Conv::kTile, ws), winograd_f2x3_ukernels(),
            winograd_weights_.data<float>(), s.out_c, s.in_c, bf16_);
      winograd_f2x3_->run(io.x, ws, io.b, ep, io.y, threads);
      return true;
    }
    if (last_run_winograd_) {
      if (!winograd_)
        winograd_ = std::make_unique<WinogradF4x3Conv>(
            winograd_gemm(WinogradF4x3Conv::kTile, ws), winograd_f4x3_ukernels(),
            winograd_weights_.data<float>(), s.out_c, s.in_c, bf16_);
      winograd_->run(io.x, ws, io.b, ep, io.y, threads);
      return true;
    }
    return false;
  }

  // The float32 GEMM paths, one GEMM per (image, group): 1x1 convs on the input planes, the
  // indirect stride-2 rows, the phase planes, or im2col.
  void run_gemm_groups(const Conv2dShape& s, const WindowGeometry& g, const ConvIo& io,
                       bool use_packed, bool planes_ok, int threads) {
    const int64_t in_c_g = s.in_c / group_, out_c_g = s.out_c / group_;
    const int64_t k = in_c_g * s.kh * s.kw, pixels = s.out_h * s.out_w;
    const int64_t in_plane = s.in_h * s.in_w;
    const bool pointwise = is_pointwise(s, g);
    const PhasePlanesConvShape planes{in_c_g,  s.in_h,  s.in_w,  out_c_g,    s.out_h,
                                      s.out_w, s.kh,    s.kw,    s.stride_h, s.stride_w,
                                      s.dil_h, s.dil_w, s.pad_t, s.pad_l};
    // The indirect GEMM writes Y by output rows; the phase planes write a padded grid and
    // compact it, which costs more than it saves where K is small (stems).
    last_run_indirect_ =
        gemm_.indirect_ukernel != nullptr && use_packed && s.stride_w == 2 && k > 0 &&
        (algo_ == ConvAlgoChoice::kIndirect ||
         (algo_ == ConvAlgoChoice::kAuto && s.out_w >= kIndirectConvMinWidth &&
          (in_c_g <= kIndirectConvMaxChannels || s.kh * s.kw >= kIndirectConvMinTaps)));
    last_run_planes_ = !last_run_indirect_ && planes_ok &&
                       (algo_ == ConvAlgoChoice::kPhasePlanes ||
                        (algo_ == ConvAlgoChoice::kAuto && use_conv_phase_planes(planes)));
    for (int64_t n = 0; n < s.batch; ++n) {
      for (int64_t grp = 0; grp < group_; ++grp) {
        const float* x_group = io.x + (n * s.in_c + grp * in_c_g) * in_plane;
        float* y_group = io.y + (n * s.out_c + grp * out_c_g) * pixels;  // (Cout_g, OH * OW)
        const GemmOperand a = use_packed ? GemmOperand::of(packed_w_[static_cast<size_t>(grp)])
                                         : GemmOperand::of(io.w + grp * out_c_g * k, k, 1);
        const int64_t y_offset = (n * s.out_c + grp * out_c_g) * pixels;
        const GemmEpilogue ep = output_epilogue(io.b, io.z, y_offset, grp * out_c_g, pixels);
        if (pointwise) {
          f32_gemm(gemm_, out_c_g, pixels, k, a, GemmOperand::of(x_group, in_plane, 1), y_group,
                   pixels, 1.0f, 0.0f, ep, threads);
        } else if (last_run_planes_) {
          float* scratch =
              conv_scratch_floats(static_cast<size_t>(phase_planes_scratch_floats(planes)));
          conv_phase_planes(gemm_, packed_w_[static_cast<size_t>(grp)], x_group, planes, y_group,
                            ep, scratch, threads);
        } else if (last_run_indirect_) {
          float* buffer =
              conv_scratch_floats(static_cast<size_t>(StrideTwoConvRows::buffer_floats(s, in_c_g)));
          const StrideTwoConvRows rows(x_group, in_c_g, s, buffer, threads);
          f32_gemm_indirect(gemm_, out_c_g, k, packed_w_[static_cast<size_t>(grp)], rows, y_group,
                            pixels, ep, threads);
        } else {
          const Im2colPacker im2col(x_group, s);
          f32_gemm(gemm_, out_c_g, pixels, k, a, GemmOperand::of(im2col), y_group, pixels, 1.0f,
                   0.0f, ep, threads);
        }
      }
    }
  }

  // Tap-wise convolution for stride-1 group-1 convs whose taps fall largely in the padding
  // (dilated convs on small maps: DeepLab's ASPP): the conv is the sum over taps of a 1x1 conv,
  // W_tap (Cout, Cin) times the input shifted by the tap, over only the output rows where that
  // tap reads inside the input. Per kernel column kx the input is copied once with its columns
  // shifted (zeros where they leave the input), so each tap's B is contiguous rows of that copy;
  // taps that read only padding are skipped. The first tap that covers every output row writes
  // C (beta 0), the others accumulate; bias, residual and activation are one pass at the end.
  // At bf16 the taps' products run on the bf16 GEMM, their weights taken from `pw` (the
  // float32 weights, kept at bf16); at float32 `pw` is nullptr and they come from packed_w_.
  bool tapwise_applies(const Conv2dShape& s) const {
    return algo_ == ConvAlgoChoice::kAuto && group_ == 1 && s.stride_h == 1 && s.stride_w == 1 &&
           s.kh * s.kw > 1 && tapwise_useful_fraction(s) <= kTapwiseMaxUsefulFraction;
  }

  void run_tapwise(const float* pw, const float* px, const float* pb, const float* pz, float* py,
                   const Conv2dShape& s, int threads) {
    const int64_t taps = s.kh * s.kw, in_c = s.in_c, out_c = s.out_c;
    const int64_t pixels = s.out_h * s.out_w, in_plane = s.in_h * s.in_w;
    const size_t built = bf16_ ? tap_w_bf16_.size() : tap_w_.size();
    if (static_cast<int64_t>(built) != taps) {  // W_tap (Cout, Cin)
      std::vector<float> unpacked;
      if (!bf16_) {
        unpacked.resize(static_cast<size_t>(out_c * in_c * taps));
        packed_w_[0].unpack(unpacked.data());  // (Cout, Cin * KH * KW)
        pw = unpacked.data();
      }
      tap_w_.clear();
      tap_w_bf16_.clear();
      for (int64_t t = 0; t < taps; ++t) {
        const MatrixView tap{pw + t, in_c * taps, taps};
        if (bf16_)
          tap_w_bf16_.push_back(Bf16PackedMatrix::pack_a(*bf16_, tap, out_c, in_c));
        else
          tap_w_.push_back(PackedMatrix::pack_a(gemm_, tap, out_c, in_c));
      }
    }
    const int64_t shifted_plane = s.in_h * s.out_w;
    float* shifted = conv_scratch_floats(static_cast<size_t>(in_c * shifted_plane));
    for (int64_t n = 0; n < s.batch; ++n) {
      const float* x = px + n * in_c * in_plane;
      float* y = py + n * out_c * pixels;
      // Rows [r0, r1) of tap row ky read the input; a kx is live when some column does.
      auto rows_of = [&](int64_t ky, int64_t* r0, int64_t* r1) {
        const int64_t oy = ky * s.dil_h - s.pad_t;
        *r0 = std::max<int64_t>(0, -oy);
        *r1 = std::min<int64_t>(s.out_h, s.in_h - oy);
      };
      // The first full-coverage tap initializes C; without one, C starts at zero.
      int64_t first = -1;
      for (int64_t t = 0; t < taps && first < 0; ++t) {
        int64_t r0, r1;
        rows_of(t / s.kw, &r0, &r1);
        const int64_t ox = (t % s.kw) * s.dil_w - s.pad_l;
        if (r0 == 0 && r1 == s.out_h && ox < s.in_w && ox + s.out_w > 0) first = t;
      }
      if (first < 0) std::fill(y, y + out_c * pixels, 0.0f);
      for (int pass = 0; pass < 2; ++pass) {  // the first tap's column, then the rest
        for (int64_t kx = 0; kx < s.kw; ++kx) {
          if ((pass == 0) != (first >= 0 && kx == first % s.kw)) continue;
          const int64_t ox = kx * s.dil_w - s.pad_l;
          const int64_t q0 = std::clamp<int64_t>(-ox, 0, s.out_w);
          const int64_t q1 = std::clamp<int64_t>(s.in_w - ox, q0, s.out_w);
          if (q0 >= q1) continue;  // this column of taps reads only padding
          // shifted (Cin, in_h, OW): input column q + ox, zero outside.
          cpu_thread_pool().parallel_for(in_c, threads, [&](int64_t c, int) {
            for (int64_t iy = 0; iy < s.in_h; ++iy) {
              const float* src = x + c * in_plane + iy * s.in_w;
              float* dst = shifted + c * shifted_plane + iy * s.out_w;
              std::fill(dst, dst + q0, 0.0f);
              std::copy(src + q0 + ox, src + q1 + ox, dst + q0);
              std::fill(dst + q1, dst + s.out_w, 0.0f);
            }
          });
          // The first tap of the pass-0 column first, so C is written before it is read.
          for (int64_t ky0 = 0; ky0 < s.kh; ++ky0) {
            const int64_t ky = pass == 0 ? (first / s.kw + ky0) % s.kh : ky0;
            const int64_t t = ky * s.kw + kx;
            int64_t r0, r1;
            rows_of(ky, &r0, &r1);
            if (r0 >= r1) continue;
            const int64_t oy = ky * s.dil_h - s.pad_t;
            const float* b = shifted + (r0 + oy) * s.out_w;
            const float beta = t == first ? 0.0f : 1.0f;
            if (bf16_)
              bf16_gemm(*bf16_, out_c, (r1 - r0) * s.out_w, in_c,
                        Bf16GemmOperand::of(tap_w_bf16_[static_cast<size_t>(t)]),
                        Bf16GemmOperand::of(b, shifted_plane, 1), y + r0 * s.out_w, pixels, 1.0f,
                        beta, GemmEpilogue{}, gemm_.epilogue, threads);
            else
              f32_gemm(gemm_, out_c, (r1 - r0) * s.out_w, in_c,
                       GemmOperand::of(tap_w_[static_cast<size_t>(t)]),
                       GemmOperand::of(b, shifted_plane, 1), y + r0 * s.out_w, pixels, 1.0f, beta,
                       GemmEpilogue{}, threads);
          }
        }
      }
      const GemmEpilogue ep = output_epilogue(pb, pz, n * out_c * pixels, 0, pixels);
      if (ep.empty()) continue;
      cpu_thread_pool().parallel_for(out_c, threads, [&](int64_t o, int) {
        gemm_.epilogue(y + o * pixels, static_cast<size_t>(pixels), 1,
                       static_cast<size_t>(pixels), static_cast<size_t>(o), 0, ep);
      });
    }
  }

  // A 1x1 conv reading its input planes as they are: stride 1, no padding.
  static bool is_pointwise(const Conv2dShape& s, const WindowGeometry& g) {
    return s.kh == 1 && s.kw == 1 && s.stride_h == 1 && s.stride_w == 1 && s.pad_t == 0 &&
           s.pad_l == 0 && g.pads_end[0] == 0 && g.pads_end[1] == 0;
  }

  // The epilogue of the output channels from `first_channel` on, whose (channels, pixels)
  // block starts at element `y_offset` of Y (and of a residual Z): the fused activation, Z's
  // block, the bias of those channels.
  GemmEpilogue output_epilogue(const float* pb, const float* pz, int64_t y_offset,
                               int64_t first_channel, int64_t pixels) const {
    GemmEpilogue ep = activation_epilogue(fused_);
    ep.residual = pz ? pz + y_offset : nullptr;
    ep.ldr = pixels;
    if (pb) {
      ep.bias_kind = GemmEpilogue::Bias::kPerRow;
      ep.bias = pb + first_channel;
    }
    return ep;
  }

  // The f32 GEMM whose packed-B panels Winograd's input transform writes: at bf16 precision
  // the AVX-512 one, whose panels (NR 32, KC 256) the bf16 GEMM converts.
  const GemmKernelInfo& winograd_gemm(int64_t tile, const WinogradConvShape& ws) const {
    if (bf16_)
      if (const GemmKernelInfo* k = f32_gemm_kernel_for(Isa::kAvx512)) return *k;
    return winograd_gemm_kernel(tile, ws);
  }

  // The conv as bf16 GEMMs, one per (image, group): B the input planes (1x1, stride 1, no
  // padding) or the im2col packer's panels.
  Status run_bf16(KernelContext& ctx, const float* px, const float* pw, const float* pb,
                  const float* pz, float* py, const Conv2dShape& s, const WindowGeometry& g) {
    const int64_t in_c_g = s.in_c / group_, out_c_g = s.out_c / group_;
    const int64_t k = in_c_g * s.kh * s.kw, pixels = s.out_h * s.out_w;
    const int64_t in_plane = s.in_h * s.in_w;
    if (static_cast<int64_t>(packed_w_bf16_.size()) != group_ ||
        packed_w_bf16_[0].rows() != out_c_g || packed_w_bf16_[0].cols() != k)
      return run_reference(ctx);  // the float32 weights were kept
    const bool pointwise = is_pointwise(s, g);
    const Bf16GemmKernelInfo& kernel = *packed_w_bf16_[0].kernel();
    // The phase planes as for float32, their B the planes of channel pairs (built once per
    // run, not per K block as the im2col packer's panels are converted), for one group; the
    // reordered weights are packed on the first run that takes them.
    const PhasePlanesConvShape planes{s.in_c,  s.in_h,  s.in_w,  s.out_c,    s.out_h,
                                      s.out_w, s.kh,    s.kw,    s.stride_h, s.stride_w,
                                      s.dil_h, s.dil_w, s.pad_t, s.pad_l};
    last_run_planes_ = group_ == 1 && !pointwise && k > 0 && kernel.indirect_ukernel != nullptr &&
                       (algo_ == ConvAlgoChoice::kPhasePlanes ||
                        (algo_ == ConvAlgoChoice::kAuto && use_conv_phase_planes(planes)));
    if (last_run_planes_) {
      if (planes_w_bf16_.rows() != s.out_c ||
          planes_w_bf16_.cols() != phase_planes_bf16_depth(planes))
        planes_w_bf16_ = pack_phase_planes_bf16_weights(kernel, pw, planes);
      float* scratch =
          conv_scratch_floats(static_cast<size_t>(phase_planes_bf16_scratch_floats(planes)));
      for (int64_t n = 0; n < s.batch; ++n) {
        const int64_t y_offset = n * s.out_c * pixels;
        conv_phase_planes_bf16(kernel, planes_w_bf16_, gemm_.epilogue, px + n * s.in_c * in_plane,
                               planes, py + y_offset, output_epilogue(pb, pz, y_offset, 0, pixels),
                               scratch, ctx.num_threads());
      }
      return Status::ok();
    }
    for (int64_t n = 0; n < s.batch; ++n) {
      for (int64_t grp = 0; grp < group_; ++grp) {
        const float* x_group = px + (n * s.in_c + grp * in_c_g) * in_plane;
        const int64_t y_offset = (n * s.out_c + grp * out_c_g) * pixels;
        const GemmEpilogue ep = output_epilogue(pb, pz, y_offset, grp * out_c_g, pixels);
        const Bf16GemmOperand a = Bf16GemmOperand::of(packed_w_bf16_[static_cast<size_t>(grp)]);
        const Im2colPacker im2col(x_group, s);
        const Bf16GemmOperand b = pointwise ? Bf16GemmOperand::of(x_group, in_plane, 1)
                                            : Bf16GemmOperand::of(im2col);
        bf16_gemm(kernel, out_c_g, pixels, k, a, b, py + y_offset, pixels, 1.0f, 0.0f, ep,
                  gemm_.epilogue, ctx.num_threads());
      }
    }
    return Status::ok();
  }

  // The reference kernel on weights unpacked from packed_w_: the executor may have freed the
  // constant weights this kernel packed. Rare (unusual dtypes or broadcasts), so it may allocate.
  Status run_reference_on_w(KernelContext& ctx) {
    if (packed_w_.empty()) return run_reference(ctx);
    Tensor w = Tensor::zeros(DType::kFloat32, ctx.input(1).shape());  // (Cout, Cin_g, KH, KW)
    const int64_t group_floats = packed_w_[0].rows() * packed_w_[0].cols();
    for (size_t g = 0; g < packed_w_.size(); ++g)
      packed_w_[g].unpack(w.data<float>() + static_cast<int64_t>(g) * group_floats);
    return run_reference_with_input(ctx, 1, std::move(w));
  }

  const GemmKernelInfo& gemm_;
  const Bf16GemmKernelInfo* bf16_;  // at bf16 precision, else nullptr
  FusedEpilogue fused_;
  int64_t group_;
  std::vector<PackedMatrix> packed_w_;  // one (Cout_g, Cin_g * KH * KW) A per group
  Bf16PackedMatrix planes_w_bf16_;      // the bf16 phase planes' A, once they have run
  std::vector<Bf16PackedMatrix> packed_w_bf16_;  // the same in bf16, at bf16 precision
  ConvAlgoChoice algo_;
  Tensor winograd_weights_;                     // 3x3 group-1 constant weights, unless im2col
  std::unique_ptr<WinogradF4x3Conv> winograd_;  // built from them on first use
  std::atomic<bool> last_run_winograd_{false};
  std::unique_ptr<WinogradF2x3Conv> winograd_f2x3_;  // F(2x2): also built on first use
  std::atomic<bool> last_run_winograd_f2x3_{false};
  std::atomic<const char*> last_run_depthwise_{nullptr};  // the depthwise kernel, if it ran one
  std::atomic<bool> last_run_indirect_{false};            // f32_gemm_indirect (stride 2)
  std::atomic<bool> last_run_planes_{false};              // conv_phase_planes
  std::atomic<bool> last_run_tapwise_{false};             // run_tapwise (taps in padding)
  std::atomic<bool> last_run_grouped_{false};             // the direct grouped kernel
  F32Conv2dGroupedFn grouped_ = nullptr;  // narrow groups, where the ISA has the kernel
  std::vector<PackedMatrix> tap_w_;  // tap-wise: one (Cout, Cin) A per tap, built on first use
  std::vector<Bf16PackedMatrix> tap_w_bf16_;  // the same at bf16 precision
  std::optional<WindowGeometry> window_;  // resolved for window_sizes_ (input H, W, kernel H, W)
  std::array<int64_t, 4> window_sizes_{};
};

}  // namespace

Expected<std::unique_ptr<PreparedKernel>> prepare_conv(const ir::Node& node,
                                                       const std::vector<const Tensor*>& constants,
                                                       const FusedEpilogue& fused) {
  ir::AttrView attrs(node);
  PG_ASSIGN_OR_RETURN(int64_t group, attrs.get_int("group", 1));
  if (group < 1) return invalid_model(node.describe() + ": attribute 'group' must be >= 1");
  const Tensor* w = constants.size() > 1 ? constants[1] : nullptr;
  // 1-D and 3-D convs: kernels/conv_nd.cc, by the weights' rank, or for weights computed at run
  // time (wav2vec2's weight-normed positional conv) by the kernel's.
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> kernel_shape, attrs.get_ints("kernel_shape", {}));
  const size_t spatial = w ? static_cast<size_t>(w->rank() - 2) : kernel_shape.size();
  if (spatial == 1 || spatial == 3) return prepare_conv_nd(node, w, fused);
  PG_ASSIGN_OR_RETURN(ConvAlgoChoice algo, conv_algo_from_env());
  PG_RETURN_IF_ERROR(check_dwconv_algo_env());
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> strides, attrs.get_ints("strides", {}));
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, attrs.get_ints("dilations", {}));
  bool unit_steps = true;
  for (int64_t v : strides) unit_steps = unit_steps && v == 1;
  for (int64_t v : dilations) unit_steps = unit_steps && v == 1;
  // The weights are the GEMM's A (Cout / group rows); the output pixels (N) are not known yet.
  const int64_t rows = w && w->rank() == 4 ? w->dim(0) / group : 0;
  const Bf16GemmKernelInfo* bf16 =
      node.precision == Precision::kBFloat16 ? bf16_gemm_kernel() : nullptr;
  return std::unique_ptr<PreparedKernel>(std::make_unique<ConvKernel>(
      f32_gemm_kernel_for_shape(rows, 0), bf16, group, w, fused, algo, unit_steps));
}

}  // namespace peregrine::cpu
