// CPU kernel of ConvTranspose (float32, 2-D, NCHW, any group / stride / pad / dilation /
// output_padding / output_shape, optional bias): GEMM + col2im per (image, group):
//   col(M_g * KH * KW, pixels) = W_g^T(M_g * KH * KW, C_g) * X_g(C_g, pixels)
//   y[oc](ih * sh - pad_t + ki * dh, iw * sw - pad_l + kj * dw) += col[(oc, ki, kj)](ih, iw)
// W (C, M_g, KH, KW) is, per group, a (C_g, M_g * KH * KW) row-major matrix, so W_g^T is a
// strided view of it; constant weights are packed once as the GEMM's A. The input pixels go in
// chunks of whole input rows so the col buffer stays bounded (col2im is a sum, so chunks just
// add up). y starts as the bias; col2im runs over output channels on the thread pool (each
// channel's rows land in its own plane, so no two threads write the same element).
#include <algorithm>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm/bf16_gemm.h"
#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/kernels/conv_scratch.h"
#include "backends/cpu/thread_pool.h"
#include "ops/conv_geometry.h"

namespace peregrine::cpu {

namespace {

constexpr int64_t kColFloats = int64_t{1} << 20;  // col buffer bound (4 MiB)

struct ConvTransposeShape {
  int64_t in_h, in_w, out_h, out_w, kh, kw;
  int64_t stride_h, stride_w, dil_h, dil_w, pad_t, pad_l;
};

// Adds the col rows of output channel `oc` (KH * KW rows of `cols` = rows_in * in_w input pixels,
// input rows [ih0, ih0 + rows_in)) into its output plane.
void col2im_channel(const float *col, int64_t cols, int64_t ih0, int64_t rows_in,
                    const ConvTransposeShape &s, float *plane) {
  for (int64_t ki = 0; ki < s.kh; ++ki) {
    for (int64_t kj = 0; kj < s.kw; ++kj, col += cols) {
      // Input columns whose output column iw * sw + off lands inside [0, out_w).
      const int64_t off = kj * s.dil_w - s.pad_l;
      const int64_t iw_lo = std::min(s.in_w, off >= 0 ? 0 : (-off + s.stride_w - 1) / s.stride_w);
      const int64_t iw_hi = std::clamp<int64_t>(
          s.out_w - 1 - off < 0 ? 0 : (s.out_w - 1 - off) / s.stride_w + 1, iw_lo, s.in_w);
      for (int64_t r = 0; r < rows_in; ++r) {
        const int64_t oh = (ih0 + r) * s.stride_h - s.pad_t + ki * s.dil_h;
        if (oh < 0 || oh >= s.out_h) continue;
        const float *__restrict src = col + r * s.in_w;
        float *__restrict dst = plane + oh * s.out_w;
        if (s.stride_w == 1) {
          for (int64_t iw = iw_lo; iw < iw_hi; ++iw) dst[iw + off] += src[iw];
        } else {
          for (int64_t iw = iw_lo; iw < iw_hi; ++iw) dst[iw * s.stride_w + off] += src[iw];
        }
      }
    }
  }
}

class ConvTransposeKernel : public PreparedKernel {
 public:
  // bf16: at bf16 precision the bf16 GEMM, its W^T packed in bf16 (the float32 W is kept).
  ConvTransposeKernel(const GemmKernelInfo &gemm, const Bf16GemmKernelInfo *bf16, int64_t group,
                      const Tensor *constant_w)
      : gemm_(gemm), group_(group) {
    if (constant_w && constant_w->rank() == 4 && constant_w->dim(0) % group == 0) {
      const int64_t c_g = constant_w->dim(0) / group;
      const int64_t rows = constant_w->dim(1) * constant_w->dim(2) * constant_w->dim(3);
      for (int64_t g = 0; g < group; ++g) {  // A = W_g^T: (rows, C_g), (r, c) at c * rows + r
        const MatrixView wt{constant_w->data<float>() + g * c_g * rows, 1, rows};
        if (bf16)
          packed_w_bf16_.push_back(Bf16PackedMatrix::pack_a(*bf16, wt, rows, c_g));
        else
          packed_w_.push_back(PackedMatrix::pack_a(gemm, wt, rows, c_g));
      }
    }
  }

  std::string name() const override {
    return std::string("cpu/conv_transpose-") +
           (packed_w_bf16_.empty() ? gemm_.name : packed_w_bf16_[0].kernel()->name);
  }

  Status run(KernelContext &ctx) override {
    const Tensor &x = ctx.input(0);
    const Tensor &w = ctx.input(1);
    const Tensor *bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    // Anything unusual (other ranks or dtypes, mismatched shapes) goes to the reference kernel,
    // which also reports the errors.
    if (x.dtype() != DType::kFloat32 || w.dtype() != DType::kFloat32 || x.rank() != 4 ||
        w.rank() != 4 || (bias && bias->dtype() != DType::kFloat32) || x.dim(1) != w.dim(0) ||
        x.dim(1) % group_ != 0 || (bias && bias->numel() != w.dim(1) * group_))
      return run_reference(ctx);
    PG_ASSIGN_OR_RETURN(WindowGeometry g, resolve_transpose_window(ctx.node(), {x.dim(2), x.dim(3)},
                                                                   {w.dim(2), w.dim(3)}));
    Tensor &y = ctx.output(0);
    const int64_t m_g = w.dim(1), out_c = m_g * group_;
    if (y.rank() != 4 || y.dim(1) != out_c || y.dim(2) != g.output[0] || y.dim(3) != g.output[1])
      return run_reference(ctx);
    if (y.numel() == 0) return Status::ok();
    const ConvTransposeShape s{x.dim(2),       x.dim(3),       g.output[0],     g.output[1],
                               w.dim(2),       w.dim(3),       g.strides[0],    g.strides[1],
                               g.dilations[0], g.dilations[1], g.pads_begin[0], g.pads_begin[1]};
    const int64_t batch = x.dim(0), c_g = x.dim(1) / group_;
    const int64_t kernel = s.kh * s.kw, rows = m_g * kernel;
    const int64_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w;
    const float *px = x.data<float>();
    const float *pw = w.data<float>();
    const float *pb = bias ? bias->data<float>() : nullptr;
    float *py = y.data<float>();
    const int threads = ctx.num_threads();
    for (int64_t t = 0; t < batch * out_c; ++t)
      std::fill(py + t * out_plane, py + (t + 1) * out_plane, pb ? pb[t % out_c] : 0.0f);
    if (in_plane == 0 || rows == 0) return Status::ok();
    const bool use_packed = static_cast<int64_t>(packed_w_.size()) == group_ &&
                            packed_w_[0].rows() == rows && packed_w_[0].cols() == c_g;
    const bool use_bf16 = static_cast<int64_t>(packed_w_bf16_.size()) == group_ &&
                          packed_w_bf16_[0].rows() == rows && packed_w_bf16_[0].cols() == c_g;
    const int64_t chunk_rows =
        std::clamp<int64_t>(kColFloats / std::max<int64_t>(1, rows * s.in_w), 1, s.in_h);
    float *col = conv_scratch_floats(static_cast<size_t>(rows * chunk_rows * s.in_w));  // (rows, cols)
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t grp = 0; grp < group_; ++grp) {
        const float *x_group = px + (n * x.dim(1) + grp * c_g) * in_plane;  // (C_g, H * W)
        float *y_group = py + (n * out_c + grp * m_g) * out_plane;          // (M_g, OH * OW)
        const GemmOperand a = use_packed
                                  ? GemmOperand::of(packed_w_[static_cast<size_t>(grp)])
                                  : GemmOperand::of(pw + grp * c_g * rows, 1, rows);  // W_g^T view
        for (int64_t ih0 = 0; ih0 < s.in_h; ih0 += chunk_rows) {
          const int64_t rows_in = std::min(chunk_rows, s.in_h - ih0), cols = rows_in * s.in_w;
          if (use_bf16)
            bf16_gemm(*packed_w_bf16_[0].kernel(), rows, cols, c_g,
                      Bf16GemmOperand::of(packed_w_bf16_[static_cast<size_t>(grp)]),
                      Bf16GemmOperand::of(x_group + ih0 * s.in_w, in_plane, 1), col, cols, 1.0f,
                      0.0f, GemmEpilogue{}, gemm_.epilogue, threads);
          else
            f32_gemm(gemm_, rows, cols, c_g, a,
                     GemmOperand::of(x_group + ih0 * s.in_w, in_plane, 1), col, cols, 1.0f, 0.0f,
                     GemmEpilogue{}, threads);
          auto channel_task = [&](int64_t oc, int) {
            col2im_channel(col + oc * kernel * cols, cols, ih0, rows_in, s,
                           y_group + oc * out_plane);
          };
          cpu_thread_pool().parallel_for(m_g, threads, channel_task);
        }
      }
    }
    return Status::ok();
  }

 private:
  const GemmKernelInfo &gemm_;
  int64_t group_;
  std::vector<PackedMatrix> packed_w_;  // one W_g^T (M_g * KH * KW, C_g) per group
  std::vector<Bf16PackedMatrix> packed_w_bf16_;  // the same in bf16, at bf16 precision
};

}  // namespace

Expected<std::unique_ptr<PreparedKernel>> prepare_conv_transpose(
    const ir::Node &node, const std::vector<const Tensor *> &constants) {
  ir::AttrView attrs(node);
  PG_ASSIGN_OR_RETURN(int64_t group, attrs.get_int("group", 1));
  if (group < 1) return invalid_model(node.describe() + ": attribute 'group' must be >= 1");
  const Tensor *w = constants.size() > 1 ? constants[1] : nullptr;
  return std::unique_ptr<PreparedKernel>(
      std::make_unique<ConvTransposeKernel>(
          f32_gemm_kernel(), node.precision == Precision::kBFloat16 ? bf16_gemm_kernel() : nullptr,
          group, w));
}

}  // namespace peregrine::cpu
