// Schemas of the training family (domain ai.onnx.preview.training): the optimizer
// update rules Adagrad, Adam and Momentum. Inputs are R (learning rate), T (step count),
// then the groups of tensors (X..., G..., state...); outputs are the new X and states.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

// `groups` is the number of per-tensor input groups (X, G and the states): inputs are
// R, T, then `groups` blocks of n tensors; outputs are `groups - 1` blocks (G has none).
Status infer_optimizer(InferContext& ctx, size_t groups) {
  if (ctx.num_inputs() < 2 + groups || (ctx.num_inputs() - 2) % groups != 0)
    return ctx.error("expects R, T and " + std::to_string(groups) +
                     " equal groups of tensors, got " + std::to_string(ctx.num_inputs()) +
                     " inputs");
  const size_t n = (ctx.num_inputs() - 2) / groups;
  if (ctx.num_outputs() != n * (groups - 1))
    return ctx.error("expects " + std::to_string(n * (groups - 1)) + " outputs, got " +
                     std::to_string(ctx.num_outputs()));
  for (size_t i = 0; i < ctx.num_inputs(); ++i) PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 0, 0));
  PG_RETURN_IF_ERROR(require_rank(ctx, 1, 0, 0));
  if (ctx.input_type(1).dtype != DType::kUndefined && ctx.input_type(1).dtype != DType::kInt64)
    return ctx.error("T must be an int64 scalar");
  for (size_t k = 0; k < n; ++k) {
    const ir::ValueType& x = ctx.input_type(2 + k);
    if (x.dtype != DType::kUndefined && x.dtype != DType::kFloat32 && x.dtype != DType::kFloat64)
      return ctx.error("optimized tensors must be float or double");
    for (size_t g = 1; g < groups; ++g) {
      const ir::ValueType& other = ctx.input_type(2 + g * n + k);
      if (x.is_static() && other.is_static() && other.dims != x.dims)
        return ctx.error("tensor " + std::to_string(k) + " of group " + std::to_string(g) +
                         " has shape " + shape_to_string(other.dims) + ", X has " +
                         shape_to_string(x.dims));
    }
    // Output block b (0: X_new, then the states) of tensor k has the shape of the matching input.
    for (size_t b = 0; b + 1 < groups; ++b) {
      const size_t in_group = b == 0 ? 0 : b + 1;
      ctx.set_output(b * n + k, ctx.input_type(2 + in_group * n + k));
    }
  }
  return Status::ok();
}

}  // namespace

void register_training_schemas(SchemaRegistry& r) {
  // Adagrad: X, G, H.  Adam: X, G, V, H.  Momentum: X, G, V.
  r.add({kTrainingDomain, "Adagrad", 1, [](InferContext& c) { return infer_optimizer(c, 3); },
         elementwise_cost(6)});
  r.add({kTrainingDomain, "Adam", 1, [](InferContext& c) { return infer_optimizer(c, 4); },
         elementwise_cost(10)});
  r.add({kTrainingDomain, "Momentum", 1, [](InferContext& c) { return infer_optimizer(c, 3); },
         elementwise_cost(5)});
}

}  // namespace peregrine
