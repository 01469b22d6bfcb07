// Schemas of the normalization family: BatchNormalization, InstanceNormalization,
// LayerNormalization, GroupNormalization, LRN, MeanVarianceNormalization.
#include <string>
#include <vector>

#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

std::string type_name(DType d) { return std::string(dtype_name(d)); }
const std::string& input_name(const InferContext& ctx, size_t i) { return ctx.node().inputs[i]; }

// Input i must be a float tensor; returns its type.
Expected<DType> require_float_input(const InferContext& ctx, size_t i) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  DType d = ctx.input_type(i).dtype;
  if (!dtype_is_float(d))
    return ctx.error("input '" + input_name(ctx, i) + "' has type " + type_name(d) +
                     ", expected a float type");
  return d;
}

// Input i (if present) must be a float tensor of type `expected` (if not undefined), rank 1,
// with `size` elements when both are known.
Status check_vector(const InferContext& ctx, size_t i, DType expected, int64_t size) {
  if (!ctx.has_input(i)) return Status::ok();
  PG_ASSIGN_OR_RETURN(DType d, require_float_input(ctx, i));
  if (expected != DType::kUndefined && d != expected)
    return ctx.error("input '" + input_name(ctx, i) + "' has type " + type_name(d) +
                     ", expected " + type_name(expected));
  PG_RETURN_IF_ERROR(require_rank(ctx, i, 1, 1));
  const ir::ValueType& t = ctx.input_type(i);
  if (size >= 0 && t.has_shape && t.dims[0] >= 0 && t.dims[0] != size)
    return ctx.error("input '" + input_name(ctx, i) + "' has " + std::to_string(t.dims[0]) +
                     " elements, expected " + std::to_string(size));
  return Status::ok();
}

// Channel count (dim 1) of input 0, -1 if unknown.
int64_t channels(const InferContext& ctx) {
  const ir::ValueType& x = ctx.input_type(0);
  return x.has_shape && x.dims.size() >= 2 ? x.dims[1] : -1;
}

Status infer_batch_norm(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(DType dtype, require_float_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 2, 64));
  PG_ASSIGN_OR_RETURN(int64_t spatial, ctx.attrs().get_int("spatial", 1));
  int64_t c = channels(ctx);
  bool per_channel = ctx.opset() >= 9 || spatial != 0;
  // Opset 15 lets scale/B (T1) and mean/var (T2) have their own types; before, all are T.
  DType param_type = ctx.opset() >= 15 ? DType::kUndefined : dtype;
  DType stat_type = ctx.opset() >= 14 ? DType::kUndefined : dtype;
  for (size_t i = 1; i <= 4; ++i)
    if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is required");
  if (per_channel) {
    PG_RETURN_IF_ERROR(check_vector(ctx, 1, param_type, c));
    PG_RETURN_IF_ERROR(check_vector(ctx, 2, ctx.input_type(1).dtype, c));
    PG_RETURN_IF_ERROR(check_vector(ctx, 3, stat_type, c));
    PG_RETURN_IF_ERROR(check_vector(ctx, 4, ctx.input_type(3).dtype, c));
  } else {
    for (size_t i = 1; i <= 4; ++i) PG_RETURN_IF_ERROR(require_float_input(ctx, i).status());
  }
  ctx.set_output(0, ctx.input_type(0));
  const ir::ValueType& stats = ctx.input_type(3);
  for (size_t i = 1; i < ctx.num_outputs(); ++i) {
    if (ctx.opset() >= 14 && i > 2)
      return ctx.error("BatchNormalization has at most 3 outputs since opset 14");
    ctx.set_output(i, stats);  // running or saved statistics, shaped like input_mean
  }
  return Status::ok();
}

Status infer_instance_norm(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(DType dtype, require_float_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 3, 64));
  int64_t c = channels(ctx);
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 2));
  PG_RETURN_IF_ERROR(check_vector(ctx, 1, dtype, c));
  PG_RETURN_IF_ERROR(check_vector(ctx, 2, dtype, c));
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

Status infer_layer_norm(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(DType dtype, require_float_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  for (size_t i = 1; i <= 2; ++i) {
    if (!ctx.has_input(i)) continue;
    if (ctx.input_type(i).dtype != dtype)
      return ctx.error("input '" + input_name(ctx, i) + "' has type " +
                       type_name(ctx.input_type(i).dtype) + ", expected " + type_name(dtype));
  }
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
  PG_ASSIGN_OR_RETURN(int64_t stash, ctx.attrs().get_int("stash_type", 1));
  if (stash < 0 || stash > kMaxDTypeValue || !dtype_is_valid(static_cast<int32_t>(stash)) ||
      !dtype_is_float(static_cast<DType>(stash)))
    return ctx.error("attribute 'stash_type' " + std::to_string(stash) + " is not a float type");
  ctx.set_output(0, ctx.input_type(0));
  const ir::ValueType& x = ctx.input_type(0);
  for (size_t i = 1; i < ctx.num_outputs() && i <= 2; ++i) {
    if (!x.has_shape) {
      ctx.set_output(i, ir::ValueType::tensor_unknown_shape(static_cast<DType>(stash)));
      continue;
    }
    PG_ASSIGN_OR_RETURN(int64_t a, normalize_axis(ctx, axis, x.rank()));
    Shape reduced = x.dims;
    for (size_t d = static_cast<size_t>(a); d < reduced.size(); ++d) reduced[d] = 1;
    ctx.set_output_tensor(i, static_cast<DType>(stash), reduced);
  }
  if (x.has_shape) PG_RETURN_IF_ERROR(normalize_axis(ctx, axis, x.rank()).status());
  return Status::ok();
}

Status infer_group_norm(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(DType dtype, require_float_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 2, 64));
  PG_ASSIGN_OR_RETURN(int64_t groups, ctx.attrs().get_int("num_groups"));
  if (groups <= 0) return ctx.error("attribute 'num_groups' must be positive, got " +
                                    std::to_string(groups));
  int64_t c = channels(ctx);
  if (c >= 0 && c % groups != 0)
    return ctx.error("channel count " + std::to_string(c) + " is not divisible by num_groups " +
                     std::to_string(groups));
  // Opset 18 has one scale and bias per group; opset 21 one per channel.
  int64_t params = ctx.opset() >= 21 ? c : groups;
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 2));
  PG_RETURN_IF_ERROR(check_vector(ctx, 1, dtype, params));
  PG_RETURN_IF_ERROR(check_vector(ctx, 2, dtype, params));
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

Status infer_lrn(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_float_input(ctx, 0).status());
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 3, 64));
  PG_ASSIGN_OR_RETURN(int64_t size, ctx.attrs().get_int("size"));
  if (size <= 0) return ctx.error("attribute 'size' must be positive, got " + std::to_string(size));
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

// LpNormalization: X / (sum over `axis` of |X|^p)^(1/p), p 1 or 2; zero where the norm is 0.
Status infer_lp_norm(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_float_input(ctx, 0).status());
  PG_ASSIGN_OR_RETURN(int64_t p, ctx.attrs().get_int("p", 2));
  if (p != 1 && p != 2) return ctx.error("attribute 'p' must be 1 or 2, got " + std::to_string(p));
  const ir::ValueType& x = ctx.input_type(0);
  if (x.has_shape) {
    PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
    PG_RETURN_IF_ERROR(normalize_axis(ctx, axis, x.rank()).status());
  }
  ctx.set_output(0, x);
  return Status::ok();
}

Status infer_mvn(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_float_input(ctx, 0).status());
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.attrs().get_ints("axes", {0, 2, 3}));
  const ir::ValueType& x = ctx.input_type(0);
  if (x.has_shape) {
    std::vector<bool> seen(x.dims.size(), false);
    for (int64_t a : axes) {
      PG_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, a, x.rank(), "axes entry"));
      if (seen[static_cast<size_t>(axis)])
        return ctx.error("attribute 'axes' repeats axis " + std::to_string(a));
      seen[static_cast<size_t>(axis)] = true;
    }
  }
  ctx.set_output(0, x);
  return Status::ok();
}

}  // namespace

void register_normalization_schemas(SchemaRegistry& r) {
  r.add({kOnnxDomain, "BatchNormalization", 1, infer_batch_norm, elementwise_cost(4)});
  r.add({kOnnxDomain, "InstanceNormalization", 1, infer_instance_norm, elementwise_cost(6)});
  r.add({kOnnxDomain, "LayerNormalization", 17, infer_layer_norm, elementwise_cost(6)});
  r.add({kOnnxDomain, "GroupNormalization", 18, infer_group_norm, elementwise_cost(6)});
  r.add({kOnnxDomain, "LRN", 1, infer_lrn, elementwise_cost(8)});
  r.add({kOnnxDomain, "LpNormalization", 1, infer_lp_norm, elementwise_cost(4)});
  r.add({kOnnxDomain, "MeanVarianceNormalization", 9, infer_mvn, elementwise_cost(6)});
}

}  // namespace peregrine
