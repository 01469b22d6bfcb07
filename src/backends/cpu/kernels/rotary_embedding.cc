// RotaryEmbedding (ONNX 23) on the CPU, float32: X as (B, S, H * D) with num_heads or
// (B, H, S, D); cos / sin caches (positions, R / 2) read at position_ids, or (B, S, R / 2)
// without them. Each head's first R channels go through the rotary micro-kernel, the rest are
// copied; tasks are tokens. Anything else (other dtypes, shapes the reference rejects, position
// ids outside the caches) runs the reference kernel, which reports the error.
#include <algorithm>
#include <cstring>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/vector_ops.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"

namespace peregrine::cpu {

namespace {

class RotaryEmbeddingKernel : public PreparedKernel {
 public:
  RotaryEmbeddingKernel(const VectorUkernels& uk, bool interleaved, int64_t heads, int64_t rotary)
      : uk_(uk), interleaved_(interleaved), heads_attr_(heads), rotary_attr_(rotary) {}
  std::string name() const override { return std::string("cpu/rotary-") + isa_name(uk_.isa); }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& cos = ctx.input(1);
    const Tensor& sin = ctx.input(2);
    const Tensor* ids = ctx.num_inputs() > 3 && ctx.has_input(3) ? &ctx.input(3) : nullptr;
    if (x.dtype() != DType::kFloat32 || cos.dtype() != DType::kFloat32 ||
        sin.dtype() != DType::kFloat32 || (x.rank() != 3 && x.rank() != 4))
      return run_reference(ctx);
    const bool four_d = x.rank() == 4;
    const int64_t batch = x.dim(0), seq = four_d ? x.dim(2) : x.dim(1);
    const int64_t heads = four_d ? x.dim(1) : heads_attr_;
    if (heads <= 0 || (!four_d && x.dim(2) % heads != 0)) return run_reference(ctx);
    const int64_t head_size = four_d ? x.dim(3) : x.dim(2) / heads;
    const int64_t rotary = rotary_attr_ == 0 ? head_size : rotary_attr_;
    if (rotary < 0 || rotary > head_size || rotary % 2 != 0) return run_reference(ctx);
    const int64_t half = rotary / 2;
    if (cos.shape() != sin.shape() || cos.rank() < 2 || cos.dim(cos.rank() - 1) != half)
      return run_reference(ctx);
    if (ids ? (cos.rank() != 2 || ids->shape() != Shape{batch, seq} ||
               (ids->dtype() != DType::kInt64 && ids->dtype() != DType::kInt32))
            : cos.shape() != Shape{batch, seq, half})
      return run_reference(ctx);
    if (ids)
      for (int64_t t = 0; t < batch * seq; ++t) {
        const int64_t p = ids->get_as_int64(t);
        if (p < 0 || p >= cos.dim(0)) return run_reference(ctx);
      }
    Tensor& y = ctx.output_for_overwrite(0);
    if (x.numel() == 0) return Status::ok();
    const float* px = x.data<float>();
    const float* pc = cos.data<float>();
    const float* ps = sin.data<float>();
    float* py = y.data<float>();
    const size_t pass_bytes = static_cast<size_t>(head_size - rotary) * sizeof(float);
    auto token = [&](int64_t t) {
      const int64_t b = t / seq, s = t % seq;
      const int64_t row = ids ? ids->get_as_int64(t) : t;  // the caches' row for this token
      const float* c = pc + row * half;
      const float* sn = ps + row * half;
      for (int64_t h = 0; h < heads; ++h) {
        // Element (b, s, h, 0) of X: (B, S, H * D) or (B, H, S, D).
        const int64_t base =
            four_d ? ((b * heads + h) * seq + s) * head_size : (t * heads + h) * head_size;
        uk_.rotary(px + base, c, sn, py + base, static_cast<size_t>(half), interleaved_);
        if (pass_bytes) std::memcpy(py + base + rotary, px + base + rotary, pass_bytes);
      }
    };
    const int64_t tokens = batch * seq;
    const int64_t per_task =
        std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(heads * head_size, 1));
    cpu_thread_pool().parallel_for((tokens + per_task - 1) / per_task, ctx.num_threads(),
                                   [&](int64_t task, int) {
                                     const int64_t end = std::min(tokens, (task + 1) * per_task);
                                     for (int64_t t = task * per_task; t < end; ++t) token(t);
                                   });
    return Status::ok();
  }

 private:
  const VectorUkernels& uk_;
  bool interleaved_;
  int64_t heads_attr_, rotary_attr_;
};

}  // namespace

Expected<std::unique_ptr<PreparedKernel>> prepare_rotary_embedding(const ir::Node& node) {
  ir::AttrView attrs(node);
  PG_ASSIGN_OR_RETURN(int64_t interleaved, attrs.get_int("interleaved", 0));
  PG_ASSIGN_OR_RETURN(int64_t heads, attrs.get_int("num_heads", 0));
  PG_ASSIGN_OR_RETURN(int64_t rotary, attrs.get_int("rotary_embedding_dim", 0));
  return std::unique_ptr<PreparedKernel>(
      std::make_unique<RotaryEmbeddingKernel>(vector_ukernels(), interleaved != 0, heads, rotary));
}

}  // namespace peregrine::cpu
