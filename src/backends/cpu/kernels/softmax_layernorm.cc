// CPU kernels of the float32 row normalizations, rows spread over the thread pool:
//   Softmax: opset < 13 any axis (the input is coerced to 2-D, so rows are the contiguous dims
//     from axis on, one micro-kernel call per row); opset >= 13 the last axis as rows, any
//     other axis as (outer, len, inner) blocks, softmax down the len rows of each block,
//     8 columns per vector.
//   LayerNormalization (ONNX, and the peregrine-domain alias for older opsets): rows of the
//     dims from axis on; Scale and B must hold exactly one row's worth of values (any shape
//     that broadcasts to the normalized shape with that count); the optional Mean and
//     InvStdDev outputs, other dtypes and other broadcasts go to the reference.
//   RMSNormalization (ONNX 23, and the peregrine domain's from rms_norm_fusion): rows of the dims from axis on,
//     Scale as for LayerNormalization.
#include <algorithm>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/vector_ops.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"
#include "ops/op_schema.h"

namespace peregrine::cpu {

namespace {

bool in_onnx_domain(const ir::Node& node) {
  return node.domain.empty() || node.domain == "ai.onnx";
}

// Runs row_fn(r) for r in [0, rows), whole rows per task, about kElementsPerTask per task.
template <typename F>
void for_each_row(int64_t rows, int64_t cols, int threads, F&& row_fn) {
  const int64_t rows_per_task = std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(cols, 1));
  const int64_t tasks = (rows + rows_per_task - 1) / rows_per_task;
  auto task = [&](int64_t t, int) {
    const int64_t r1 = std::min(rows, (t + 1) * rows_per_task);
    for (int64_t r = t * rows_per_task; r < r1; ++r) row_fn(r);
  };
  cpu_thread_pool().parallel_for(tasks, threads, task);
}

class SoftmaxKernel : public PreparedKernel {
 public:
  explicit SoftmaxKernel(const VectorUkernels& uk) : uk_(uk) {}
  std::string name() const override { return std::string("cpu/softmax-") + isa_name(uk_.isa); }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kFloat32 || x.rank() == 0) return run_reference(ctx);
    const bool coerce_2d = ctx.opset() < 13;
    PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", coerce_2d ? 1 : -1));
    const int64_t rank = x.rank();
    if (axis < -rank || axis >= rank) return run_reference(ctx);  // reports the error
    if (axis < 0) axis += rank;
    Tensor& y = ctx.output_for_overwrite(0);
    if (x.numel() == 0) return Status::ok();
    if (!coerce_2d && axis != rank - 1) {
      // (outer, len, inner) blocks, softmax along len; tasks over (block, column chunk).
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
      for (int64_t d = axis + 1; d < rank; ++d) inner *= x.dim(d);
      const int64_t len = x.dim(axis);
      const int64_t chunk = std::max<int64_t>(8, kElementsPerTask / len / 8 * 8);
      const int64_t chunks = (inner + chunk - 1) / chunk;
      const float* px = x.data<float>();
      float* py = y.data<float>();
      auto task = [&](int64_t t, int) {
        const int64_t o = t / chunks, j0 = (t % chunks) * chunk;
        const int64_t offset = o * len * inner + j0;
        uk_.softmax_columns(px + offset, py + offset, static_cast<size_t>(len),
                            static_cast<size_t>(inner),
                            static_cast<size_t>(std::min(chunk, inner - j0)));
      };
      cpu_thread_pool().parallel_for(outer * chunks, ctx.num_threads(), task);
      return Status::ok();
    }
    int64_t cols = 1;
    for (int64_t d = axis; d < rank; ++d) cols *= x.dim(d);
    const int64_t rows = x.numel() / cols;
    const float* px = x.data<float>();
    float* py = y.data<float>();
    for_each_row(rows, cols, ctx.num_threads(), [&](int64_t r) {
      uk_.softmax_row(px + r * cols, py + r * cols, static_cast<size_t>(cols));
    });
    return Status::ok();
  }

 private:
  const VectorUkernels& uk_;
};

// Scale / B holding exactly one row's worth of values: numel == cols and
// broadcastable, so its dims line up with X's trailing dims up to leading ones.
bool is_one_row(const Tensor& t, const Tensor& x, int64_t axis, int64_t cols) {
  const int64_t rank = x.rank();
  if (t.dtype() != DType::kFloat32 || t.numel() != cols || t.rank() > rank - axis) return false;
  for (int64_t i = 0; i < t.rank(); ++i)
    if (t.dim(t.rank() - 1 - i) != x.dim(rank - 1 - i)) return false;
  return true;
}

class LayerNormKernel : public PreparedKernel {
 public:
  explicit LayerNormKernel(const VectorUkernels& uk) : uk_(uk) {}
  std::string name() const override { return std::string("cpu/layernorm-") + isa_name(uk_.isa); }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kFloat32 || ctx.wants_output(1) || ctx.wants_output(2))
      return run_reference(ctx);
    PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
    PG_ASSIGN_OR_RETURN(float epsilon, ctx.attrs().get_float("epsilon", 1e-5f));
    const int64_t rank = x.rank();
    if (axis < -rank || axis >= rank) return run_reference(ctx);  // reports the error
    if (axis < 0) axis += rank;
    int64_t cols = 1;
    for (int64_t d = axis; d < rank; ++d) cols *= x.dim(d);
    const Tensor& scale = ctx.input(1);
    const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (!is_one_row(scale, x, axis, cols) || (bias && !is_one_row(*bias, x, axis, cols)))
      return run_reference(ctx);
    Tensor& y = ctx.output_for_overwrite(0);
    if (x.numel() == 0) return Status::ok();
    const int64_t rows = x.numel() / cols;
    const float* px = x.data<float>();
    const float* pg = scale.data<float>();
    const float* pb = bias ? bias->data<float>() : nullptr;
    float* py = y.data<float>();
    for_each_row(rows, cols, ctx.num_threads(), [&](int64_t r) {
      uk_.layer_norm_row(px + r * cols, pg, pb, epsilon, py + r * cols, static_cast<size_t>(cols));
    });
    return Status::ok();
  }

 private:
  const VectorUkernels& uk_;
};

class RmsNormKernel : public PreparedKernel {
 public:
  explicit RmsNormKernel(const VectorUkernels& uk) : uk_(uk) {}
  std::string name() const override { return std::string("cpu/rmsnorm-") + isa_name(uk_.isa); }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kFloat32) return run_reference(ctx);
    PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
    PG_ASSIGN_OR_RETURN(float epsilon, ctx.attrs().get_float("epsilon", 1e-5f));
    const int64_t rank = x.rank();
    if (axis < -rank || axis >= rank) return run_reference(ctx);  // reports the error
    if (axis < 0) axis += rank;
    int64_t cols = 1;
    for (int64_t d = axis; d < rank; ++d) cols *= x.dim(d);
    if (!is_one_row(ctx.input(1), x, axis, cols)) return run_reference(ctx);
    Tensor& y = ctx.output_for_overwrite(0);
    if (x.numel() == 0) return Status::ok();
    const int64_t rows = x.numel() / cols;
    const float* px = x.data<float>();
    const float* pg = ctx.input(1).data<float>();
    float* py = y.data<float>();
    for_each_row(rows, cols, ctx.num_threads(), [&](int64_t r) {
      uk_.rms_norm_row(px + r * cols, pg, epsilon, py + r * cols, static_cast<size_t>(cols));
    });
    return Status::ok();
  }

 private:
  const VectorUkernels& uk_;
};

}  // namespace

bool claims_softmax_layernorm(const ir::Node& node) {
  if (node.op_type == "Softmax") return in_onnx_domain(node);
  if (node.op_type == "LayerNormalization")
    return in_onnx_domain(node) || node.domain == kPeregrineDomain;
  if (node.op_type == "RMSNormalization")
    return in_onnx_domain(node) || node.domain == kPeregrineDomain;
  return false;
}

Expected<std::unique_ptr<PreparedKernel>> prepare_softmax_layernorm(const ir::Node& node) {
  const VectorUkernels& uk = vector_ukernels();
  if (node.op_type == "Softmax") return std::unique_ptr<PreparedKernel>(new SoftmaxKernel(uk));
  if (node.op_type == "RMSNormalization")
    return std::unique_ptr<PreparedKernel>(new RmsNormKernel(uk));
  return std::unique_ptr<PreparedKernel>(new LayerNormKernel(uk));
}

}  // namespace peregrine::cpu
