// CPU kernels of the float32 NCHW pools (MaxPool also of uint8 / int8):
//   MaxPool / AveragePool, 2-D, any kernel / stride / pads / dilations / auto_pad / ceil_mode:
//     separable, per (n, c) plane: max and sum over a KH x KW window are a reduction along the
//     row (KW taps) followed by one down the column (KH taps), so a plane costs
//     H * KW + OH * KH pooling-row micro-kernel calls instead of OH * KH * KW. Pass 1 reduces
//     each input row at the output column positions into an (H, OW) scratch (strided reads);
//     pass 2 reduces KH scratch rows into each output row (contiguous). The output columns a
//     tap column covers, [ow_lo, ow_hi), are precomputed per tap column.
//     AveragePool divides by the kernel size (count_include_pad = 1, padding counting as
//     zeros, as the reference does) or by the number of in-bounds taps (rows x columns).
//     A window with no in-bounds tap (pads >= the kernel extent), MaxPool's Indices output,
//     other ranks and dtypes go to the reference.
//     Stride 1, dilation 1 (Inception branch pools, YOLO's SPPF) takes the vector table's
//     one-call-per-plane kernel where the ISA has one (pool_s1: rows, then KW neighbours).
//     2x2 / 2 with every window inside the plane takes the vector table's one-call-per-plane
//     kernel where the ISA has one (both rows combined, then each pair of columns).
//     MaxPool 3x3 / 2 with top / left pads <= 1 (CNN stems) takes the vector table's one-call-per-
//     plane kernel where the ISA has one (vertical max of three rows, then three neighbours at
//     every other column).
//     Planes up to a few dozen columns wide (the pools of an Inception block, a DenseNet
//     transition) take the whole-plane window kernel where the ISA has one: a group of planes
//     as one flat array, the window at every position, then sampled at the windows' origins
//     (none of the per-row calls and tails that dominate on a 7x7 or 14x14 map).
//     8-bit MaxPool (QDQ models' pools, passes/fuse_qdq_max_pool.cc): the window's rows
//     reduced into one padded row, then the taps along it, one micro-kernel call per output row.
//   GlobalAveragePool / GlobalMaxPool, any rank >= 3: one reduction per plane.
// Planes are spread over the thread pool.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/vector_ops.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"
#include "backends/cpu/ukernels/q8_ukernels.h"
#include "ops/conv_geometry.h"

namespace peregrine::cpu {

namespace {

// A task's share of the whole-plane window pool, in input floats: its window values stay in L2
// until they are sampled.
constexpr int64_t kWindowTaskFloats = 16384;
// The widest planes the whole-plane window kernel takes, stride 1 and strided (it computes the
// window at every position, then samples): bench/compare.py on GoogLeNet, Inception-v3 and
// DenseNet-121, per node.
constexpr int64_t kWindowPlanesMaxWidthStride1 = 24;
constexpr int64_t kWindowPlanesMaxWidth = 32;

bool in_onnx_domain(const ir::Node& node) {
  return node.domain.empty() || node.domain == "ai.onnx";
}

// A per-thread, grow-only float buffer (no allocation once sizes have been seen).
float* thread_scratch(size_t count) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < count) buffer.resize(count);
  return buffer.data();
}

class WindowPoolKernel : public PreparedKernel {
 public:
  WindowPoolKernel(bool max, const VectorUkernels& uk) : max_(max), uk_(uk) {}
  std::string name() const override {
    return std::string(max_ ? "cpu/maxpool-" : "cpu/avgpool-") + isa_name(uk_.isa);
  }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const bool eight_bit = x.dtype() == DType::kUInt8 || x.dtype() == DType::kInt8;
    if ((x.dtype() != DType::kFloat32 && !(max_ && eight_bit)) || x.rank() != 4 ||
        (max_ && ctx.wants_output(1)))
      return run_reference(ctx);
    PG_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, ctx.attrs().get_ints("kernel_shape"));
    PG_ASSIGN_OR_RETURN(int64_t ceil_mode, ctx.attrs().get_int("ceil_mode", 0));
    PG_ASSIGN_OR_RETURN(int64_t count_include_pad, ctx.attrs().get_int("count_include_pad", 0));
    if (kernel.size() != 2) return run_reference(ctx);
    PG_ASSIGN_OR_RETURN(WindowGeometry g,
                        resolve_window(ctx.node(), {x.dim(2), x.dim(3)}, kernel, ceil_mode != 0));
    const int64_t in_h = x.dim(2), in_w = x.dim(3), out_h = g.output[0], out_w = g.output[1];
    const int64_t kh = g.kernel[0], kw = g.kernel[1];
    const int64_t sh = g.strides[0], sw = g.strides[1], dh = g.dilations[0], dw = g.dilations[1];
    const int64_t pad_t = g.pads_begin[0], pad_l = g.pads_begin[1];
    // An average counting the padding whose last window (ceil_mode) reaches past the end
    // padding: those taps do not count, a divisor per window that only the reference keeps.
    if (!max_ && count_include_pad != 0)
      for (size_t d = 0; d < 2; ++d)
        if ((g.output[d] - 1) * g.strides[d] + g.effective_kernel(d) >
            x.dim(static_cast<int64_t>(d) + 2) + g.pads_begin[d] + g.pads_end[d])
          return run_reference(ctx);
    Tensor& y = ctx.output_for_overwrite(0);
    if (y.numel() == 0) return Status::ok();
    // Per tap column kj: output columns [lo, hi) whose tap lands in 0 <= ow*sw - pl + kj*dw < W.
    col_lo_.resize(static_cast<size_t>(kw));
    col_hi_.resize(static_cast<size_t>(kw));
    col_count_.assign(static_cast<size_t>(out_w), 0.0f);
    for (int64_t kj = 0; kj < kw; ++kj) {
      const int64_t off = kj * dw - pad_l;
      const int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
      const int64_t hi = in_w - 1 - off < 0 ? 0 : (in_w - 1 - off) / sw + 1;
      col_lo_[kj] = std::min(lo, out_w);
      col_hi_[kj] = std::max(col_lo_[kj], std::min(hi, out_w));
      for (int64_t ow = col_lo_[kj]; ow < col_hi_[kj]; ++ow) col_count_[ow] += 1.0f;
    }
    for (int64_t ow = 0; ow < out_w; ++ow)
      if (col_count_[ow] == 0.0f) return run_reference(ctx);  // empty windows
    // Per output row: the window rows inside the input.
    row_count_.assign(static_cast<size_t>(out_h), 0.0f);
    for (int64_t oh = 0; oh < out_h; ++oh) {
      for (int64_t ki = 0; ki < kh; ++ki) {
        const int64_t ih = oh * sh - pad_t + ki * dh;
        row_count_[static_cast<size_t>(oh)] += ih >= 0 && ih < in_h ? 1.0f : 0.0f;
      }
      if (row_count_[static_cast<size_t>(oh)] == 0.0f) return run_reference(ctx);
    }
    if (eight_bit) return run_8bit(x, g, y, ctx.num_threads());
    const float* px = x.data<float>();
    float* py = y.data<float>();
    const bool stem_3x3s2 = max_ && uk_.max_pool_3x3s2 && kh == 3 && kw == 3 && sh == 2 &&
                            sw == 2 && dh == 1 && dw == 1 && pad_t <= 1 && pad_l <= 1;
    // 2x2 / 2 with every window inside the plane (DenseNet's transitions, VGG / UNet / GoogLeNet
    // downsampling): one call per plane, no padding or partial windows to count (the whole-plane
    // window kernel computed the window at all four times the positions it keeps, and the rows
    // made four calls per output row).
    if (uk_.pool_2x2s2 && kh == 2 && kw == 2 && sh == 2 && sw == 2 && dh == 1 && dw == 1 &&
        pad_t == 0 && pad_l == 0 && 2 * out_h <= in_h && 2 * out_w <= in_w) {
      auto plane_2x2s2 = [&](int64_t p, int) {
        uk_.pool_2x2s2(px + p * in_h * in_w, static_cast<size_t>(in_w), py + p * out_h * out_w,
                       static_cast<size_t>(out_h), static_cast<size_t>(out_w), max_);
      };
      cpu_thread_pool().parallel_for(x.dim(0) * x.dim(1), ctx.num_threads(), plane_2x2s2);
      return Status::ok();
    }
    // Narrow planes through the whole-plane kernel, wider ones row by row, whose per-row cost
    // is spread over enough columns (GoogLeNet's, Inception-v3's and DenseNet-121's pools): a
    // strided pool there computes every window and samples them, which pays up to a width
    // where the rows take over.
    if (uk_.window_planes && !stem_3x3s2 &&
        in_w <= (sh == 1 && sw == 1 ? kWindowPlanesMaxWidthStride1 : kWindowPlanesMaxWidth))
      return run_window_planes(px, x.dim(0) * x.dim(1), g, in_h, in_w, count_include_pad != 0, py,
                               ctx.num_threads());
    if (stem_3x3s2) {
      // The common CNN stem pool in one call per plane: the generic passes make ~500 row calls
      // per 112x112 plane of ResNet-50, whose per-call overhead was most of the pool's time.
      const size_t row_floats =
          max_pool_3x3s2_scratch_floats(static_cast<size_t>(in_w), static_cast<size_t>(out_h));
      auto plane_3x3s2 = [&](int64_t p, int) {
        uk_.max_pool_3x3s2(
            px + p * in_h * in_w, static_cast<size_t>(in_h), static_cast<size_t>(in_w),
            static_cast<size_t>(pad_t), static_cast<size_t>(pad_l), py + p * out_h * out_w,
            static_cast<size_t>(out_h), static_cast<size_t>(out_w), thread_scratch(row_floats));
      };
      cpu_thread_pool().parallel_for(x.dim(0) * x.dim(1), ctx.num_threads(), plane_3x3s2);
      return Status::ok();
    }
    const int64_t planes = x.dim(0) * x.dim(1);
    if (uk_.pool_s1 && sh == 1 && sw == 1 && dh == 1 && dw == 1 && pad_t < kh && pad_l < kw)
      return run_stride1(px, planes, g, in_h, in_w, count_include_pad != 0, py, ctx.num_threads());
    return run_rows(px, planes, g, in_h, in_w, count_include_pad != 0, py, ctx.num_threads());
  }

 private:
  // Stride 1 (Inception / GoogLeNet branch pools, YOLO's SPPF) in one call per plane: the
  // generic passes make H * KW + OH * KH row calls, each with a scalar tail on small maps.
  // Averages without the padding: each output's divisor (window rows inside times window
  // columns inside) once per run, so each plane is one vectorizable division pass instead of a
  // division per element with its divisor recomputed (Inception-v3's branch pools).
  Status run_stride1(const float* px, int64_t planes, const WindowGeometry& g, int64_t in_h,
                     int64_t in_w, bool count_include_pad, float* py, int num_threads) {
    const int64_t out_h = g.output[0], out_w = g.output[1], kh = g.kernel[0], kw = g.kernel[1];
    const int64_t pad_t = g.pads_begin[0], pad_l = g.pads_begin[1];
    const float kernel_size = static_cast<float>(kh * kw);
    const bool exclude_pad = !max_ && !count_include_pad;
    if (exclude_pad) fill_plane_divisor();
    const float* divisor = plane_divisor_.data();
    const size_t row_floats =
        pool_s1_scratch_floats(static_cast<size_t>(out_w), static_cast<size_t>(kw));
    auto plane_s1 = [&](int64_t p, int) {
      float* out = py + p * out_h * out_w;
      uk_.pool_s1(px + p * in_h * in_w, static_cast<size_t>(in_h), static_cast<size_t>(in_w),
                  static_cast<size_t>(kh), static_cast<size_t>(kw), static_cast<size_t>(pad_t),
                  static_cast<size_t>(pad_l), out, static_cast<size_t>(out_h),
                  static_cast<size_t>(out_w), max_, thread_scratch(row_floats));
      if (exclude_pad)
        divide(out, divisor, out_h * out_w);
      else if (!max_)  // the padding counts: every window divides by the kernel size
        for (int64_t i = 0; i < out_h * out_w; ++i) out[i] *= 1.0f / kernel_size;
    };
    cpu_thread_pool().parallel_for(planes, num_threads, plane_s1);
    return Status::ok();
  }

  // Any window, separable, per plane: pass 1 reduces each input row at the output column
  // positions into an (H, OW) scratch, pass 2 reduces KH of its rows into each output row.
  Status run_rows(const float* px, int64_t planes, const WindowGeometry& g, int64_t in_h,
                  int64_t in_w, bool count_include_pad, float* py, int num_threads) {
    const int64_t out_h = g.output[0], out_w = g.output[1], kh = g.kernel[0], kw = g.kernel[1];
    const int64_t sh = g.strides[0], sw = g.strides[1], dh = g.dilations[0], dw = g.dilations[1];
    const int64_t pad_t = g.pads_begin[0], pad_l = g.pads_begin[1];
    const float kernel_size = static_cast<float>(kh * kw);
    const float init = max_ ? -std::numeric_limits<float>::infinity() : 0.0f;
    const F32PoolRowFn combine = max_ ? uk_.max_row : uk_.add_row;
    auto plane_task = [&](int64_t p, int) {
      const float* in = px + p * in_h * in_w;  // (H, W)
      float* out = py + p * out_h * out_w;     // (OH, OW)
      // Pass 1, along rows: h(ih, ow) = combine over kj of in(ih, ow * sw - pl + kj * dw).
      float* h = thread_scratch(static_cast<size_t>(in_h * out_w));  // (H, OW)
      for (int64_t ih = 0; ih < in_h; ++ih) {
        float* h_row = h + ih * out_w;
        std::fill(h_row, h_row + out_w, init);
        for (int64_t kj = 0; kj < kw; ++kj) {
          const int64_t lo = col_lo_[kj], count = col_hi_[kj] - lo;
          if (count > 0)
            combine(in + ih * in_w + lo * sw + kj * dw - pad_l, static_cast<size_t>(sw), h_row + lo,
                    static_cast<size_t>(count));
        }
      }
      // Pass 2, down columns: out(oh, ow) = combine over in-bounds ki of h(oh *
      // sh - pt + ki * dh).
      for (int64_t oh = 0; oh < out_h; ++oh) {
        float* out_row = out + oh * out_w;
        std::fill(out_row, out_row + out_w, init);
        int64_t rows_in = 0;
        for (int64_t ki = 0; ki < kh; ++ki) {
          const int64_t ih = oh * sh - pad_t + ki * dh;
          if (ih < 0 || ih >= in_h) continue;
          ++rows_in;
          combine(h + ih * out_w, 1, out_row, static_cast<size_t>(out_w));
        }
        if (!max_) scale_row(out_row, out_w, rows_in, kernel_size, count_include_pad);
      }
    };
    cpu_thread_pool().parallel_for(planes, num_threads, plane_task);
    return Status::ok();
  }

  // MaxPool of uint8 / int8 values (a quantized model's pool, fuse_qdq_max_pool): one
  // micro-kernel call per output row, given the window's rows inside the image.
  Status run_8bit(const Tensor& x, const WindowGeometry& g, Tensor& y, int num_threads) const {
    const int64_t in_h = x.dim(2), in_w = x.dim(3), out_h = g.output[0], out_w = g.output[1];
    const Q8MaxPoolRow row{static_cast<size_t>(in_w),
                           static_cast<size_t>(out_w),
                           static_cast<size_t>(g.kernel[1]),
                           static_cast<size_t>(g.strides[1]),
                           static_cast<size_t>(g.dilations[1]),
                           static_cast<size_t>(g.pads_begin[1]),
                           x.dtype() == DType::kInt8};
    const Q8MaxPoolRowFn pool_row =
        uk_.isa >= Isa::kAvx512 ? avx512::q8_max_pool_row__avx512 : q8_max_pool_row__scalar;
    const uint8_t* px = static_cast<const uint8_t*>(x.raw());
    uint8_t* py = static_cast<uint8_t*>(y.raw());
    auto plane_task = [&](int64_t p, int) {
      thread_local std::vector<uint8_t> scratch;
      thread_local std::vector<const uint8_t*> rows;
      scratch.resize(std::max(scratch.size(), q8_max_pool_scratch_bytes(row)));
      rows.resize(static_cast<size_t>(g.kernel[0]));
      const uint8_t* in = px + p * in_h * in_w;
      for (int64_t oh = 0; oh < out_h; ++oh) {
        size_t n = 0;
        for (int64_t ki = 0; ki < g.kernel[0]; ++ki) {
          const int64_t ih = oh * g.strides[0] - g.pads_begin[0] + ki * g.dilations[0];
          if (ih >= 0 && ih < in_h) rows[n++] = in + ih * in_w;
        }
        pool_row(rows.data(), n, row, scratch.data(), py + (p * out_h + oh) * out_w);
      }
    };
    cpu_thread_pool().parallel_for(x.dim(0) * x.dim(1), num_threads, plane_task);
    return Status::ok();
  }

  // Through the whole-plane window kernel, a group of planes per task: the window's max / sum
  // at every input position (straight into Y for a stride-1 pool as large as its input), then
  // sampled at the windows' origins; windows whose origin lies past the input's end (ceil_mode,
  // end pads) element by element. Averages divide at the end.
  Status run_window_planes(const float* px, int64_t planes, const WindowGeometry& g, int64_t in_h,
                           int64_t in_w, bool count_include_pad, float* py, int num_threads) {
    const int64_t out_h = g.output[0], out_w = g.output[1], kh = g.kernel[0], kw = g.kernel[1];
    const int64_t sh = g.strides[0], sw = g.strides[1], dh = g.dilations[0], dw = g.dilations[1];
    const int64_t pad_t = g.pads_begin[0], pad_l = g.pads_begin[1];
    const int64_t plane_in = in_h * in_w, plane_out = out_h * out_w;
    const bool direct = sh == 1 && sw == 1 && out_h == in_h && out_w == in_w;
    // Output rows / columns whose window origin lies inside the input: sampled from s.
    const int64_t rows_s = std::min(out_h, (in_h - 1) / sh + 1);
    const int64_t cols_s = std::min(out_w, (in_w - 1) / sw + 1);
    const bool exclude_pad = !max_ && !count_include_pad;
    if (exclude_pad) fill_plane_divisor();
    // One element by its taps (the windows s does not hold).
    auto window = [&](const float* in, int64_t oh, int64_t ow) {
      float acc = max_ ? -std::numeric_limits<float>::infinity() : 0.0f;
      for (int64_t ki = 0; ki < kh; ++ki) {
        const int64_t ih = oh * sh - pad_t + ki * dh;
        if (ih < 0 || ih >= in_h) continue;
        for (int64_t kj = 0; kj < kw; ++kj) {
          const int64_t iw = ow * sw - pad_l + kj * dw;
          if (iw < 0 || iw >= in_w) continue;
          const float v = in[ih * in_w + iw];
          acc = max_ ? std::max(acc, v) : acc + v;
        }
      }
      return acc;
    };
    const float inv_kernel = 1.0f / static_cast<float>(kh * kw);
    const float* divisor = plane_divisor_.data();
    // Planes per task: a task's s stays in L2 between the window pass and the sampling.
    const int64_t per_task = std::max<int64_t>(1, kWindowTaskFloats / plane_in);
    auto task = [&](int64_t t, int) {
      const int64_t p0 = t * per_task, count = std::min(per_task, planes - p0);
      const float* in = px + p0 * plane_in;
      float* out = py + p0 * plane_out;
      float* scratch = thread_scratch(static_cast<size_t>(2 * count * plane_in));
      float* s = direct ? out : scratch + count * plane_in;
      uk_.window_planes(in, static_cast<size_t>(count), static_cast<size_t>(in_h),
                        static_cast<size_t>(in_w), static_cast<size_t>(kh), static_cast<size_t>(kw),
                        static_cast<size_t>(dh), static_cast<size_t>(dw),
                        static_cast<size_t>(pad_t), static_cast<size_t>(pad_l), s, max_, scratch);
      for (int64_t p = 0; p < count; ++p) {
        float* out_plane = out + p * plane_out;
        if (!direct) {
          const float* s_plane = s + p * plane_in;
          const float* in_plane = in + p * plane_in;
          for (int64_t oh = 0; oh < out_h; ++oh) {
            float* out_row = out_plane + oh * out_w;
            int64_t ow = 0;
            if (oh < rows_s) {
              uk_.copy_row(s_plane + oh * sh * in_w, static_cast<size_t>(sw), out_row,
                           static_cast<size_t>(cols_s));
              ow = cols_s;
            }
            for (; ow < out_w; ++ow) out_row[ow] = window(in_plane, oh, ow);
          }
        }
        if (exclude_pad)
          divide(out_plane, divisor, plane_out);
        else if (!max_)  // the padding counts: every window divides by the kernel size
          for (int64_t i = 0; i < plane_out; ++i) out_plane[i] *= inv_kernel;
      }
    };
    cpu_thread_pool().parallel_for((planes + per_task - 1) / per_task, num_threads, task);
    return Status::ok();
  }

  // plane_divisor_ for averages without the padding: each output's in-bounds taps, its row's
  // times its column's, once per run (one vectorizable division pass per plane after).
  void fill_plane_divisor() {
    const size_t out_h = row_count_.size(), out_w = col_count_.size();
    plane_divisor_.resize(out_h * out_w);
    for (size_t oh = 0; oh < out_h; ++oh)
      for (size_t ow = 0; ow < out_w; ++ow)
        plane_divisor_[oh * out_w + ow] = row_count_[oh] * col_count_[ow];
  }

  // AveragePool: a row of window sums divided by the kernel size (count_include_pad) or by
  // its in-bounds taps, rows_in x the column's count.
  void scale_row(float* out_row, int64_t out_w, int64_t rows_in, float kernel_size,
                 bool count_include_pad) const {
    if (count_include_pad) {
      const float scale = 1.0f / kernel_size;
      for (int64_t ow = 0; ow < out_w; ++ow) out_row[ow] *= scale;
    } else {
      const float rows_f = static_cast<float>(rows_in);
      for (int64_t ow = 0; ow < out_w; ++ow) out_row[ow] /= rows_f * col_count_[ow];
    }
  }
  // out[i] /= divisor[i] over n elements (the same division as scale_row, in vectors).
  static void divide(float* __restrict out, const float* __restrict divisor, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = out[i] / divisor[i];
  }

  bool max_;
  const VectorUkernels& uk_;
  // Per-run geometry, kept so steady-state runs do not allocate.
  std::vector<int64_t> col_lo_, col_hi_;
  std::vector<float> plane_divisor_;  // averages without padding: per output element
  // Window rows inside the input per output row, window columns per output column.
  std::vector<float> row_count_, col_count_;
};

class GlobalPoolKernel : public PreparedKernel {
 public:
  GlobalPoolKernel(bool max, const VectorUkernels& uk) : max_(max), uk_(uk) {}
  std::string name() const override {
    return std::string(max_ ? "cpu/globalmaxpool-" : "cpu/globalavgpool-") + isa_name(uk_.isa);
  }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kFloat32 || x.rank() < 3) return run_reference(ctx);
    Tensor& y = ctx.output_for_overwrite(0);
    const int64_t planes = x.dim(0) * x.dim(1);
    if (planes == 0) return Status::ok();
    const int64_t size = x.numel() / planes;
    if (size == 0) return run_reference(ctx);
    const float* px = x.data<float>();
    float* py = y.data<float>();
    const float inv = 1.0f / static_cast<float>(size);
    const int64_t per_task = std::max<int64_t>(1, kElementsPerTask / size);
    const int64_t tasks = (planes + per_task - 1) / per_task;
    auto task = [&](int64_t t, int) {
      const int64_t p1 = std::min(planes, (t + 1) * per_task);
      for (int64_t p = t * per_task; p < p1; ++p) {
        const float* src = px + p * size;
        py[p] = max_ ? uk_.reduce_max(src, static_cast<size_t>(size))
                     : uk_.reduce_sum(src, static_cast<size_t>(size)) * inv;
      }
    };
    cpu_thread_pool().parallel_for(tasks, ctx.num_threads(), task);
    return Status::ok();
  }

 private:
  bool max_;
  const VectorUkernels& uk_;
};

}  // namespace

bool claims_pool(const ir::Node& node) {
  if (!in_onnx_domain(node)) return false;
  const std::string& t = node.op_type;
  if (t == "GlobalAveragePool" || t == "GlobalMaxPool") return true;
  if (t != "MaxPool" && t != "AveragePool") return false;
  // Static checks: 2-D kernel; MaxPool without the Indices output
  // (storage_order then does not matter).
  ir::AttrView attrs(node);
  auto kernel = attrs.get_ints("kernel_shape");
  if (!kernel.is_ok() || kernel.value().size() != 2) return false;
  if (t == "MaxPool" && node.outputs.size() > 1 && !node.outputs[1].empty()) return false;
  return true;
}

Expected<std::unique_ptr<PreparedKernel>> prepare_pool(const ir::Node& node) {
  const VectorUkernels& uk = vector_ukernels();
  const std::string& t = node.op_type;
  if (t == "GlobalAveragePool" || t == "GlobalMaxPool")
    return std::unique_ptr<PreparedKernel>(new GlobalPoolKernel(t == "GlobalMaxPool", uk));
  return std::unique_ptr<PreparedKernel>(new WindowPoolKernel(t == "MaxPool", uk));
}

}  // namespace peregrine::cpu
