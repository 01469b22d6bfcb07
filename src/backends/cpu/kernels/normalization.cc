// CPU kernels of InstanceNormalization and inference-mode BatchNormalization (float32): both
// are y = x * a + b per (sample, channel) plane, with a = scale / sqrt(var + eps) and
// b = B - mean * a. InstanceNormalization computes each plane's mean and variance (two passes:
// the mean on the sum micro-kernel, then the centred squares over 16 independent lanes); for
// BatchNormalization they are the given running statistics. Planes are thread-pool tasks.
// BatchNormalization in training mode, or with its statistics outputs wanted, or before opset 9
// with spatial = 0, runs the reference.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/vector_ops.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/ukernels/f32_reduce_ukernels.h"

namespace peregrine::cpu {

namespace {

// Mean of the squares of x - mean over x[0, n), n >= 1.
float centred_variance(const float* x, size_t n, float mean) {
  constexpr size_t kLanes = 16;
  float acc[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l) {
      const float d = x[i + l] - mean;
      acc[l] += d * d;
    }
  float s = 0;
  for (size_t l = 0; l < kLanes; ++l) s += acc[l];
  for (; i < n; ++i) s += (x[i] - mean) * (x[i] - mean);
  return s / static_cast<float>(n);
}

class PlaneNormKernel : public PreparedKernel {
 public:
  PlaneNormKernel(bool instance, float epsilon, const ReduceUkernels& uk)
      : instance_(instance), epsilon_(epsilon), uk_(uk) {}
  std::string name() const override {
    return instance_ ? "cpu/instance_norm" : "cpu/batch_norm";
  }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kFloat32 || x.rank() < (instance_ ? 3 : 2)) return run_reference(ctx);
    const int64_t n = x.dim(0), c = x.dim(1);
    const int64_t inner = n * c == 0 ? 0 : x.numel() / (n * c);
    const size_t params = instance_ ? 3 : 5;
    for (size_t i = 1; i < params; ++i)
      if (!ctx.has_input(i) || ctx.input(i).dtype() != DType::kFloat32 ||
          ctx.input(i).numel() != c)
        return run_reference(ctx);
    if (!instance_) {
      if (ctx.opset() >= 14) {
        PG_ASSIGN_OR_RETURN(int64_t training, ctx.attrs().get_int("training_mode", 0));
        if (training != 0) return run_reference(ctx);
      }
      for (size_t i = 1; i < ctx.num_outputs(); ++i)
        if (ctx.wants_output(i)) return run_reference(ctx);
      if (ctx.opset() < 9) {
        PG_ASSIGN_OR_RETURN(int64_t spatial, ctx.attrs().get_int("spatial", 1));
        if (spatial == 0) return run_reference(ctx);
      }
    }
    Tensor& y = ctx.output_for_overwrite(0);
    if (y.numel() == 0) return Status::ok();
    if (inner == 0) return run_reference(ctx);
    const float* px = x.data<float>();
    float* py = y.data<float>();
    const float* scale = ctx.input(1).data<float>();
    const float* bias = ctx.input(2).data<float>();
    const float* mean = instance_ ? nullptr : ctx.input(3).data<float>();
    const float* var = instance_ ? nullptr : ctx.input(4).data<float>();
    const size_t len = static_cast<size_t>(inner);
    cpu_thread_pool().parallel_for(n * c, ctx.num_threads(), [&](int64_t p, int) {
      const int64_t ch = p % c;
      const float* xp = px + p * inner;
      float* yp = py + p * inner;
      float m, v;
      if (instance_) {
        m = uk_.row(ReduceOp::kSum, xp, len) / static_cast<float>(len);
        v = centred_variance(xp, len, m);
      } else {
        m = mean[ch];
        v = var[ch];
      }
      const float a = scale[ch] / std::sqrt(v + epsilon_);
      const float b = bias[ch] - m * a;
      for (size_t i = 0; i < len; ++i) yp[i] = xp[i] * a + b;
    });
    return Status::ok();
  }

 private:
  bool instance_;
  float epsilon_;
  const ReduceUkernels& uk_;
};

}  // namespace

bool claims_plane_norm(const ir::Node& node) {
  return (node.domain.empty() || node.domain == "ai.onnx") &&
         (node.op_type == "InstanceNormalization" || node.op_type == "BatchNormalization");
}

Expected<std::unique_ptr<PreparedKernel>> prepare_plane_norm(const ir::Node& node) {
  ir::AttrView attrs(node);
  PG_ASSIGN_OR_RETURN(float epsilon, attrs.get_float("epsilon", 1e-5f));
  return std::unique_ptr<PreparedKernel>(new PlaneNormKernel(
      node.op_type == "InstanceNormalization", epsilon, reduce_ukernels()));
}

}  // namespace peregrine::cpu
