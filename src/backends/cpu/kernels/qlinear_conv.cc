// CPU kernel of QLinearConv (2-D, uint8 activations, int8 weights with zero zero points, uint8
// or int8 output): per image and group, the uint8 input as a GEMM operand (the input itself for
// a 1x1 stride-1 unpadded conv; panels packed from the image at strides 1 and 2 across; else
// im2col rows padded with x's zero point, which dequantizes to 0) against the int8 weights packed
// once (gemm/qu8_gemm.h), requantized in the micro-kernel.
//
//   acc[m, p] = sum_k w[m, k] * (x[k, p] - x_zp) = sum_k w[m, k] x[k, p] - x_zp * rowsum(w)[m]
//   y[m, p]   = clamp(round((acc + B[m]) * x_scale * w_scale[m] / y_scale) + y_zp)
// so the zero point's term folds into the bias once. The multiplier is computed as the
// reference kernel does (float32 x_scale * w_scale, then / y_scale).
// Weights, scales and zero points must be initializers; any other case (int8 activations, a
// weight zero point, another rank) runs the reference kernel.
#include <algorithm>
#include <cstring>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/gemm/aligned_buffer.h"
#include "backends/cpu/gemm/qu8_gemm.h"
#include "backends/cpu/kernels/vector_ops.h"
#include "backends/cpu/thread_pool.h"
#include "ops/quantize_util.h"

namespace peregrine::cpu {

namespace {

enum Input { kX, kXScale, kXZero, kW, kWScale, kWZero, kYScale, kYZero, kBias };

const Tensor* constant(const std::vector<const Tensor*>& c, size_t i) {
  return i < c.size() ? c[i] : nullptr;
}

bool all_zero(const Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.get_as_double(i) != 0.0) return false;
  return true;
}

// Output pixels per task of the image-bytes depthwise kernel: enough that the per-task cost
// stays small against the work, few enough that two threads split a layer evenly.
constexpr int64_t kDwBytesPerTask = 4096;

struct ConvGroupWeights {
  Qu8PackedA a;
  std::vector<int32_t> bias;  // B - x_zp * rowsum(w), per output channel of the group
  std::vector<float> scale;   // x_scale * w_scale / y_scale, per output channel
};

class QLinearConvKernel : public PreparedKernel {
 public:
  std::string name() const override {
    if (depthwise()) {
      const char* dw = dwconv_ == qu8_dwconv2d__scalar ? "scalar"
                       : !dw_wquads_.empty()           ? "bytes-avx512vnni-vbmi"
                       : dw_wpairs_.empty()            ? "avx512"
                                                       : "pairs-avx512vnni";
      return std::string("cpu/qlinear-conv-dwconv-") + dw;
    }
    return std::string("cpu/qlinear-conv-") + kernel_->name;
  }

  static Expected<std::unique_ptr<PreparedKernel>> make(const ir::Node& node,
                                                        const std::vector<const Tensor*>& c);

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(kX);
    if ((groups_.empty() && !depthwise()) || x.dtype() != DType::kUInt8 || x.rank() != 4 || x.dim(1) != channels_)
      return fallback(ctx);
    PG_ASSIGN_OR_RETURN(quantize_util::ConvGeometry g,
                        quantize_util::conv_geometry(ctx.attrs(), x.shape(), w_shape_));
    Tensor& y = ctx.allocate_output_for_overwrite(0, out_type_, g.output);
    const int64_t batch = x.dim(0), h = x.dim(2), w = x.dim(3);
    const int64_t oh = g.output[2], ow = g.output[3], pixels = oh * ow;
    const int64_t cg = channels_ / group_, mg = out_channels_ / group_;
    const int64_t kh = g.kernel[0], kw = g.kernel[1];
    const bool pointwise = kh == 1 && kw == 1 && g.strides[0] == 1 && g.strides[1] == 1 &&
                           g.pads_begin[0] == 0 && g.pads_begin[1] == 0 && g.pads_end[0] == 0 &&
                           g.pads_end[1] == 0;
    if (depthwise()) return run_depthwise(x, g, y, ctx.num_threads());
    const int64_t k = cg * kh * kw;
    // Strides 1 and 2 across: B panels are packed from the image directly; other strides go
    // through an im2col matrix.
    const bool direct = !pointwise && qu8_conv_packs_directly(g.strides[1]);
    uint8_t* cols = pointwise || direct ? nullptr : im2col_.get(static_cast<size_t>(k * pixels));
    const uint8_t* in = static_cast<const uint8_t*>(x.raw());
    uint8_t* out = static_cast<uint8_t*>(y.raw());
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t gi = 0; gi < group_; ++gi) {
        const uint8_t* image = in + (n * channels_ + gi * cg) * h * w;
        const ConvGroupWeights& gw = groups_[static_cast<size_t>(gi)];
        const Qu8Requant rq{gw.bias.data(), gw.scale.data(), output_};
        uint8_t* y_group = out + (n * out_channels_ + gi * mg) * pixels;
        if (direct) {
          const Qu8ConvImage conv{.image = image,
                                  .channels = cg,
                                  .h = h,
                                  .w = w,
                                  .oh = oh,
                                  .ow = ow,
                                  .kh = kh,
                                  .kw = kw,
                                  .sh = g.strides[0],
                                  .sw = g.strides[1],
                                  .dh = g.dilations[0],
                                  .dw = g.dilations[1],
                                  .pad_top = g.pads_begin[0],
                                  .pad_left = g.pads_begin[1],
                                  .pad = static_cast<uint8_t>(x_zero_)};
          qu8_gemm_conv(mg, gw.a, conv, y_group, pixels, rq, ctx.num_threads());
          continue;
        }
        const uint8_t* b = image;
        if (!pointwise) {
          im2col(image, cg, h, w, g, oh, ow, cols, ctx.num_threads());
          b = cols;
        }
        qu8_gemm(mg, pixels, gw.a, b, pointwise ? h * w : pixels, y_group, pixels, rq,
                 ctx.num_threads());
      }
    return Status::ok();
  }

 private:
  // The depthwise taps in the layouts of the VNNI kernels this CPU has: quads per kernel row
  // for the image-bytes kernel, row pairs for the pair-plane kernel.
  void pack_depthwise_vnni(const Tensor& w, const Qu8DwconvGeometry& taps) {
    const int8_t* wd = w.data<int8_t>();
    const int64_t m = w.dim(0);
    if (cpu_features().avx512_vnni && cpu_features().avx512_vbmi) {
      // Taps (i, 4q..4q + 3) as one int32 of four bytes: the image-bytes kernel's weights.
      const int64_t kh = w.dim(2), kw = w.dim(3), groups = (kw + 3) / 4;
      for (int64_t oc = 0; oc < m; ++oc) {
        const int8_t* tw = wd + oc * kh * kw;
        int32_t sum = 0;
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t q = 0; q < groups; ++q) {
            uint32_t quad = 0;
            for (int64_t b = 0; b < 4 && 4 * q + b < kw; ++b) {
              quad |= static_cast<uint32_t>(static_cast<uint8_t>(tw[i * kw + 4 * q + b]))
                      << (8 * b);
              sum += tw[i * kw + 4 * q + b];
            }
            dw_wquads_.push_back(static_cast<int32_t>(quad));
          }
        dw_bias_bytes_.push_back(dw_bias_[oc] - x_zero_ * sum);
      }
    }
    if (cpu_features().avx512_vnni && avx512vnni::qu8_dwconv2d_pairs_supported(taps)) {
      // Taps (2i, j) and (2i + 1, j) as one int32 pair: the pair-plane kernel's weights.
      const int64_t kh = w.dim(2), kw = w.dim(3), kh2 = (kh + 1) / 2;
      for (int64_t oc = 0; oc < m; ++oc)
        for (int64_t i = 0; i < kh2; ++i)
          for (int64_t j = 0; j < kw; ++j) {
            const int8_t* tw = wd + oc * kh * kw;
            const int32_t top = tw[2 * i * kw + j];
            const int32_t below = 2 * i + 1 < kh ? tw[(2 * i + 1) * kw + j] : 0;
            dw_wpairs_.push_back(static_cast<int32_t>((static_cast<uint32_t>(top) & 0xFFFFu) |
                                                      (static_cast<uint32_t>(below) << 16)));
          }
    }
  }

  // Rows (c, i, j) of oh * ow bytes: x[c, oy * sh - pt + i * dh, ox * sw - pl + j * dw], the
  // zero point outside the image.
  void im2col(const uint8_t* image, int64_t cg, int64_t h, int64_t w,
              const quantize_util::ConvGeometry& g, int64_t oh, int64_t ow, uint8_t* cols,
              int num_threads) const {
    const int64_t kh = g.kernel[0], kw = g.kernel[1], rows = cg * kh * kw;
    const int64_t sh = g.strides[0], sw = g.strides[1], dh = g.dilations[0], dw = g.dilations[1];
    const int64_t pt = g.pads_begin[0], pl = g.pads_begin[1];
    const uint8_t pad = static_cast<uint8_t>(x_zero_);
    auto task = [&](int64_t r, int) {
      const int64_t c = r / (kh * kw), i = r / kw % kh, j = r % kw;
      uint8_t* dst = cols + r * oh * ow;
      const uint8_t* plane = image + c * h * w;
      // Output columns whose input column lies inside the image: [x0, x1).
      const int64_t off = j * dw - pl;
      const int64_t x0 = std::clamp<int64_t>((-off + sw - 1) / sw, 0, ow);
      const int64_t x1 = std::clamp<int64_t>(off >= w ? 0 : (w - off + sw - 1) / sw, x0, ow);
      if (sh == 1 && sw == 1 && ow == w) {
        // Stride 1, output as wide as the input ("same" padding): output pixel p of the rows
        // inside the image reads input pixel p + a constant, so those rows are one copy; the
        // columns that fall in the pads are set after. (Per-row copies of a few dozen bytes
        // cost more in calls than in bytes.)
        const int64_t oy0 = std::clamp<int64_t>(pt - i * dh, 0, oh);
        const int64_t oy1 = std::clamp<int64_t>(h + pt - i * dh, oy0, oh);
        std::memset(dst, pad, static_cast<size_t>(oy0 * ow));
        std::memset(dst + oy1 * ow, pad, static_cast<size_t>((oh - oy1) * ow));
        if (oy1 > oy0 && x1 > x0) {
          const int64_t first = oy0 * ow + x0, last = (oy1 - 1) * ow + x1;  // [first, last)
          std::memcpy(dst + first, plane + (oy0 - pt + i * dh) * w + x0 + off,
                      static_cast<size_t>(last - first));
        }
        for (int64_t oy = oy0; oy < oy1; ++oy) {
          for (int64_t ox = 0; ox < x0; ++ox) dst[oy * ow + ox] = pad;
          for (int64_t ox = x1; ox < ow; ++ox) dst[oy * ow + ox] = pad;
        }
        return;
      }
      for (int64_t oy = 0; oy < oh; ++oy, dst += ow) {
        const int64_t iy = oy * sh - pt + i * dh;
        if (iy < 0 || iy >= h) {
          std::memset(dst, pad, static_cast<size_t>(ow));
          continue;
        }
        const uint8_t* src = plane + iy * w + off;
        for (int64_t ox = 0; ox < x0; ++ox) dst[ox] = pad;  // a few pad columns: no call
        if (sw == 1) {
          std::memcpy(dst + x0, src + x0, static_cast<size_t>(x1 - x0));
        } else if (sw == 2) {
          gather_stride2_(src + 2 * x0, static_cast<size_t>(x1 - x0), dst + x0);
        } else {
          for (int64_t ox = x0; ox < x1; ++ox) dst[ox] = src[ox * sw];
        }
        for (int64_t ox = x1; ox < ow; ++ox) dst[ox] = pad;
      }
    };
    cpu_thread_pool().parallel_for(rows, rows * oh * ow < (int64_t{1} << 16) ? 1 : num_threads,
                                   task);
  }

  bool depthwise() const { return !dw_weights_.empty(); }

  // One task per (image, channel): the channel less its zero point as a zero-padded int16
  // plane, then the depthwise micro-kernel over it.
  Status run_depthwise(const Tensor& x, const quantize_util::ConvGeometry& g, Tensor& y,
                       int num_threads) const {
    const int64_t batch = x.dim(0), h = x.dim(2), w = x.dim(3);
    const int64_t pt = g.pads_begin[0], pl = g.pads_begin[1];
    const int64_t ph = h + pt + g.pads_end[0], pw = w + pl + g.pads_end[1];
    const int64_t kh = g.kernel[0], kw = g.kernel[1];
    const Qu8DwconvGeometry geo{static_cast<size_t>(kh), static_cast<size_t>(kw),
                                static_cast<size_t>(g.strides[0]), static_cast<size_t>(g.strides[1]),
                                static_cast<size_t>(g.dilations[0]), static_cast<size_t>(g.dilations[1]),
                                static_cast<size_t>(g.output[2]), static_cast<size_t>(g.output[3]),
                                static_cast<size_t>(pw)};
    const int64_t out_plane = g.output[2] * g.output[3];
    if (out_plane == 0 || batch * channels_ == 0) return Status::ok();  // an empty output
    // The image-bytes kernel where the CPU has it and the geometry fits; else the pair-plane
    // kernel likewise; else dwconv_.
    const bool bytes = !dw_wquads_.empty() && avx512vnni_vbmi::qu8_dwconv2d_bytes_supported(geo);
    const bool pairs =
        !bytes && !dw_wpairs_.empty() && avx512vnni::qu8_dwconv2d_pairs_supported(geo);
    const size_t groups = (static_cast<size_t>(kw) + 3) / 4;
    const size_t pwp = (static_cast<size_t>(pw) + geo.sw - 1) / geo.sw;
    const int64_t kh2 = (kh + 1) / 2;
    const uint8_t* in = static_cast<const uint8_t*>(x.raw());
    uint8_t* out = static_cast<uint8_t*>(y.raw());
    if (bytes) {
      // Tasks of whole channel runs (small maps have hundreds of channels of a few rows each);
      // the vpermb indices are the node's.
      alignas(64) uint8_t index[128];
      avx512vnni_vbmi::qu8_dwconv2d_bytes_index(geo, index);
      const int64_t planes = batch * channels_;
      const int64_t per_task =
          std::clamp<int64_t>(kDwBytesPerTask / std::max<int64_t>(out_plane, 1), 1, planes);
      auto run_planes = [&](int64_t task, int) {
        thread_local GrowBuffer<uint8_t> zero_row;
        uint8_t* zeros = zero_row.get(static_cast<size_t>(w) + 128);
        for (int64_t t = task * per_task; t < std::min(planes, (task + 1) * per_task); ++t) {
          const int64_t c = t % channels_;
          avx512vnni_vbmi::qu8_dwconv2d_bytes__avx512vnni_vbmi(
              in + t * h * w, static_cast<size_t>(h), static_cast<size_t>(w),
              static_cast<uint8_t>(x_zero_), static_cast<size_t>(pt), static_cast<size_t>(pl),
              zeros, index, dw_wquads_.data() + c * kh * static_cast<int64_t>(groups), geo,
              dw_bias_bytes_[c], dw_scale_[c], output_, out + t * out_plane);
        }
      };
      cpu_thread_pool().parallel_for((planes + per_task - 1) / per_task, num_threads, run_planes);
      return Status::ok();
    }
    auto task = [&](int64_t t, int) {
      const int64_t c = t % channels_;
      if (pairs) {
        thread_local GrowBuffer<int32_t> paired;
        int32_t* pp = paired.get(static_cast<size_t>(ph) * geo.sw * pwp);
        avx512vnni::qu8_pair_rows__avx512vnni(in + t * h * w, static_cast<size_t>(h),
                                              static_cast<size_t>(w), x_zero_,
                                              static_cast<size_t>(pt), static_cast<size_t>(pl),
                                              static_cast<size_t>(ph), geo, pwp, pp);
        avx512vnni::qu8_dwconv2d_pairs__avx512vnni(pp, dw_wpairs_.data() + c * kh2 * kw, geo, pwp,
                                                   dw_bias_[c], dw_scale_[c], output_,
                                                   out + t * out_plane);
        return;
      }
      thread_local GrowBuffer<int16_t> padded;
      int16_t* plane = padded.get(static_cast<size_t>(ph * pw));
      const uint8_t* src = in + t * h * w;
      // Only the pads are zeroed: the top and bottom rows, then each row's two sides.
      std::fill(plane, plane + pt * pw, int16_t{0});
      std::fill(plane + (pt + h) * pw, plane + ph * pw, int16_t{0});
      for (int64_t r = 0; r < h; ++r) {
        int16_t* row = plane + (r + pt) * pw;
        std::fill(row, row + pl, int16_t{0});
        widen_(src + r * w, static_cast<size_t>(w), x_zero_, row + pl);
        std::fill(row + pl + w, row + pw, int16_t{0});
      }
      dwconv_(plane, dw_weights_.data() + c * kh * kw, geo, dw_bias_[c], dw_scale_[c], output_,
              out + t * out_plane);
    };
    cpu_thread_pool().parallel_for(batch * channels_, num_threads, task);
    return Status::ok();
  }

  // Cases without a fast path (found at prepare: `groups_` empty; or at run time).
  Status fallback(KernelContext& ctx) { return run_reference(ctx); }

  const Qu8GemmKernelInfo* kernel_ = nullptr;
  Shape w_shape_;
  int64_t channels_ = 0, out_channels_ = 0, group_ = 1;
  int32_t x_zero_ = 0;
  DType out_type_ = DType::kUInt8;
  Qu8Output output_;
  std::vector<ConvGroupWeights> groups_;
  // Depthwise (one input and one output channel per group): taps, bias and multiplier per
  // channel, no GEMM.
  std::vector<int8_t> dw_weights_;
  std::vector<int32_t> dw_wpairs_;  // for the pair-plane kernel (AVX512-VNNI); else empty
  // For the image-bytes kernel (AVX512-VNNI + VBMI; else empty): taps as quads per kernel row,
  // and the bias less x's zero point times the taps' sum.
  std::vector<int32_t> dw_wquads_, dw_bias_bytes_;
  std::vector<int32_t> dw_bias_;
  std::vector<float> dw_scale_;
  Qu8DwconvFn dwconv_ = qu8_dwconv2d__scalar;
  Qu8WidenFn widen_ = qu8_widen__scalar;
  U8GatherStride2Fn gather_stride2_ = u8_gather_stride2__scalar;
  GrowBuffer<uint8_t> im2col_;
};

Expected<std::unique_ptr<PreparedKernel>> QLinearConvKernel::make(
    const ir::Node& node, const std::vector<const Tensor*>& c) {
  auto kernel = std::make_unique<QLinearConvKernel>();
  kernel->kernel_ = &qu8_gemm_kernel();
  auto given = [&](size_t i) { return i < node.inputs.size() && !node.inputs[i].empty(); };
  const Tensor* x_scale = constant(c, kXScale);
  const Tensor* x_zero = constant(c, kXZero);
  const Tensor* w = constant(c, kW);
  const Tensor* w_scale = constant(c, kWScale);
  const Tensor* w_zero = constant(c, kWZero);
  const Tensor* y_scale = constant(c, kYScale);
  const Tensor* y_zero = constant(c, kYZero);
  const Tensor* bias = constant(c, kBias);
  ir::AttrView attrs(node);
  PG_ASSIGN_OR_RETURN(int64_t group, attrs.get_int("group", 1));
  // Every parameter an initializer, of the types and sizes the fast path takes; anything else
  // (or an invalid model, which the reference reports) runs the reference kernel.
  const bool constant_params = x_scale && w && w_scale && y_scale &&
                               (x_zero || !given(kXZero)) && (w_zero || !given(kWZero)) &&
                               (y_zero || !given(kYZero)) && (bias || !given(kBias));
  if (!constant_params || w->dtype() != DType::kInt8 || w->rank() != 4 || group < 1 ||
      w->dim(0) % group != 0 || x_scale->dtype() != DType::kFloat32 || x_scale->numel() != 1 ||
      y_scale->dtype() != DType::kFloat32 || y_scale->numel() != 1 ||
      w_scale->dtype() != DType::kFloat32 ||
      (w_scale->numel() != 1 && w_scale->numel() != w->dim(0)) ||
      (x_zero && (x_zero->dtype() != DType::kUInt8 || x_zero->numel() != 1)) ||
      (w_zero && (w_zero->dtype() != DType::kInt8 || !all_zero(*w_zero))) ||
      (y_zero && ((y_zero->dtype() != DType::kUInt8 && y_zero->dtype() != DType::kInt8) ||
                  y_zero->numel() != 1)) ||
      (bias && (bias->dtype() != DType::kInt32 || bias->numel() != w->dim(0))))
    return std::unique_ptr<PreparedKernel>(std::move(kernel));
  const int64_t m = w->dim(0), mg = m / group;
  const int64_t k = w->dim(1) * w->dim(2) * w->dim(3);
  if (k > kQu8MaxDepth) return std::unique_ptr<PreparedKernel>(std::move(kernel));
  kernel->w_shape_ = w->shape();
  kernel->out_channels_ = m;
  kernel->channels_ = w->dim(1) * group;
  kernel->group_ = group;
  kernel->x_zero_ = x_zero ? x_zero->data<uint8_t>()[0] : 0;
  kernel->out_type_ = y_zero ? y_zero->dtype() : DType::kUInt8;
  const bool is_signed = kernel->out_type_ == DType::kInt8;
  kernel->output_.is_signed = is_signed;
  kernel->output_.zero_point = y_zero ? static_cast<int32_t>(y_zero->get_as_double(0)) : 0;
  kernel->output_.lo = is_signed ? -128 : 0;
  kernel->output_.hi = is_signed ? 127 : 255;
  const float sx = x_scale->data<float>()[0], sy = y_scale->data<float>()[0];
  const int8_t* wd = w->data<int8_t>();
  if (selected_isa().is_ok() && selected_isa().value() >= Isa::kAvx512)
    kernel->gather_stride2_ = avx512::u8_gather_stride2__avx512;
  auto multiplier = [&](int64_t oc) {
    return (sx * w_scale->data<float>()[w_scale->numel() == 1 ? 0 : oc]) / sy;
  };
  if (group == m && w->dim(1) == 1) {
    kernel->dw_weights_.assign(wd, wd + w->numel());
    for (int64_t oc = 0; oc < m; ++oc) {
      kernel->dw_bias_.push_back(bias ? bias->data<int32_t>()[oc] : 0);
      kernel->dw_scale_.push_back(multiplier(oc));
    }
    if (selected_isa().is_ok() && selected_isa().value() >= Isa::kAvx512) {
      kernel->dwconv_ = avx512::qu8_dwconv2d__avx512;
      kernel->widen_ = avx512::qu8_widen__avx512;
      auto strides = attrs.get_ints("strides");
      const int64_t stride_w =
          strides.is_ok() && strides.value().size() == 2 ? strides.value()[1] : 1;
      const Qu8DwconvGeometry taps{static_cast<size_t>(w->dim(2)),
                                   static_cast<size_t>(w->dim(3)),
                                   1,
                                   static_cast<size_t>(stride_w),
                                   1,
                                   1,
                                   0,
                                   0,
                                   0};
      kernel->pack_depthwise_vnni(*w, taps);
    }
    return std::unique_ptr<PreparedKernel>(std::move(kernel));
  }
  for (int64_t gi = 0; gi < group; ++gi) {
    ConvGroupWeights gw{Qu8PackedA::pack(*kernel->kernel_, wd + gi * mg * k, k, mg, k), {}, {}};
    gw.bias.resize(static_cast<size_t>(mg));
    gw.scale.resize(static_cast<size_t>(mg));
    for (int64_t r = 0; r < mg; ++r) {
      const int64_t oc = gi * mg + r;
      gw.bias[r] = (bias ? bias->data<int32_t>()[oc] : 0) - kernel->x_zero_ * gw.a.row_sums()[r];
      gw.scale[r] = multiplier(oc);
    }
    kernel->groups_.push_back(std::move(gw));
  }
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

}  // namespace

Expected<std::unique_ptr<PreparedKernel>> prepare_qlinear_conv(
    const ir::Node& node, const std::vector<const Tensor*>& constants) {
  return QLinearConvKernel::make(node, constants);
}

}  // namespace peregrine::cpu
