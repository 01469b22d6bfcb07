// CPU kernel of peregrine.ConvNhwc (float32, 2-D, X / Z / Y in NHWC, constant W), written by
// the layout_nhwc pass at -O3. With channels innermost every output pixel is one GEMM row:
//   1x1, stride 1, no padding: one GEMM over the whole batch on X as it is:
//     Y(N * H * W, Cout) = X(N * H * W, Cin) * Wt(Cin, Cout)      no im2col at all.
//   otherwise (group 1): im2col of a bounded block of output pixels, each row the KH * KW taps'
//     channel vectors copied whole (Cin contiguous floats per tap, zeros in the padding):
//     Y(rows, Cout) = col(rows, KH * KW * Cin) * Wt(KH * KW * Cin, Cout).
//   depthwise (group == Cin == Cout): a direct loop per output row whose inner loop runs over
//     the channels (contiguous in X, W and Y), so it vectorizes at any stride and dilation;
//     that loop is compiled per ISA (kernels/conv_nhwc_depthwise_impl.h: baseline 4-wide,
//     avx2 8-wide with FMA) and picked from cpu_features.
// Weights are packed once as the GEMM's B in (ki, kj, ci) x co order; bias is the epilogue's
// per-column bias, Z the residual (row stride Cout), then the activation. Anything else
// (run-time weights, other groups, other dtypes) runs the reference kernel.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/kernels/conv_scratch.h"
#include "backends/cpu/kernels/conv_nhwc_depthwise_impl.h"
#include "backends/cpu/thread_pool.h"
#include "ops/conv_geometry.h"

namespace peregrine::cpu {

namespace avx2 {
void f32_dwconv_nhwc_accumulate__avx2(float* out, const float* in, const float* w, int64_t channels,
                                      int64_t count, int64_t in_stride);
}  // namespace avx2

namespace {

using DwconvAccumulateFn = void (*)(float* out, const float* in, const float* w, int64_t channels,
                                    int64_t count, int64_t in_stride);

void f32_dwconv_nhwc_accumulate__scalar(float* out, const float* in, const float* w,
                                        int64_t channels, int64_t count, int64_t in_stride) {
  depthwise_nhwc_accumulate(out, in, w, channels, count, in_stride);
}

// The depthwise inner loop for the selected ISA (AVX-512 machines use the AVX2 one).
DwconvAccumulateFn dwconv_accumulate_for_selected_isa() {
  Expected<Isa> isa = selected_isa();
  if (isa.is_ok() && *isa != Isa::kScalar) return avx2::f32_dwconv_nhwc_accumulate__avx2;
  return f32_dwconv_nhwc_accumulate__scalar;
}

struct NhwcShape {
  int64_t batch, in_h, in_w, in_c;
  int64_t out_h, out_w, out_c;
  int64_t kh, kw;
  int64_t stride_h, stride_w, dil_h, dil_w, pad_t, pad_l;
};

// col(rows, K): row q is output pixel p0 + q (pixels numbered over the whole batch, row-major
// (n, oh, ow)); K = (ki, kj, ci) with ci innermost. Rows are independent and spread over threads.
void im2col_nhwc(const float* x, const NhwcShape& s, int64_t p0, int64_t rows, float* col,
                 int threads) {
  const int64_t k = s.kh * s.kw * s.in_c;
  const size_t channel_bytes = static_cast<size_t>(s.in_c) * sizeof(float);
  auto row_task = [&](int64_t q, int) {
    const int64_t p = p0 + q;
    const int64_t ow = p % s.out_w, oh = (p / s.out_w) % s.out_h, n = p / (s.out_w * s.out_h);
    const float* image = x + n * s.in_h * s.in_w * s.in_c;
    float* dst = col + q * k;
    for (int64_t ki = 0; ki < s.kh; ++ki) {
      const int64_t ih = oh * s.stride_h - s.pad_t + ki * s.dil_h;
      for (int64_t kj = 0; kj < s.kw; ++kj, dst += s.in_c) {
        const int64_t iw = ow * s.stride_w - s.pad_l + kj * s.dil_w;
        if (ih < 0 || ih >= s.in_h || iw < 0 || iw >= s.in_w)
          std::memset(dst, 0, channel_bytes);
        else
          std::memcpy(dst, image + (ih * s.in_w + iw) * s.in_c, channel_bytes);
      }
    }
  };
  cpu_thread_pool().parallel_for(rows, threads, row_task);
}

// Depthwise, one output row (n, oh) per task: out(OW, C) = sum over taps of x(ih, iw, C) *
// w(ki, kj, C); `w` is (KH * KW, C). Per tap, `accumulate` runs over the valid output columns
// with the channels innermost. Bias, residual and activation follow in the epilogue.
void direct_depthwise_nhwc(const float* x, const float* w, float* y, const NhwcShape& s,
                           DwconvAccumulateFn accumulate, int threads) {
  const int64_t c = s.in_c;
  auto row_task = [&](int64_t t, int) {
    const int64_t n = t / s.out_h, oh = t % s.out_h;
    const float* image = x + n * s.in_h * s.in_w * c;
    float* out_row = y + t * s.out_w * c;  // (OW, C)
    std::fill(out_row, out_row + s.out_w * c, 0.0f);
    for (int64_t ki = 0; ki < s.kh; ++ki) {
      const int64_t ih = oh * s.stride_h - s.pad_t + ki * s.dil_h;
      if (ih < 0 || ih >= s.in_h) continue;
      const float* in_row = image + ih * s.in_w * c;
      for (int64_t kj = 0; kj < s.kw; ++kj) {
        // Output columns whose tap kj lands inside the row: 0 <= ow * sw - pl + kj * dw < W.
        const int64_t off = kj * s.dil_w - s.pad_l;
        int64_t ow_lo = off >= 0 ? 0 : (-off + s.stride_w - 1) / s.stride_w;
        int64_t ow_hi = s.in_w - 1 - off < 0 ? 0 : (s.in_w - 1 - off) / s.stride_w + 1;
        ow_lo = std::min(ow_lo, s.out_w);
        ow_hi = std::min(ow_hi, s.out_w);
        if (ow_hi <= ow_lo) continue;
        accumulate(out_row + ow_lo * c, in_row + (ow_lo * s.stride_w + off) * c,
                   w + (ki * s.kw + kj) * c, c, ow_hi - ow_lo, s.stride_w * c);
      }
    }
  };
  cpu_thread_pool().parallel_for(s.batch * s.out_h, threads, row_task);
}

class ConvNhwcKernel : public PreparedKernel {
 public:
  ConvNhwcKernel(const GemmKernelInfo& gemm, int64_t group, const Tensor* w,
                 const FusedEpilogue& fused)
      : gemm_(gemm), fused_(fused), group_(group) {
    if (!w || w->rank() != 4) return;
    const int64_t out_c = w->dim(0), in_c_g = w->dim(1), kh = w->dim(2), kw = w->dim(3);
    const float* pw = w->data<float>();
    if (group == 1) {
      // Wt(K, Cout), K = (ki, kj, ci): the im2col row order.
      const int64_t k = kh * kw * in_c_g;
      std::vector<float> wt(static_cast<size_t>(k * out_c));
      for (int64_t co = 0; co < out_c; ++co)
        for (int64_t ci = 0; ci < in_c_g; ++ci)
          for (int64_t t = 0; t < kh * kw; ++t)
            wt[static_cast<size_t>((t * in_c_g + ci) * out_c + co)] =
                pw[(co * in_c_g + ci) * kh * kw + t];
      packed_w_ = std::make_unique<PackedMatrix>(
          PackedMatrix::pack_b(gemm, MatrixView{wt.data(), out_c, 1}, k, out_c));
      k_ = k;
    } else if (in_c_g == 1 && group == out_c) {
      // (KH * KW, C): channel vectors per tap.
      depthwise_w_.resize(static_cast<size_t>(kh * kw * out_c));
      for (int64_t ch = 0; ch < out_c; ++ch)
        for (int64_t t = 0; t < kh * kw; ++t)
          depthwise_w_[static_cast<size_t>(t * out_c + ch)] = pw[ch * kh * kw + t];
    }
  }

  std::string name() const override {
    return std::string(depthwise_w_.empty() ? "cpu/conv_nhwc-" : "cpu/conv_nhwc_depthwise-") +
           gemm_.name;
  }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    const bool prepared = packed_w_ != nullptr || !depthwise_w_.empty();
    if (!prepared || x.dtype() != DType::kFloat32 || w.dtype() != DType::kFloat32 ||
        x.rank() != 4 || w.rank() != 4 || (bias && bias->dtype() != DType::kFloat32))
      return run_reference(ctx);
    if (w.dim(1) * group_ != x.dim(3)) return ctx.error("input channels do not match the weight");
    if (bias && bias->numel() != w.dim(0)) return ctx.error("bias has the wrong size");
    PG_ASSIGN_OR_RETURN(WindowGeometry g, resolve_window(ctx.node(), {x.dim(1), x.dim(2)},
                                                         {w.dim(2), w.dim(3)}, false));
    const NhwcShape s{x.dim(0),       x.dim(1),        x.dim(2),       x.dim(3),
                      g.output[0],    g.output[1],     w.dim(0),       w.dim(2),
                      w.dim(3),       g.strides[0],    g.strides[1],   g.dilations[0],
                      g.dilations[1], g.pads_begin[0], g.pads_begin[1]};
    Tensor& y = ctx.output_for_overwrite(0);  // (N, OH, OW, Cout)
    if (y.numel() == 0) return Status::ok();
    bool broadcast_z = false;
    const Tensor* z = residual_input(ctx, fused_, y, &broadcast_z);
    if (broadcast_z) return run_reference(ctx);
    const float* px = x.data<float>();
    float* py = y.data<float>();
    const int threads = ctx.num_threads();
    GemmEpilogue ep = activation_epilogue(fused_);
    ep.residual = z ? z->data<float>() : nullptr;  // (N * OH * OW, Cout) like y
    ep.ldr = s.out_c;
    if (bias) {
      ep.bias_kind = GemmEpilogue::Bias::kPerColumn;
      ep.bias = bias->data<float>();
    }
    const int64_t pixels = s.batch * s.out_h * s.out_w;

    if (!depthwise_w_.empty()) {
      direct_depthwise_nhwc(px, depthwise_w_.data(), py, s, dwconv_accumulate_for_selected_isa(),
                            threads);
      if (ep.empty()) return Status::ok();
      auto task = [&](int64_t t, int) {  // one output row (OW, C) per task
        gemm_.epilogue(py + t * s.out_w * s.out_c, static_cast<size_t>(s.out_c),
                       static_cast<size_t>(s.out_w), static_cast<size_t>(s.out_c),
                       static_cast<size_t>(t * s.out_w), 0, ep);
      };
      cpu_thread_pool().parallel_for(s.batch * s.out_h, threads, task);
      return Status::ok();
    }

    if (packed_w_->rows() != k_ || packed_w_->cols() != s.out_c || k_ != s.kh * s.kw * s.in_c)
      return run_reference(ctx);
    const GemmOperand b = GemmOperand::of(*packed_w_);
    const bool pointwise = s.kh == 1 && s.kw == 1 && s.stride_h == 1 && s.stride_w == 1 &&
                           s.pad_t == 0 && s.pad_l == 0 && g.pads_end[0] == 0 && g.pads_end[1] == 0;
    if (pointwise) {
      f32_gemm(gemm_, pixels, s.out_c, s.in_c, GemmOperand::of(px, s.in_c, 1), b, py, s.out_c, 1.0f,
               0.0f, ep, threads);
      return Status::ok();
    }
    const int64_t chunk = std::max<int64_t>(1, std::min(pixels, kIm2colFloats / k_));
    float* col = conv_scratch_floats(static_cast<size_t>(k_ * chunk));  // (chunk, K)
    for (int64_t p0 = 0; p0 < pixels; p0 += chunk) {
      const int64_t rows = std::min(chunk, pixels - p0);
      im2col_nhwc(px, s, p0, rows, col, threads);
      GemmEpilogue chunk_ep = ep;  // the residual view starts at the block's first row
      if (chunk_ep.residual) chunk_ep.residual += p0 * s.out_c;
      f32_gemm(gemm_, rows, s.out_c, k_, GemmOperand::of(col, k_, 1), b, py + p0 * s.out_c, s.out_c,
               1.0f, 0.0f, chunk_ep, threads);
    }
    return Status::ok();
  }

 private:
  const GemmKernelInfo& gemm_;
  FusedEpilogue fused_;
  int64_t group_;
  int64_t k_ = 0;
  std::unique_ptr<PackedMatrix> packed_w_;  // B (KH * KW * Cin, Cout), group 1
  std::vector<float> depthwise_w_;          // (KH * KW, C), depthwise
};

}  // namespace

Expected<std::unique_ptr<PreparedKernel>> prepare_conv_nhwc(
    const ir::Node& node, const std::vector<const Tensor*>& constants, const FusedEpilogue& fused) {
  ir::AttrView attrs(node);
  PG_ASSIGN_OR_RETURN(int64_t group, attrs.get_int("group", 1));
  if (group < 1) return invalid_model(node.describe() + ": attribute 'group' must be >= 1");
  const Tensor* w = constants.size() > 1 ? constants[1] : nullptr;
  return std::unique_ptr<PreparedKernel>(
      std::make_unique<ConvNhwcKernel>(f32_gemm_kernel(), group, w, fused));
}

}  // namespace peregrine::cpu
