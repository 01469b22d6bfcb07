// CPU kernels of MatMul and Gemm (float32) on the f32_gemm driver. Constant B operands
// (weights) are packed once at prepare time; anything else is packed per run by the driver.
// With a packed B and M <= kGemvMaxM rows, the small-M path (gemm/f32_gemv.h) reads B once.
// A node at bf16 precision (passes/assign_precision.h) with a constant 2-D B packs it once in
// bf16 and runs the bf16 GEMM (gemm/bf16_gemm.h), A converted while packed; the float32 B is
// kept for the cases that path does not take, which run in float32.
#include <algorithm>
#include <atomic>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm/bf16_gemm.h"
#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/gemm/f32_gemv.h"
#include "backends/cpu/thread_pool.h"
#include "backends/reference/kernel_helpers.h"
#include "ops/matmul_util.h"

namespace peregrine::cpu {

namespace {

GemmEpilogue with_residual(GemmEpilogue ep, const float* residual) {
  ep.residual = residual;
  return ep;
}

// The Z input of a fused node when it is a row vector of N values (shape (N) or (..., 1, N)):
// MatMul + bias, applied as the epilogue's per-column bias. nullptr otherwise.
const float* column_bias(const KernelContext& ctx, const FusedEpilogue& fused, int64_t n) {
  if (fused.z_input < 0 || !ctx.has_input(static_cast<size_t>(fused.z_input))) return nullptr;
  const Tensor& z = ctx.input(static_cast<size_t>(fused.z_input));
  if (z.dtype() != DType::kFloat32 || z.rank() == 0 || z.numel() != n || z.dim(z.rank() - 1) != n)
    return nullptr;
  return z.data<float>();
}

// The Z input of a fused MatMul when its last two dims are (M, N) and its batch dims broadcast
// to the output's (rank <= the output's). nullptr otherwise.
const Tensor* matrix_broadcast_z(const KernelContext& ctx, const FusedEpilogue& fused,
                                 const Tensor& out, int64_t m, int64_t n) {
  if (fused.z_input < 0 || !ctx.has_input(static_cast<size_t>(fused.z_input))) return nullptr;
  const Tensor& z = ctx.input(static_cast<size_t>(fused.z_input));
  if (z.dtype() != DType::kFloat32 || z.rank() < 2 || z.rank() > out.rank()) return nullptr;
  if (z.dim(z.rank() - 2) != m || z.dim(z.rank() - 1) != n) return nullptr;
  const int64_t lead = out.rank() - z.rank();
  for (int64_t d = 0; d + 2 < z.rank(); ++d)
    if (z.dim(d) != 1 && z.dim(d) != out.dim(d + lead)) return nullptr;
  return &z;
}

// MatMul: numpy semantics. A 2-D constant B is packed once; the batch dims of A then fold
// into M (A is contiguous), giving one GEMM of (batch * M, K) x (K, N).
class MatMulKernel : public PreparedKernel {
 public:
  MatMulKernel(const GemmKernelInfo& gemm, const Bf16GemmKernelInfo* bf16,
               const Tensor* constant_b, const FusedEpilogue& fused)
      : gemm_(gemm), fused_(fused) {
    if (bf16 && constant_b && constant_b->rank() == 2) {
      const int64_t k = constant_b->dim(0), n = constant_b->dim(1);
      packed_b_bf16_ = std::make_unique<Bf16PackedMatrix>(
          Bf16PackedMatrix::pack_b(*bf16, MatrixView{constant_b->data<float>(), n, 1}, k, n));
      last_run_bf16_ = true;  // the name before any run: what a run will take
    } else if (constant_b && constant_b->rank() == 2) {
      const int64_t k = constant_b->dim(0), n = constant_b->dim(1);
      packed_b_ = std::make_unique<PackedMatrix>(
          PackedMatrix::pack_b(gemm, MatrixView{constant_b->data<float>(), n, 1}, k, n));
    }
  }

  std::string name() const override {
    return std::string("cpu/") + (last_run_bf16_ ? packed_b_bf16_->kernel()->name : gemm_.name);
  }

  // The packed B is all the kernel reads of a constant B (see run_reference_on_b).
  bool reads_constant_data(size_t input) const override { return input != 1 || !packed_b_; }

  Status run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    last_run_bf16_ = false;
    if (a.dtype() != DType::kFloat32 || b.dtype() != DType::kFloat32 || a.rank() == 0 ||
        b.rank() == 0)
      return run_reference_on_b(ctx);
    Shape a2 = a.rank() == 1 ? Shape{1, a.dim(0)} : a.shape();
    Shape b2 = b.rank() == 1 ? Shape{b.dim(0), 1} : b.shape();
    const int64_t m = a2[a2.size() - 2], k = a2.back(), n = b2.back();
    if (b2[b2.size() - 2] != k)
      return ctx.error("inner dims do not match: " + shape_to_string(a.shape()) + " x " +
                       shape_to_string(b.shape()));
    Tensor& out = ctx.output_for_overwrite(0);
    if (out.numel() == 0) return Status::ok();
    float* po = out.data<float>();
    bool broadcast_z = false;
    const Tensor* z = residual_input(ctx, fused_, out, &broadcast_z);
    const float* bias = broadcast_z ? column_bias(ctx, fused_, n) : nullptr;
    // Z with full (M, N) matrices broadcast over the batch (Swin's relative position bias, an
    // attention mask): each product's residual is Z's matrix at its batch index.
    const Tensor* batch_z = broadcast_z && !bias ? matrix_broadcast_z(ctx, fused_, out, m, n) : nullptr;
    if (broadcast_z && !bias && !batch_z) return run_reference_on_b(ctx);
    const float* pz = z ? z->data<float>() : nullptr;
    GemmEpilogue ep = activation_epilogue(fused_);
    ep.ldr = n;
    if (bias) {  // MatMul + bias (Z a row vector): the epilogue's per-column bias
      ep.bias_kind = GemmEpilogue::Bias::kPerColumn;
      ep.bias = bias;
    }
    const int threads = ctx.num_threads();
    if (packed_b_bf16_ && b.rank() == 2 && packed_b_bf16_->rows() == k &&
        packed_b_bf16_->cols() == n && !batch_z) {
      last_run_bf16_ = true;
      const int64_t rows = k == 0 ? out.numel() / n : a.numel() / k;  // batch * M
      bf16_gemm(*packed_b_bf16_->kernel(), rows, n, k, Bf16GemmOperand::of(a.data<float>(), k, 1),
                Bf16GemmOperand::of(*packed_b_bf16_), po, n, 1.0f, 0.0f, with_residual(ep, pz),
                gemm_.epilogue, threads);
      return Status::ok();
    }
    if (packed_b_ && b.rank() == 2 && packed_b_->rows() == k && packed_b_->cols() == n &&
        !batch_z) {
      const int64_t rows = a.numel() / std::max<int64_t>(k, 1);  // batch * M
      if (k > 0 && f32_gemv_applies(gemm_, rows, *packed_b_)) {  // small M: B read once, no packing
        f32_gemv(gemm_, rows, n, k, a.data<float>(), k, *packed_b_, po, n, 1.0f, 0.0f,
                 with_residual(ep, pz), threads);
        return Status::ok();
      }
      f32_gemm(gemm_, k == 0 ? out.numel() / n : rows, n, k, GemmOperand::of(a.data<float>(), k, 1),
               GemmOperand::of(*packed_b_), po, n, 1.0f, 0.0f, with_residual(ep, pz), threads);
      return Status::ok();
    }
    Shape batch_a(a2.begin(), a2.end() - 2), batch_b(b2.begin(), b2.end() - 2);
    const size_t batch_rank = std::max(batch_a.size(), batch_b.size());
    Shape batch_out(out.shape().begin(), out.shape().begin() + static_cast<int64_t>(batch_rank));
    int64_t batches = 1;
    for (int64_t d : batch_out) batches *= d;
    BroadcastIndexer index_a(batch_a, batch_out), index_b(batch_b, batch_out);
    Shape batch_zs;
    if (batch_z) batch_zs.assign(batch_z->shape().begin(), batch_z->shape().end() - 2);
    BroadcastIndexer index_z(batch_zs, batch_out);
    if (packed_b_ && !batch_z) return run_reference_on_b(ctx);  // a packed B that no longer fits A
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    const float* pzb = batch_z ? batch_z->data<float>() : nullptr;
    auto one = [&](int64_t batch, int gemm_threads) {
      const float* zb = pz ? pz + batch * m * n : pzb ? pzb + index_z(batch) * m * n : nullptr;
      const GemmEpilogue e = with_residual(ep, zb);
      if (packed_b_) {  // a constant 2-D B with a batch-broadcast Z
        f32_gemm(gemm_, m, n, k, GemmOperand::of(pa + index_a(batch) * m * k, k, 1),
                 GemmOperand::of(*packed_b_), po + batch * m * n, n, 1.0f, 0.0f, e, gemm_threads);
        return;
      }
      f32_gemm(gemm_, m, n, k, GemmOperand::of(pa + index_a(batch) * m * k, k, 1),
               GemmOperand::of(pb + index_b(batch) * k * n, n, 1), po + batch * m * n, n, 1.0f,
               0.0f, e, gemm_threads);
    };
    if (batches >= threads) {
      // Many small products (attention heads): one thread per product.
      auto task = [&](int64_t batch, int) { one(batch, 1); };
      cpu_thread_pool().parallel_for(batches, threads, task);
    } else {
      for (int64_t batch = 0; batch < batches; ++batch) one(batch, threads);
    }
    return Status::ok();
  }

 private:
  // The reference kernel on B unpacked from packed_b_: the executor may have freed the
  // constant B this kernel packed. Rare (unusual dtypes or broadcasts), so it may allocate.
  Status run_reference_on_b(KernelContext& ctx) {
    if (!packed_b_) return run_reference(ctx);
    Tensor b = Tensor::zeros(DType::kFloat32, {packed_b_->rows(), packed_b_->cols()});
    packed_b_->unpack(b.data<float>());
    return run_reference_with_input(ctx, 1, std::move(b));
  }

  const GemmKernelInfo& gemm_;
  FusedEpilogue fused_;
  std::unique_ptr<PackedMatrix> packed_b_;
  std::unique_ptr<Bf16PackedMatrix> packed_b_bf16_;  // at bf16 precision, instead of packed_b_
  std::atomic<bool> last_run_bf16_{false};
};

// Gemm: Y = alpha * op(A) * op(B) + beta * C. A constant B is packed once (op applied). C of
// shape (N) / (1, N) or (M, 1) with beta == 1 becomes the epilogue's bias; any other C is
// broadcast into Y first and scaled by beta in the product.
class GemmKernel : public PreparedKernel {
 public:
  GemmKernel(const GemmKernelInfo& gemm, const Bf16GemmKernelInfo* bf16, bool trans_a,
             bool trans_b, float alpha, float beta, const Tensor* constant_b,
             const FusedEpilogue& fused)
      : gemm_(gemm),
        fused_(fused),
        trans_a_(trans_a),
        trans_b_(trans_b),
        alpha_(alpha),
        beta_(beta) {
    if (constant_b && constant_b->rank() == 2) {
      const int64_t rows = constant_b->dim(0), cols = constant_b->dim(1);
      const int64_t k = trans_b ? cols : rows, n = trans_b ? rows : cols;
      MatrixView v{constant_b->data<float>(), trans_b ? 1 : cols, trans_b ? cols : 1};
      if (bf16) {
        packed_b_bf16_ =
            std::make_unique<Bf16PackedMatrix>(Bf16PackedMatrix::pack_b(*bf16, v, k, n));
        last_run_bf16_ = true;  // the name before any run: what a run will take
      } else {
        packed_b_ = std::make_unique<PackedMatrix>(PackedMatrix::pack_b(gemm, v, k, n));
      }
    }
  }

  std::string name() const override {
    return std::string("cpu/") + (last_run_bf16_ ? packed_b_bf16_->kernel()->name : gemm_.name);
  }

  // The packed op(B) is all the kernel reads of a constant B (see run_reference_on_b).
  bool reads_constant_data(size_t input) const override { return input != 1 || !packed_b_; }

  Status run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const bool has_c = ctx.has_input(2) && beta_ != 0.0f;
    last_run_bf16_ = false;
    if (a.dtype() != DType::kFloat32 || b.dtype() != DType::kFloat32 || a.rank() != 2 ||
        b.rank() != 2 || (has_c && ctx.input(2).dtype() != DType::kFloat32))
      return run_reference_on_b(ctx);
    const int64_t m = trans_a_ ? a.dim(1) : a.dim(0), k = trans_a_ ? a.dim(0) : a.dim(1);
    const int64_t n = trans_b_ ? b.dim(0) : b.dim(1);
    if ((trans_b_ ? b.dim(1) : b.dim(0)) != k) return ctx.error("inner dims of A and B differ");
    const Shape mn{m, n};
    float beta = 0.0f;
    Tensor& out = ctx.output_for_overwrite(0);
    if (out.numel() == 0) return Status::ok();
    bool broadcast_z = false;
    const Tensor* z = residual_input(ctx, fused_, out, &broadcast_z);
    if (broadcast_z) return run_reference_on_b(ctx);
    GemmEpilogue ep = with_residual(activation_epilogue(fused_), z ? z->data<float>() : nullptr);
    ep.ldr = n;
    float* po = out.data<float>();
    if (has_c) {
      const Tensor& c = ctx.input(2);
      const Shape& cs = c.shape();
      if (cs.size() > 2) return ctx.error("C must have rank <= 2");
      for (size_t i = 0; i < cs.size(); ++i)
        if (cs[cs.size() - 1 - i] != 1 && cs[cs.size() - 1 - i] != mn[1 - i])
          return ctx.error("C of shape " + shape_to_string(cs) + " cannot be broadcast to " +
                           shape_to_string(mn));
      const bool per_col = c.numel() == n && (cs.size() == 1 || (cs.size() == 2 && cs[0] == 1));
      const bool per_row = cs.size() == 2 && cs[0] == m && cs[1] == 1;
      if (beta_ == 1.0f && per_col && n > 1) {
        ep.bias_kind = GemmEpilogue::Bias::kPerColumn;
        ep.bias = c.data<float>();
      } else if (beta_ == 1.0f && per_row && m > 1) {
        ep.bias_kind = GemmEpilogue::Bias::kPerRow;
        ep.bias = c.data<float>();
      } else {
        BroadcastIndexer index_c(cs, mn);
        const float* pc = c.data<float>();
        for (int64_t i = 0; i < m * n; ++i) po[i] = pc[index_c(i)];
        beta = beta_;
      }
    }
    if (packed_b_bf16_ && packed_b_bf16_->rows() == k && packed_b_bf16_->cols() == n) {
      last_run_bf16_ = true;
      bf16_gemm(*packed_b_bf16_->kernel(), m, n, k,
                Bf16GemmOperand::of(a.data<float>(), trans_a_ ? 1 : k, trans_a_ ? m : 1),
                Bf16GemmOperand::of(*packed_b_bf16_), po, n, alpha_, beta, ep, gemm_.epilogue,
                ctx.num_threads());
      return Status::ok();
    }
    const GemmOperand op_a = GemmOperand::of(a.data<float>(), trans_a_ ? 1 : k, trans_a_ ? m : 1);
    const bool use_packed = packed_b_ && packed_b_->rows() == k && packed_b_->cols() == n;
    if (packed_b_ && !use_packed) return run_reference_on_b(ctx);  // B's data may be freed
    const GemmOperand op_b =
        use_packed ? GemmOperand::of(*packed_b_)
                   : GemmOperand::of(b.data<float>(), trans_b_ ? 1 : n, trans_b_ ? k : 1);
    if (use_packed && !trans_a_ && k > 0 && f32_gemv_applies(gemm_, m, *packed_b_)) {
      f32_gemv(gemm_, m, n, k, a.data<float>(), k, *packed_b_, po, n, alpha_, beta, ep,
               ctx.num_threads());
      return Status::ok();
    }
    f32_gemm(gemm_, m, n, k, op_a, op_b, po, n, alpha_, beta, ep, ctx.num_threads());
    return Status::ok();
  }

 private:
  // The reference kernel on B restored from packed_b_ (op(B) unpacked, transposed back when
  // transB): the executor may have freed the constant B. Rare, so it may allocate.
  Status run_reference_on_b(KernelContext& ctx) {
    if (!packed_b_) return run_reference(ctx);
    const int64_t k = packed_b_->rows(), n = packed_b_->cols();
    Tensor op_b = Tensor::zeros(DType::kFloat32, {k, n});
    packed_b_->unpack(op_b.data<float>());
    if (!trans_b_) return run_reference_with_input(ctx, 1, std::move(op_b));
    Tensor b = Tensor::zeros(DType::kFloat32, {n, k});
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) b.data<float>()[j * k + p] = op_b.data<float>()[p * n + j];
    return run_reference_with_input(ctx, 1, std::move(b));
  }

  const GemmKernelInfo& gemm_;
  FusedEpilogue fused_;
  bool trans_a_, trans_b_;
  float alpha_, beta_;
  std::unique_ptr<PackedMatrix> packed_b_;
  std::unique_ptr<Bf16PackedMatrix> packed_b_bf16_;  // at bf16 precision, instead of packed_b_
  std::atomic<bool> last_run_bf16_{false};
};

const Bf16GemmKernelInfo* bf16_kernel_of(const ir::Node& node) {
  return node.precision == Precision::kBFloat16 ? bf16_gemm_kernel() : nullptr;
}

}  // namespace

Expected<std::unique_ptr<PreparedKernel>> prepare_matmul(
    const ir::Node& node, const std::vector<const Tensor*>& constants, const FusedEpilogue& fused) {
  const Tensor* b = constants.size() > 1 ? constants[1] : nullptr;
  // A constant B fixes N (its last dimension); M (rows of A) is not known yet.
  const int64_t n = b && b->rank() >= 2 ? b->dim(b->rank() - 1) : 0;
  return std::unique_ptr<PreparedKernel>(
      std::make_unique<MatMulKernel>(f32_gemm_kernel_for_shape(0, n), bf16_kernel_of(node), b, fused));
}

Expected<std::unique_ptr<PreparedKernel>> prepare_gemm(const ir::Node& node,
                                                       const std::vector<const Tensor*>& constants,
                                                       const FusedEpilogue& fused) {
  ir::AttrView attrs(node);
  PG_ASSIGN_OR_RETURN(int64_t trans_a, attrs.get_int("transA", 0));
  PG_ASSIGN_OR_RETURN(int64_t trans_b, attrs.get_int("transB", 0));
  PG_ASSIGN_OR_RETURN(float alpha, attrs.get_float("alpha", 1.0f));
  PG_ASSIGN_OR_RETURN(float beta, attrs.get_float("beta", 1.0f));
  const Tensor* b = constants.size() > 1 ? constants[1] : nullptr;
  const int64_t n = b && b->rank() == 2 ? b->dim(trans_b != 0 ? 0 : 1) : 0;
  return std::unique_ptr<PreparedKernel>(std::make_unique<GemmKernel>(
      f32_gemm_kernel_for_shape(0, n), bf16_kernel_of(node), trans_a != 0, trans_b != 0, alpha,
      beta, b, fused));
}

}  // namespace peregrine::cpu
