// CPU kernel of Conv (float32, 2-D, NCHW, any stride / pad / dilation / group).
//   depthwise (group == C_in, one input channel per group): direct_depthwise, a direct loop
//     per output plane, the valid output column range precomputed per kernel tap.
//   1x1, stride 1, no padding: a GEMM per (image, group) on the input planes as they are:
//     Y_g(Cout_g, HW) = W_g(Cout_g, Cin_g) * X_g(Cin_g, HW).
//   otherwise: im2col of a bounded column range into scratch, then the same GEMM with
//     K = Cin_g * KH * KW.
// Weights (constant) are packed once per group as the GEMM's A; the bias is the epilogue's
// per-row bias.
#include <algorithm>
#include <cstdlib>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/kernels/conv_scratch.h"
#include "backends/cpu/thread_pool.h"
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

// im2col of one group of one image for output columns [col0, col0 + cols):
//   col(Cin_g * KH * KW, cols), row r = (ci, ki, kj), column q = output pixel col0 + q;
//   taps in the padding read 0. Rows are independent and spread over threads.
void im2col(const float* x_group, const Conv2dShape& s, int64_t in_c_group, int64_t col0,
            int64_t cols, float* col, int threads) {
  const int64_t rows = in_c_group * s.kh * s.kw;
  auto row_task = [&](int64_t r, int) {
    const int64_t ci = r / (s.kh * s.kw), ki = (r / s.kw) % s.kh, kj = r % s.kw;
    const float* plane = x_group + ci * s.in_h * s.in_w;
    float* dst = col + r * cols;
    int64_t q = 0;
    while (q < cols) {
      const int64_t pix = col0 + q;
      const int64_t oh = pix / s.out_w, ow0 = pix % s.out_w;
      const int64_t run = std::min(s.out_w - ow0, cols - q);  // rest of this output row
      const int64_t ih = oh * s.stride_h - s.pad_t + ki * s.dil_h;
      if (ih < 0 || ih >= s.in_h) {
        std::fill(dst + q, dst + q + run, 0.0f);
      } else {
        // Output columns [lo, hi) of this row read inside the input row; the rest are padding.
        const float* in_row = plane + ih * s.in_w;
        const int64_t off = kj * s.dil_w - s.pad_l;
        const int64_t lo =
            std::clamp<int64_t>(off >= 0 ? 0 : (-off + s.stride_w - 1) / s.stride_w - ow0, 0, run);
        const int64_t hi = std::clamp<int64_t>(
            s.in_w - 1 - off < 0 ? 0 : (s.in_w - 1 - off) / s.stride_w + 1 - ow0, lo, run);
        float* out = dst + q;
        std::fill(out, out + lo, 0.0f);
        const float* src = in_row + ow0 * s.stride_w + off;
        if (s.stride_w == 1) {
          std::copy(src + lo, src + hi, out + lo);
        } else {
          for (int64_t j = lo; j < hi; ++j) out[j] = src[j * s.stride_w];
        }
        std::fill(out + hi, out + run, 0.0f);
      }
      q += run;
    }
  };
  cpu_thread_pool().parallel_for(rows, threads, row_task);
}

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

class ConvKernel : public PreparedKernel {
 public:
  ConvKernel(const GemmKernelInfo& gemm, int64_t group, const Tensor* constant_w,
             const FusedEpilogue& fused)
      : gemm_(gemm), fused_(fused), group_(group) {
    if (constant_w && constant_w->rank() == 4 && constant_w->dim(0) % group == 0) {
      const int64_t out_c = constant_w->dim(0), out_c_group = out_c / group;
      const int64_t k = constant_w->dim(1) * constant_w->dim(2) * constant_w->dim(3);
      const bool depthwise = constant_w->dim(1) == 1 && group > 1;  // packing unused
      if (!depthwise) {
        for (int64_t g = 0; g < group; ++g)
          packed_w_.push_back(PackedMatrix::pack_a(
              gemm, MatrixView{constant_w->data<float>() + g * out_c_group * k, k, 1}, out_c_group,
              k));
      }
    }
  }

  std::string name() const override { return std::string("cpu/conv-") + gemm_.name; }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (x.dtype() != DType::kFloat32 || w.dtype() != DType::kFloat32 || x.rank() != 4 ||
        w.rank() != 4 || (bias && bias->dtype() != DType::kFloat32))
      return run_reference(ctx);
    if (w.dim(1) * group_ != x.dim(1) || w.dim(0) % group_ != 0)
      return ctx.error("input channels do not match the weight and group");
    if (bias && bias->numel() != w.dim(0)) return ctx.error("bias has the wrong size");
    PG_ASSIGN_OR_RETURN(WindowGeometry g, resolve_window(ctx.node(), {x.dim(2), x.dim(3)},
                                                         {w.dim(2), w.dim(3)}, false));
    Conv2dShape s{x.dim(0),       x.dim(1),       x.dim(2),        x.dim(3),
                  w.dim(0),       g.output[0],    g.output[1],     w.dim(2),
                  w.dim(3),       group_,         g.strides[0],    g.strides[1],
                  g.dilations[0], g.dilations[1], g.pads_begin[0], g.pads_begin[1]};
    Tensor& y = ctx.output(0);
    if (y.numel() == 0) return Status::ok();
    const float* px = x.data<float>();
    const float* pw = w.data<float>();
    const float* pb = bias ? bias->data<float>() : nullptr;
    float* py = y.data<float>();
    const int threads = ctx.num_threads();
    bool broadcast_z = false;
    const Tensor* z = residual_input(ctx, fused_, y, &broadcast_z);
    if (broadcast_z) return run_reference(ctx);
    const float* pz = z ? z->data<float>() : nullptr;  // (N, Cout, OH, OW) like y
    if (group_ > 1 && group_ == s.in_c && w.dim(1) == 1) {
      direct_depthwise(px, pw, pb, py, s, threads);
      if (pz || fused_.activation != Activation::kNone) {
        // Residual and activation over the whole output, one row per plane.
        const int64_t planes = s.batch * s.out_c, plane = s.out_h * s.out_w;
        GemmEpilogue ep = activation_epilogue(fused_);
        ep.residual = pz;
        ep.ldr = plane;
        auto task = [&](int64_t t, int) {
          gemm_.epilogue(py + t * plane, static_cast<size_t>(plane), 1, static_cast<size_t>(plane),
                         static_cast<size_t>(t), 0, ep);
        };
        cpu_thread_pool().parallel_for(planes, threads, task);
      }
      return Status::ok();
    }
    const int64_t in_c_g = s.in_c / group_, out_c_g = s.out_c / group_;
    const int64_t k = in_c_g * s.kh * s.kw, pixels = s.out_h * s.out_w;
    const int64_t in_plane = s.in_h * s.in_w;
    const bool pointwise = s.kh == 1 && s.kw == 1 && s.stride_h == 1 && s.stride_w == 1 &&
                           s.pad_t == 0 && s.pad_l == 0 && g.pads_end[0] == 0 && g.pads_end[1] == 0;
    const bool use_packed = static_cast<int64_t>(packed_w_.size()) == group_ &&
                            packed_w_[0].rows() == out_c_g && packed_w_[0].cols() == k;
    const int64_t chunk =
        std::max<int64_t>(1, std::min(pixels, kIm2colFloats / std::max<int64_t>(k, 1)));
    for (int64_t n = 0; n < s.batch; ++n) {
      for (int64_t grp = 0; grp < group_; ++grp) {
        const float* x_group = px + (n * s.in_c + grp * in_c_g) * in_plane;
        float* y_group = py + (n * s.out_c + grp * out_c_g) * pixels;  // (Cout_g, OH * OW)
        const GemmOperand a = use_packed ? GemmOperand::of(packed_w_[static_cast<size_t>(grp)])
                                         : GemmOperand::of(pw + grp * out_c_g * k, k, 1);
        const int64_t y_offset = (n * s.out_c + grp * out_c_g) * pixels;
        GemmEpilogue ep = activation_epilogue(fused_);
        ep.residual = pz ? pz + y_offset : nullptr;  // (Cout_g, OH * OW), like y_group
        ep.ldr = pixels;
        if (pb) {
          ep.bias_kind = GemmEpilogue::Bias::kPerRow;
          ep.bias = pb + grp * out_c_g;
        }
        if (pointwise) {
          f32_gemm(gemm_, out_c_g, pixels, k, a, GemmOperand::of(x_group, in_plane, 1), y_group,
                   pixels, 1.0f, 0.0f, ep, threads);
          continue;
        }
        float* col = conv_scratch_floats(static_cast<size_t>(k * chunk));  // (K, chunk)
        for (int64_t c0 = 0; c0 < pixels; c0 += chunk) {
          const int64_t cols = std::min(chunk, pixels - c0);
          im2col(x_group, s, in_c_g, c0, cols, col, threads);
          GemmEpilogue chunk_ep = ep;  // the residual view starts at the chunk's column
          if (chunk_ep.residual) chunk_ep.residual += c0;
          f32_gemm(gemm_, out_c_g, cols, k, a, GemmOperand::of(col, cols, 1), y_group + c0, pixels,
                   1.0f, 0.0f, chunk_ep, threads);
        }
      }
    }
    return Status::ok();
  }

 private:
  const GemmKernelInfo& gemm_;
  FusedEpilogue fused_;
  int64_t group_;
  std::vector<PackedMatrix> packed_w_;  // one (Cout_g, Cin_g * KH * KW) A per group
};

}  // namespace

Expected<std::unique_ptr<PreparedKernel>> prepare_conv(const ir::Node& node,
                                                       const std::vector<const Tensor*>& constants,
                                                       const FusedEpilogue& fused) {
  ir::AttrView attrs(node);
  PG_ASSIGN_OR_RETURN(int64_t group, attrs.get_int("group", 1));
  if (group < 1) return invalid_model(node.describe() + ": attribute 'group' must be >= 1");
  const Tensor* w = constants.size() > 1 ? constants[1] : nullptr;
  return std::unique_ptr<PreparedKernel>(
      std::make_unique<ConvKernel>(f32_gemm_kernel(), group, w, fused));
}

}  // namespace peregrine::cpu
