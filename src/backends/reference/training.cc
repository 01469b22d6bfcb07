// Reference kernels of the training family: one optimizer step per tensor group,
// computed in double and stored in the tensor's own type.
#include <cmath>
#include <string>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

namespace {

// What one update step needs besides the element values.
struct Step {
  double rate = 0;  // R
  int64_t count = 0;  // T
};

// Reads R and T, checks the grouping and the shapes; n = tensors per group.
Expected<Step> read_step(const KernelContext& ctx, size_t groups, size_t* n) {
  if (ctx.num_inputs() < 2 + groups || (ctx.num_inputs() - 2) % groups != 0)
    return ctx.error("expects R, T and " + std::to_string(groups) + " equal groups of tensors");
  *n = (ctx.num_inputs() - 2) / groups;
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (!ctx.has_input(i) || !ctx.input_value(i).is_tensor())
      return ctx.error("input " + std::to_string(i) + " must be a tensor");
  const Tensor& r = ctx.input(0);
  const Tensor& t = ctx.input(1);
  if (r.numel() != 1 || !dtype_is_float(r.dtype())) return ctx.error("R must be a float scalar");
  if (t.numel() != 1 || t.dtype() != DType::kInt64) return ctx.error("T must be an int64 scalar");
  for (size_t k = 0; k < *n; ++k) {
    const Tensor& x = ctx.input(2 + k);
    if (x.dtype() != DType::kFloat32 && x.dtype() != DType::kFloat64)
      return ctx.error("optimized tensors must be float or double");
    for (size_t g = 1; g < groups; ++g) {
      const Tensor& other = ctx.input(2 + g * *n + k);
      if (other.shape() != x.shape() || other.dtype() != x.dtype())
        return ctx.error("tensor " + std::to_string(k) + " of group " + std::to_string(g) +
                         " does not match X in shape and type");
    }
  }
  return Step{r.get_as_double(0), t.get_as_int64(0)};
}

// Calls update(i, ins, outs) for each element i of tensor k, where ins[g] is the value
// of group g and outs[b] receives output block b; values are doubles.
template <typename Update>
Status for_each_element(KernelContext& ctx, size_t groups, size_t n, size_t k, Update update) {
  const Tensor& x = ctx.input(2 + k);
  std::vector<const Tensor*> ins;
  for (size_t g = 0; g < groups; ++g) ins.push_back(&ctx.input(2 + g * n + k));
  std::vector<Tensor*> outs;
  for (size_t b = 0; b + 1 < groups; ++b)
    outs.push_back(ctx.wants_output(b * n + k) ? &ctx.output(b * n + k) : nullptr);
  return visit_float(x.dtype(), [&]<typename T>() {
    std::vector<double> in_values(groups), out_values(groups - 1);
    for (int64_t i = 0; i < x.numel(); ++i) {
      for (size_t g = 0; g < groups; ++g) in_values[g] = static_cast<double>(ins[g]->data<T>()[i]);
      update(in_values, out_values);
      for (size_t b = 0; b + 1 < groups; ++b)
        if (outs[b]) outs[b]->data<T>()[i] = static_cast<T>(out_values[b]);
    }
  });
}

// Inputs per tensor: X, G, H. Outputs: X_new, H_new.
Status adagrad(KernelContext& ctx) {
  size_t n = 0;
  PG_ASSIGN_OR_RETURN(Step step, read_step(ctx, 3, &n));
  PG_ASSIGN_OR_RETURN(float decay, ctx.attrs().get_float("decay_factor", 0.0f));
  PG_ASSIGN_OR_RETURN(float epsilon, ctx.attrs().get_float("epsilon", 1e-6f));
  PG_ASSIGN_OR_RETURN(float norm, ctx.attrs().get_float("norm_coefficient", 0.0f));
  const double rate = step.rate / (1.0 + static_cast<double>(step.count) * decay);
  for (size_t k = 0; k < n; ++k) {
    PG_RETURN_IF_ERROR(for_each_element(ctx, 3, n, k, [&](const auto& in, auto& out) {
      const double x = in[0], g = in[1] + norm * x, h = in[2] + g * g;
      out[0] = x - rate * g / (std::sqrt(h) + epsilon);
      out[1] = h;
    }));
  }
  return Status::ok();
}

// Inputs per tensor: X, G, V, H. Outputs: X_new, V_new, H_new.
Status adam(KernelContext& ctx) {
  size_t n = 0;
  PG_ASSIGN_OR_RETURN(Step step, read_step(ctx, 4, &n));
  PG_ASSIGN_OR_RETURN(float alpha, ctx.attrs().get_float("alpha", 0.9f));
  PG_ASSIGN_OR_RETURN(float beta, ctx.attrs().get_float("beta", 0.999f));
  PG_ASSIGN_OR_RETURN(float epsilon, ctx.attrs().get_float("epsilon", 1e-6f));
  PG_ASSIGN_OR_RETURN(float norm, ctx.attrs().get_float("norm_coefficient", 0.0f));
  PG_ASSIGN_OR_RETURN(float norm_post, ctx.attrs().get_float("norm_coefficient_post", 0.0f));
  double rate = step.rate;
  if (step.count > 0) {
    const double t = static_cast<double>(step.count);
    rate = rate * std::sqrt(1.0 - std::pow(beta, t)) / (1.0 - std::pow(alpha, t));
  }
  for (size_t k = 0; k < n; ++k) {
    PG_RETURN_IF_ERROR(for_each_element(ctx, 4, n, k, [&](const auto& in, auto& out) {
      const double x = in[0], g = in[1] + norm * x;
      const double v = alpha * in[2] + (1.0 - alpha) * g;
      const double h = beta * in[3] + (1.0 - beta) * g * g;
      out[0] = (1.0 - norm_post) * (x - rate * v / (std::sqrt(h) + epsilon));
      out[1] = v;
      out[2] = h;
    }));
  }
  return Status::ok();
}

// Inputs per tensor: X, G, V. Outputs: X_new, V_new. The first step (T = 0) takes the
// whole gradient; nesterov mode looks ahead along the new velocity.
Status momentum(KernelContext& ctx) {
  auto mode = ctx.attrs().get_string("mode");
  if (!mode.is_ok()) return mode.status();
  if (*mode != "standard" && *mode != "nesterov")
    return ctx.error("mode '" + *mode + "' must be 'standard' or 'nesterov'");
  const bool nesterov = *mode == "nesterov";
  size_t n = 0;
  PG_ASSIGN_OR_RETURN(Step step, read_step(ctx, 3, &n));
  PG_ASSIGN_OR_RETURN(float alpha, ctx.attrs().get_float("alpha"));
  PG_ASSIGN_OR_RETURN(float beta, ctx.attrs().get_float("beta"));
  PG_ASSIGN_OR_RETURN(float norm, ctx.attrs().get_float("norm_coefficient"));
  const double beta_adjusted = step.count > 0 ? beta : 1.0;
  for (size_t k = 0; k < n; ++k) {
    PG_RETURN_IF_ERROR(for_each_element(ctx, 3, n, k, [&](const auto& in, auto& out) {
      const double x = in[0], g = in[1] + norm * x;
      const double v = alpha * in[2] + beta_adjusted * g;
      out[0] = nesterov ? x - step.rate * (g + alpha * v) : x - step.rate * v;
      out[1] = v;
    }));
  }
  return Status::ok();
}

}  // namespace

void register_training_kernels(KernelRegistry& r) {
  r.add(kTrainingDomain, "Adagrad", adagrad);
  r.add(kTrainingDomain, "Adam", adam);
  r.add(kTrainingDomain, "Momentum", momentum);
}

}  // namespace peregrine
