// CPU kernel of 1-D and 3-D convolution (float32, any strides, dilations, pads and groups; the
// fused forms' bias, residual and activation in the GEMM epilogue). Both are one GEMM shape with
// the spatial dims padded to three, (D, H, W) with 1s: per group, A = the weights (Cout_g,
// K = Cin_g * KD * KH * KW), packed once; B = the im2col matrix (K, N) of a run of output rows
// ((depth, height) pairs of OW columns), materialized in a scratch buffer of about kIm2colBytes
// (threads fill its rows); C = those output rows, contiguous per channel (row stride
// OD * OH * OW). 1-D convs are one output row: B is (Cin_g * KW, OW). 2-D convs have their own
// kernel (kernels/conv.cc). Where the phase-plane rule below takes a conv (most 3-D and 1-D convs
// with more than one tap), it runs on shifted views of the padded input instead of an im2col
// copy (kernels/conv_phase_planes.h). At bf16 precision (groups of at least the bf16 tile's 14
// rows, as in kernels/conv.cc) the weights are packed in bf16 and each block is a bf16 GEMM.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm/bf16_gemm.h"
#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/kernels/conv_phase_planes.h"
#include "backends/cpu/kernels/conv_scratch.h"
#include "backends/cpu/kernels/conv_winograd_f4x3.h"
#include "backends/cpu/thread_pool.h"
#include "ops/conv_geometry.h"

namespace peregrine::cpu {

namespace {

// Scratch for one im2col block: large enough that the GEMM sees N in the thousands, small
// enough to stay near L2 / L3 on the machines we target.
constexpr int64_t kIm2colBytes = 4 << 20;
// The rule for the phase-plane GEMM: enough useful columns (its rule for 2-D convs asks more,
// where the im2col it competes with is packed once, not materialized and then packed: r3d_18's
// 3x3x3 convs on 7x7 maps gain at 0.6, `peregrine profile` of bench/real_models' r3d_18), and K
// long enough that the GEMM is not bound by C's stores, which the planes' column-major tile
// order spreads over many pages (wav2vec2's first conv, K = 10, is faster on im2col). The
// planes hold the whole padded input and C a whole output: beyond kMaxPhasePlanesBytes of
// scratch the im2col blocks, bounded by kIm2colBytes, take the conv.
constexpr double kMinPhasePlanesUsefulFraction = 0.5;
constexpr int64_t kMinPhasePlanesK = 64;
constexpr int64_t kMaxPhasePlanesBytes = int64_t{128} << 20;

struct Geometry3 {
  int64_t in[3], out[3], k[3], stride[3], dil[3], pad[3];
};

class ConvNdKernel : public PreparedKernel {
 public:
  // bf16: the bf16 GEMM at bf16 precision, else nullptr.
  ConvNdKernel(const GemmKernelInfo& gemm, const Bf16GemmKernelInfo* bf16, int64_t group,
               const Tensor* w, const FusedEpilogue& fused, ConvAlgoChoice algo)
      : gemm_(gemm), group_(group), fused_(fused), algo_(algo) {
    if (w && w->dim(0) % group == 0) {
      const int64_t out_c_g = w->dim(0) / group, k = w->numel() / w->dim(0);
      for (int64_t g = 0; g < group; ++g) {
        const MatrixView wg{w->data<float>() + g * out_c_g * k, k, 1};
        if (bf16 && out_c_g >= bf16->mr)
          packed_bf16_.push_back(Bf16PackedMatrix::pack_a(*bf16, wg, out_c_g, k));
        else
          packed_.push_back(PackedMatrix::pack_a(gemm, wg, out_c_g, k));
      }
    }
  }
  std::string name() const override {
    if (last_run_planes_) return std::string("cpu/conv_nd-phase_planes-") + gemm_.name;
    return std::string("cpu/conv_nd-") +
           (packed_bf16_.empty() ? gemm_.name : packed_bf16_[0].kernel()->name);
  }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    const int64_t rank = x.rank();
    if (x.dtype() != DType::kFloat32 || w.dtype() != DType::kFloat32 || (rank != 3 && rank != 5) ||
        w.rank() != rank || (bias && (bias->dtype() != DType::kFloat32 || bias->numel() != w.dim(0))))
      return fallback(ctx);
    if (w.dim(1) * group_ != x.dim(1) || w.dim(0) % group_ != 0) return fallback(ctx);
    const size_t spatial = static_cast<size_t>(rank - 2);
    Shape in_sp(x.shape().begin() + 2, x.shape().end());
    std::vector<int64_t> k_sp(w.shape().begin() + 2, w.shape().end());
    if (!window_ || in_sp != in_sp_ || k_sp != k_sp_) {
      PG_ASSIGN_OR_RETURN(WindowGeometry g, resolve_window(ctx.node(), in_sp, k_sp, false));
      window_ = std::move(g);
      in_sp_ = in_sp;
      k_sp_ = k_sp;
    }
    Geometry3 g;
    for (size_t i = 0; i < 3; ++i) {
      const bool real = i + spatial >= 3;  // 1-D fills W only
      const size_t j = real ? i + spatial - 3 : 0;
      g.in[i] = real ? in_sp[j] : 1;
      g.out[i] = real ? window_->output[j] : 1;
      g.k[i] = real ? k_sp[j] : 1;
      g.stride[i] = real ? window_->strides[j] : 1;
      g.dil[i] = real ? window_->dilations[j] : 1;
      g.pad[i] = real ? window_->pads_begin[j] : 0;
    }
    Tensor& y = ctx.output_for_overwrite(0);
    if (y.numel() == 0) return Status::ok();
    bool broadcast_z = false;
    const Tensor* z = residual_input(ctx, fused_, y, &broadcast_z);
    if (broadcast_z) return fallback(ctx);
    const int64_t batch = x.dim(0), in_c = x.dim(1), out_c = w.dim(0);
    const int64_t in_c_g = in_c / group_, out_c_g = out_c / group_;
    const int64_t taps = g.k[0] * g.k[1] * g.k[2], k = in_c_g * taps;
    const int64_t out_sp = g.out[0] * g.out[1] * g.out[2];
    const int64_t in_sp_n = g.in[0] * g.in[1] * g.in[2];
    const bool use_packed = static_cast<int64_t>(packed_.size()) == group_ &&
                            packed_[0].rows() == out_c_g && packed_[0].cols() == k;
    const bool use_bf16 = static_cast<int64_t>(packed_bf16_.size()) == group_ &&
                          packed_bf16_[0].rows() == out_c_g && packed_bf16_[0].cols() == k;
    if (!use_packed && !packed_.empty()) return fallback(ctx);
    if (!use_bf16 && !packed_bf16_.empty()) return run_reference(ctx);  // fp32 weights kept
    const float* px = x.data<float>();
    const float* pw = w.data<float>();
    float* py = y.data<float>();
    const int threads = ctx.num_threads();
    auto epilogue = [&](int64_t grp, int64_t y_off) {
      GemmEpilogue ep = activation_epilogue(fused_);
      ep.residual = z ? z->data<float>() + y_off : nullptr;
      ep.ldr = out_sp;
      if (bias) {
        ep.bias_kind = GemmEpilogue::Bias::kPerRow;
        ep.bias = bias->data<float>() + grp * out_c_g;
      }
      return ep;
    };
    const PhasePlanesConvShape planes{
        .in_c = in_c_g, .in_h = g.in[1], .in_w = g.in[2],
        .out_c = out_c_g, .out_h = g.out[1], .out_w = g.out[2],
        .kh = g.k[1], .kw = g.k[2],
        .stride_h = g.stride[1], .stride_w = g.stride[2], .dil_h = g.dil[1], .dil_w = g.dil[2],
        .pad_t = g.pad[1], .pad_l = g.pad[2],
        .in_d = g.in[0], .out_d = g.out[0], .kd = g.k[0],
        .stride_d = g.stride[0], .dil_d = g.dil[0], .pad_f = g.pad[0]};  // (D, H, W) of Geometry3
    last_run_planes_ = use_packed && gemm_.indirect_ukernel != nullptr && taps > 1 &&
                       (algo_ == ConvAlgoChoice::kPhasePlanes ||
                        (algo_ == ConvAlgoChoice::kAuto && k >= kMinPhasePlanesK &&
                         phase_planes_useful_fraction(planes) >= kMinPhasePlanesUsefulFraction &&
                         phase_planes_scratch_floats(planes) * 4 <= kMaxPhasePlanesBytes));
    if (last_run_planes_) {
      float* scratch =
          conv_scratch_floats(static_cast<size_t>(phase_planes_scratch_floats(planes)));
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t grp = 0; grp < group_; ++grp) {
          const int64_t y_off = (n * out_c + grp * out_c_g) * out_sp;
          conv_phase_planes(gemm_, packed_[static_cast<size_t>(grp)],
                            px + (n * in_c + grp * in_c_g) * in_sp_n, planes, py + y_off,
                            epilogue(grp, y_off), scratch, threads);
        }
      return Status::ok();
    }
    // Output rows (depth slice, output row) per im2col block: consecutive ones are consecutive
    // columns of C, so a block is one GEMM.
    const int64_t rows = g.out[0] * g.out[1];
    const int64_t per_block = std::clamp<int64_t>(
        kIm2colBytes / std::max<int64_t>(1, k * g.out[2] * 4), 1, rows);
    float* col = conv_scratch_floats(static_cast<size_t>(k * per_block * g.out[2]));
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t grp = 0; grp < group_; ++grp) {
        const float* xg = px + (n * in_c + grp * in_c_g) * in_sp_n;
        const int64_t y_off = (n * out_c + grp * out_c_g) * out_sp;
        for (int64_t r0 = 0; r0 < rows; r0 += per_block) {
          const int64_t nr = std::min(per_block, rows - r0), cols = nr * g.out[2];
          fill_im2col(xg, g, r0, nr, taps, k, col, threads);
          const GemmEpilogue ep = epilogue(grp, y_off + r0 * g.out[2]);
          if (use_bf16) {
            bf16_gemm(*packed_bf16_[0].kernel(), out_c_g, cols, k,
                      Bf16GemmOperand::of(packed_bf16_[static_cast<size_t>(grp)]),
                      Bf16GemmOperand::of(col, cols, 1), py + y_off + r0 * g.out[2], out_sp,
                      1.0f, 0.0f, ep, gemm_.epilogue, threads);
            continue;
          }
          const GemmOperand a = use_packed ? GemmOperand::of(packed_[static_cast<size_t>(grp)])
                                           : GemmOperand::of(pw + grp * out_c_g * k, k, 1);
          f32_gemm(gemm_, out_c_g, cols, k, a, GemmOperand::of(col, cols, 1),
                   py + y_off + r0 * g.out[2], out_sp, 1.0f, 0.0f, ep, threads);
        }
      }
    }
    return Status::ok();
  }

 private:
  // col (K, nr * OW): row r = (ci, kd, kh, kw), column = output row r0 + i (a (depth, height)
  // pair) times OW plus the output column.
  static void fill_im2col(const float* x, const Geometry3& g, int64_t r0, int64_t nr,
                          int64_t taps, int64_t k, float* col, int threads) {
    const int64_t cols = nr * g.out[2], plane = g.in[1] * g.in[2];
    cpu_thread_pool().parallel_for(k, threads, [&](int64_t r, int) {
      const int64_t ci = r / taps, t = r % taps;
      const int64_t kd = t / (g.k[1] * g.k[2]), kh = (t / g.k[2]) % g.k[1], kw = t % g.k[2];
      float* row = col + r * cols;
      const float* xc = x + ci * g.in[0] * plane;
      // Output columns whose input column is inside: ow in [q0, q1).
      const int64_t off = kw * g.dil[2] - g.pad[2], sw = g.stride[2];
      const int64_t q0 = std::min(g.out[2], off >= 0 ? 0 : (-off + sw - 1) / sw);
      int64_t q1 = g.in[2] - off <= 0 ? 0 : (g.in[2] - off + sw - 1) / sw;
      q1 = std::clamp(q1, q0, g.out[2]);
      for (int64_t i = 0; i < nr; ++i) {
        const int64_t od = (r0 + i) / g.out[1], oh = (r0 + i) % g.out[1];
        const int64_t id = od * g.stride[0] + kd * g.dil[0] - g.pad[0];
        const int64_t ih = oh * g.stride[1] + kh * g.dil[1] - g.pad[1];
        float* o = row + i * g.out[2];
        if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
          std::fill(o, o + g.out[2], 0.0f);
          continue;
        }
        const float* xr = xc + id * plane + ih * g.in[2] + off;
        std::fill(o, o + q0, 0.0f);
        if (sw == 1) {
          std::memcpy(o + q0, xr + q0, static_cast<size_t>(q1 - q0) * sizeof(float));
        } else {
          for (int64_t q = q0; q < q1; ++q) o[q] = xr[q * sw];
        }
        std::fill(o + q1, o + g.out[2], 0.0f);
      }
    });
  }

  Status fallback(KernelContext& ctx) {
    if (packed_.empty()) return run_reference(ctx);
    Tensor w = Tensor::zeros(DType::kFloat32, ctx.input(1).shape());
    const int64_t group_floats = packed_[0].rows() * packed_[0].cols();
    for (size_t g = 0; g < packed_.size(); ++g)
      packed_[g].unpack(w.data<float>() + static_cast<int64_t>(g) * group_floats);
    return run_reference_with_input(ctx, 1, std::move(w));
  }

  const GemmKernelInfo& gemm_;
  int64_t group_;
  FusedEpilogue fused_;
  ConvAlgoChoice algo_;
  std::atomic<bool> last_run_planes_{false};  // conv_phase_planes, for name()
  std::vector<PackedMatrix> packed_;  // one (Cout_g, K) A per group
  std::vector<Bf16PackedMatrix> packed_bf16_;  // the same in bf16, at bf16 precision
  std::optional<WindowGeometry> window_;
  Shape in_sp_;
  std::vector<int64_t> k_sp_;
};

}  // namespace

Expected<std::unique_ptr<PreparedKernel>> prepare_conv_nd(const ir::Node& node, const Tensor* w,
                                                          const FusedEpilogue& fused) {
  ir::AttrView attrs(node);
  PG_ASSIGN_OR_RETURN(int64_t group, attrs.get_int("group", 1));
  if (group < 1) return invalid_model(node.describe() + ": attribute 'group' must be >= 1");
  // PEREGRINE_CONV_ALGO: "planes" forces the phase-plane GEMM, "im2col" the im2col blocks.
  PG_ASSIGN_OR_RETURN(ConvAlgoChoice algo, conv_algo_from_env());
  const int64_t rows = w ? w->dim(0) / group : 0;
  return std::unique_ptr<PreparedKernel>(
      new ConvNdKernel(f32_gemm_kernel_for_shape(rows, 0),
                       node.precision == Precision::kBFloat16 ? bf16_gemm_kernel() : nullptr, group,
                       w, fused, algo));
}

}  // namespace peregrine::cpu
