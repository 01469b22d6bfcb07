// Schemas of the reduce family: Reduce*, ArgMax/ArgMin, TopK, CumSum and CumProd.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

// The opset from which `op` takes its axes as input 1 instead of an attribute.
int axes_input_since(const std::string& op) { return op == "ReduceSum" ? 13 : 18; }

// The axes to reduce, normalized and sorted: nullopt when they come from an input whose value
// is not known yet. An empty list means "all axes" or, with noop_with_empty_axes, "none".
Expected<std::optional<std::vector<int64_t>>> reduce_axes(const InferContext& ctx, int64_t rank) {
  std::vector<int64_t> axes;
  if (ctx.opset() >= axes_input_since(ctx.node().op_type)) {
    if (ctx.has_input(1)) {
      const Tensor* value = ctx.input_value(1);
      if (value == nullptr) return std::optional<std::vector<int64_t>>();
      if (!dtype_is_integer(value->dtype()) || value->rank() > 1)
        return ctx.error("input 'axes' must be a 1-D integer tensor");
      axes = value->to_int64_vector();
    }
  } else {
    PG_ASSIGN_OR_RETURN(axes, ctx.attrs().get_ints("axes", {}));
  }
  for (int64_t& axis : axes) {
    PG_ASSIGN_OR_RETURN(axis, normalize_axis(ctx, axis, rank, "axes entry"));
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return ctx.error("attribute 'axes' lists an axis twice");
  return std::optional<std::vector<int64_t>>(std::move(axes));
}

Status infer_reduce(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& in = ctx.input_type(0);
  const std::string& op = ctx.node().op_type;
  bool bool_ok = (op == "ReduceMax" || op == "ReduceMin") && ctx.opset() >= 20;
  if (!dtype_is_float(in.dtype) && !dtype_is_integer(in.dtype) &&
      !(bool_ok && in.dtype == DType::kBool))
    return ctx.error("element type " + std::string(dtype_name(in.dtype)) + " is not allowed");
  PG_ASSIGN_OR_RETURN(int64_t keepdims, ctx.attrs().get_int("keepdims", 1));
  PG_ASSIGN_OR_RETURN(int64_t noop, ctx.attrs().get_int("noop_with_empty_axes", 0));
  if (!in.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(in.dtype));
    return Status::ok();
  }
  int64_t rank = in.rank();
  PG_ASSIGN_OR_RETURN(auto axes, reduce_axes(ctx, rank));
  if (!axes.has_value()) {
    if (keepdims != 0) {
      ctx.set_output_tensor(0, in.dtype, Shape(static_cast<size_t>(rank), -1));
    } else {
      ctx.set_output(0, ir::ValueType::tensor_unknown_shape(in.dtype));
    }
    return Status::ok();
  }
  std::vector<bool> reduced(static_cast<size_t>(rank), axes->empty() && noop == 0);
  for (int64_t axis : *axes) reduced[static_cast<size_t>(axis)] = true;
  Shape out;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[static_cast<size_t>(d)]) {
      out.push_back(in.dims[static_cast<size_t>(d)]);
    } else if (keepdims != 0) {
      out.push_back(1);
    }
  }
  ctx.set_output_tensor(0, in.dtype, out);
  return Status::ok();
}

Status infer_arg_reduce(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& in = ctx.input_type(0);
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  PG_ASSIGN_OR_RETURN(int64_t keepdims, ctx.attrs().get_int("keepdims", 1));
  if (!in.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(DType::kInt64));
    return Status::ok();
  }
  PG_ASSIGN_OR_RETURN(axis, normalize_axis(ctx, axis, in.rank()));
  Shape out = in.dims;
  if (keepdims != 0) {
    out[static_cast<size_t>(axis)] = 1;
  } else {
    out.erase(out.begin() + axis);
  }
  ctx.set_output_tensor(0, DType::kInt64, out);
  return Status::ok();
}

Status infer_topk(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& in = ctx.input_type(0);
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
  std::optional<int64_t> k;
  if (ctx.opset() < 10) {
    PG_ASSIGN_OR_RETURN(int64_t k_attr, ctx.attrs().get_int("k"));
    k = k_attr;
  } else {
    PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
    if (const Tensor* value = ctx.input_value(1)) {
      if (value->numel() != 1 || !dtype_is_integer(value->dtype()))
        return ctx.error("input 'K' must hold one integer");
      k = value->get_as_int64(0);
    }
  }
  if (k.has_value() && *k < 0) return ctx.error("k " + std::to_string(*k) + " is negative");
  if (!in.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(in.dtype));
    ctx.set_output(1, ir::ValueType::tensor_unknown_shape(DType::kInt64));
    return Status::ok();
  }
  PG_ASSIGN_OR_RETURN(axis, normalize_axis(ctx, axis, in.rank()));
  Shape out = in.dims;
  int64_t axis_dim = out[static_cast<size_t>(axis)];
  if (k.has_value() && axis_dim >= 0 && *k > axis_dim)
    return ctx.error("k " + std::to_string(*k) + " exceeds the axis dim " +
                     std::to_string(axis_dim));
  out[static_cast<size_t>(axis)] = k.value_or(-1);
  ctx.set_output_tensor(0, in.dtype, out);
  ctx.set_output_tensor(1, DType::kInt64, out);
  return Status::ok();
}

Status infer_cumsum(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_rank(ctx, 1, 0, 1));
  const ir::ValueType& in = ctx.input_type(0);
  if (const Tensor* axis = ctx.input_value(1); axis != nullptr && in.has_shape) {
    if (axis->numel() != 1 || !dtype_is_integer(axis->dtype()))
      return ctx.error("input 'axis' must hold one integer");
    PG_RETURN_IF_ERROR(normalize_axis(ctx, axis->get_as_int64(0), in.rank()).status());
  }
  ctx.set_output(0, in);
  return Status::ok();
}

}  // namespace

void register_reduce_schemas(SchemaRegistry& r) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                         "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                         "ReduceSumSquare"})
    r.add({kOnnxDomain, op, 1, infer_reduce, nullptr});
  for (const char* op : {"ArgMax", "ArgMin"})
    r.add({kOnnxDomain, op, 1, infer_arg_reduce, nullptr});
  r.add({kOnnxDomain, "TopK", 1, infer_topk, nullptr});
  r.add({kOnnxDomain, "CumSum", 11, infer_cumsum, elementwise_cost(1)});
  r.add({kOnnxDomain, "CumProd", 26, infer_cumsum, elementwise_cost(1)});
}

}  // namespace peregrine
