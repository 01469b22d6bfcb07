// CPU kernel of peregrine.QGemm (passes/fuse_qdq_matmul.cc's quantized MatMul / Gemm): uint8
// activations A [rows, K] times int8 weights packed once, on the integer GEMM of
// gemm/qu8_gemm.h. The GEMM's int8 operand is the weights (its rows are the N output
// features) and its uint8 operand the activations read as B^T, so it computes Y^T; a blocked
// byte transpose writes Y. The activation zero point folds into the bias:
//   acc[n, r] = sum_k w[n, k] (a[r, k] - a_zp) + C[n] = sum_k w a + (C[n] - a_zp * rowsum(w)[n])
// Weights, scales and zero points must be initializers (weight zero points zero); other cases
// run the reference kernel.
#include <algorithm>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm/aligned_buffer.h"
#include "backends/cpu/gemm/qu8_gemm.h"
#include "backends/cpu/kernels/byte_transpose.h"
#include "backends/cpu/kernels/vector_ops.h"
#include "backends/cpu/thread_pool.h"

namespace peregrine::cpu {

namespace {

enum Input { kA, kAScale, kAZero, kB, kBScale, kBZero, kBias, kYScale, kYZero };

class QGemmKernel : public PreparedKernel {
 public:
  std::string name() const override {
    return std::string("cpu/qgemm-") + (packed_ ? packed_->kernel()->name : "reference");
  }

  static Expected<std::unique_ptr<PreparedKernel>> make(const ir::Node& node,
                                                        const std::vector<const Tensor*>& c);

  Status run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(kA);
    if (!packed_ || a.dtype() != DType::kUInt8 || a.rank() < 2 || a.dim(a.rank() - 1) != k_)
      return run_reference(ctx);
    Shape out_shape = a.shape();
    out_shape.back() = n_;
    Tensor& y = ctx.allocate_output_for_overwrite(0, out_type_, out_shape);
    const int64_t rows = a.numel() / std::max<int64_t>(k_, 1);
    if (rows == 0) return Status::ok();
    uint8_t* yt = transposed_.get(static_cast<size_t>(n_ * rows));  // Y^T [n, rows]
    qu8_gemm_bt(n_, rows, *packed_, static_cast<const uint8_t*>(a.raw()), k_, yt, rows,
                Qu8Requant{bias_.data(), scale_.data(), output_}, ctx.num_threads());
    // Y [rows, n] from Y^T, blocks of rows across the threads.
    constexpr int64_t kBlock = 32;
    uint8_t* out = static_cast<uint8_t*>(y.raw());
    auto task = [&](int64_t t, int) {
      const int64_t r0 = t * kBlock, r1 = std::min(rows, r0 + kBlock);
      transpose_bytes(yt + r0, rows, out + r0 * n_, n_, n_, r1 - r0);
    };
    const int64_t tasks = (rows + kBlock - 1) / kBlock;
    cpu_thread_pool().parallel_for(tasks, rows * n_ < (int64_t{1} << 16) ? 1 : ctx.num_threads(),
                                   task);
    return Status::ok();
  }

 private:
  int64_t k_ = 0, n_ = 0;
  DType out_type_ = DType::kUInt8;
  Qu8Output output_;
  std::unique_ptr<Qu8PackedA> packed_;  // nullptr: the reference kernel runs
  std::vector<int32_t> bias_;
  std::vector<float> scale_;
  GrowBuffer<uint8_t> transposed_;
};

bool all_zero(const Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.get_as_double(i) != 0.0) return false;
  return true;
}

Expected<std::unique_ptr<PreparedKernel>> QGemmKernel::make(const ir::Node& node,
                                                            const std::vector<const Tensor*>& c) {
  auto kernel = std::make_unique<QGemmKernel>();
  auto given = [&](size_t i) { return i < node.inputs.size() && !node.inputs[i].empty(); };
  auto constant = [&](size_t i) { return i < c.size() ? c[i] : nullptr; };
  const Tensor* a_scale = constant(kAScale);
  const Tensor* a_zero = constant(kAZero);
  const Tensor* b = constant(kB);
  const Tensor* b_scale = constant(kBScale);
  const Tensor* b_zero = constant(kBZero);
  const Tensor* bias = constant(kBias);
  const Tensor* y_scale = constant(kYScale);
  const Tensor* y_zero = constant(kYZero);
  ir::AttrView attrs(node);
  PG_ASSIGN_OR_RETURN(int64_t trans_b, attrs.get_int("transB", 0));
  const bool constant_params = a_scale && b && b_scale && y_scale && (a_zero || !given(kAZero)) &&
                               (b_zero || !given(kBZero)) && (bias || !given(kBias)) &&
                               (y_zero || !given(kYZero));
  if (!constant_params || b->dtype() != DType::kInt8 || b->rank() != 2)
    return std::unique_ptr<PreparedKernel>(std::move(kernel));
  const int64_t k = trans_b ? b->dim(1) : b->dim(0), n = trans_b ? b->dim(0) : b->dim(1);
  if (k == 0 || k > kQu8MaxDepth) return std::unique_ptr<PreparedKernel>(std::move(kernel));
  if (a_scale->dtype() != DType::kFloat32 || a_scale->numel() != 1 ||
      y_scale->dtype() != DType::kFloat32 || y_scale->numel() != 1 ||
      b_scale->dtype() != DType::kFloat32 || (b_scale->numel() != 1 && b_scale->numel() != n) ||
      (a_zero && (a_zero->dtype() != DType::kUInt8 || a_zero->numel() != 1)) ||
      (b_zero && (b_zero->dtype() != DType::kInt8 || !all_zero(*b_zero))) ||
      (y_zero && ((y_zero->dtype() != DType::kUInt8 && y_zero->dtype() != DType::kInt8) ||
                  y_zero->numel() != 1)) ||
      (bias && (bias->dtype() != DType::kInt32 || bias->numel() != n)))
    return std::unique_ptr<PreparedKernel>(std::move(kernel));
  kernel->k_ = k;
  kernel->n_ = n;
  kernel->out_type_ = y_zero ? y_zero->dtype() : DType::kUInt8;
  const bool is_signed = kernel->out_type_ == DType::kInt8;
  kernel->output_ = Qu8Output{y_zero ? static_cast<int32_t>(y_zero->get_as_double(0)) : 0,
                              is_signed ? -128 : 0, is_signed ? 127 : 255, is_signed};
  // The GEMM's A is W^T [n, k]: B itself with transB, else its transpose.
  const int8_t* w = b->data<int8_t>();
  std::vector<int8_t> wt;
  if (!trans_b) {
    wt.resize(static_cast<size_t>(n * k));
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) wt[j * k + p] = w[p * n + j];
    w = wt.data();
  }
  kernel->packed_ = std::make_unique<Qu8PackedA>(Qu8PackedA::pack(qu8_gemm_kernel(), w, k, n, k));
  const int32_t za = a_zero ? a_zero->data<uint8_t>()[0] : 0;
  const float sa = a_scale->data<float>()[0], sy = y_scale->data<float>()[0];
  for (int64_t j = 0; j < n; ++j) {
    kernel->bias_.push_back((bias ? bias->data<int32_t>()[j] : 0) -
                            za * kernel->packed_->row_sums()[j]);
    kernel->scale_.push_back((sa * b_scale->data<float>()[b_scale->numel() == 1 ? 0 : j]) / sy);
  }
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

}  // namespace

Expected<std::unique_ptr<PreparedKernel>> prepare_qgemm(
    const ir::Node& node, const std::vector<const Tensor*>& constants) {
  return QGemmKernel::make(node, constants);
}

}  // namespace peregrine::cpu
