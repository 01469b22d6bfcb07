// Schemas of the gather_scatter family: ops that read or write elements at positions
// given by index tensors (Gather*, Scatter*, OneHot) or by a mask (Compress, NonZero).
#include <algorithm>

#include "ops/infer_helpers.h"
#include "ops/op_list.h"
#include "ops/tensor_shape_util.h"

namespace peregrine {

namespace {

// kUndefined: the type is not known yet (load time); run time checks again.
bool is_index_type(DType t) {
  return t == DType::kInt64 || t == DType::kInt32 || t == DType::kUndefined;
}
bool is_type_or_unknown(DType t, DType want) { return t == want || t == DType::kUndefined; }
bool types_differ(DType a, DType b) {
  return a != b && a != DType::kUndefined && b != DType::kUndefined;
}

Status require_indices(const InferContext& ctx, size_t i) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  if (!is_index_type(ctx.input_type(i).dtype))
    return ctx.error("indices must be int32 or int64, not " +
                     std::string(dtype_name(ctx.input_type(i).dtype)));
  return Status::ok();
}

Status set_checked(InferContext& ctx, size_t i, DType dtype, const Shape& shape) {
  bool known = std::all_of(shape.begin(), shape.end(), [](int64_t d) { return d >= 0; });
  if (known) {
    auto n = checked_product(shape);
    auto bytes = n ? checked_mul(*n, static_cast<int64_t>(std::max<size_t>(dtype_size(dtype), 1)))
                   : std::nullopt;
    if (!bytes || *bytes > kMaxTensorBytes)
      return ctx.error("output of shape " + shape_to_string(shape) +
                       " exceeds the tensor size limit");
  }
  ctx.set_output_tensor(i, dtype, shape);
  return Status::ok();
}

Status infer_gather(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_indices(ctx, 1));
  const ir::ValueType& data = ctx.input_type(0);
  const ir::ValueType& idx = ctx.input_type(1);
  PG_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attrs().get_int("axis", 0));
  if (!data.has_shape || !idx.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(data.dtype));
    return Status::ok();
  }
  PG_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, axis_attr, data.rank()));
  Shape out(data.dims.begin(), data.dims.begin() + axis);
  out.insert(out.end(), idx.dims.begin(), idx.dims.end());
  out.insert(out.end(), data.dims.begin() + axis + 1, data.dims.end());
  return set_checked(ctx, 0, data.dtype, out);
}

Status infer_gather_elements(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_indices(ctx, 1));
  const ir::ValueType& data = ctx.input_type(0);
  const ir::ValueType& idx = ctx.input_type(1);
  PG_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attrs().get_int("axis", 0));
  if (data.has_shape) {
    PG_RETURN_IF_ERROR(normalize_axis(ctx, axis_attr, data.rank()).status());
    if (idx.has_shape && idx.rank() != data.rank())
      return ctx.error("indices have rank " + std::to_string(idx.rank()) + ", data has rank " +
                       std::to_string(data.rank()));
  }
  if (idx.has_shape)
    ctx.set_output_tensor(0, data.dtype, idx.dims);
  else
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(data.dtype));
  return Status::ok();
}

Status infer_gather_nd(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  if (!is_type_or_unknown(ctx.input_type(1).dtype, DType::kInt64))
    return ctx.error("indices must be int64");
  const ir::ValueType& data = ctx.input_type(0);
  const ir::ValueType& idx = ctx.input_type(1);
  PG_ASSIGN_OR_RETURN(int64_t batch_dims, ctx.attrs().get_int("batch_dims", 0));
  if (!data.has_shape || !idx.has_shape || idx.rank() < 1 || idx.dims.back() < 0) {
    if (data.has_shape && idx.has_shape && idx.rank() < 1)
      return ctx.error("indices must have rank >= 1");
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(data.dtype));
    return Status::ok();
  }
  const int64_t r = data.rank(), q = idx.rank(), last = idx.dims.back();
  if (batch_dims < 0 || batch_dims >= std::min(r, q))
    return ctx.error("batch_dims " + std::to_string(batch_dims) +
                     " must be in [0, min(rank(data), rank(indices)))");
  if (last < 1 || last > r - batch_dims)
    return ctx.error("indices' last dim " + std::to_string(last) + " must be in [1, " +
                     std::to_string(r - batch_dims) + "]");
  for (int64_t d = 0; d < batch_dims; ++d)
    if (data.dims[d] >= 0 && idx.dims[d] >= 0 && data.dims[d] != idx.dims[d])
      return ctx.error("batch dim " + std::to_string(d) + " differs between data and indices");
  Shape out(idx.dims.begin(), idx.dims.end() - 1);
  out.insert(out.end(), data.dims.begin() + batch_dims + last, data.dims.end());
  return set_checked(ctx, 0, data.dtype, out);
}

Status infer_scatter_elements(InferContext& ctx) {
  for (size_t i : {0, 2}) PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  PG_RETURN_IF_ERROR(require_indices(ctx, 1));
  const ir::ValueType& data = ctx.input_type(0);
  const ir::ValueType& idx = ctx.input_type(1);
  const ir::ValueType& upd = ctx.input_type(2);
  if (types_differ(upd.dtype, data.dtype))
    return ctx.error("updates and data have different types");
  PG_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attrs().get_int("axis", 0));
  PG_ASSIGN_OR_RETURN(std::string reduction, ctx.attrs().get_string("reduction", "none"));
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" &&
      reduction != "min")
    return ctx.error("reduction '" + reduction + "' is not one of none, add, mul, max, min");
  if (data.has_shape) {
    PG_RETURN_IF_ERROR(normalize_axis(ctx, axis_attr, data.rank()).status());
    if (idx.has_shape && idx.rank() != data.rank())
      return ctx.error("indices and data have different ranks");
  }
  if (idx.has_shape && upd.has_shape && idx.dims != upd.dims && idx.is_static() && upd.is_static())
    return ctx.error("indices " + shape_to_string(idx.dims) + " and updates " +
                     shape_to_string(upd.dims) + " have different shapes");
  ctx.set_output(0, data);
  return Status::ok();
}

// TensorScatter (opset 24): writes `update` into a copy of `past_cache` along the sequence
// axis at each batch entry's write index; the cache keeps its shape.
Status infer_tensor_scatter(InferContext& ctx) {
  for (size_t i : {0, 1}) PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  const ir::ValueType& cache = ctx.input_type(0);
  const ir::ValueType& upd = ctx.input_type(1);
  if (types_differ(upd.dtype, cache.dtype))
    return ctx.error("update and past_cache have different types");
  if (ctx.num_inputs() > 2 && ctx.has_input(2) &&
      !is_type_or_unknown(ctx.input_type(2).dtype, DType::kInt64))
    return ctx.error("write_indices must be int64");
  PG_ASSIGN_OR_RETURN(std::string mode, ctx.attrs().get_string("mode", "linear"));
  if (mode != "linear" && mode != "circular")
    return ctx.error("mode '" + mode + "' is not one of linear, circular");
  PG_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attrs().get_int("axis", -2));
  if (cache.has_shape) {
    PG_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, axis_attr, cache.rank()));
    if (axis == 0) return ctx.error("axis must not be 0 (the batch dimension)");
    if (upd.has_shape) {
      if (upd.rank() != cache.rank())
        return ctx.error("update " + shape_to_string(upd.dims) + " and past_cache " +
                         shape_to_string(cache.dims) + " have different ranks");
      for (int64_t i = 0; i < cache.rank(); ++i) {
        const int64_t c = cache.dims[static_cast<size_t>(i)], u = upd.dims[static_cast<size_t>(i)];
        if (c < 0 || u < 0) continue;
        if (i == axis ? u > c : u != c)
          return ctx.error("update " + shape_to_string(upd.dims) + " does not fit past_cache " +
                           shape_to_string(cache.dims) + " at axis " + std::to_string(i));
      }
    }
  }
  ctx.set_output(0, cache);
  return Status::ok();
}

Status infer_scatter_nd(InferContext& ctx) {
  for (size_t i : {0, 2}) PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  if (!is_type_or_unknown(ctx.input_type(1).dtype, DType::kInt64))
    return ctx.error("indices must be int64");
  const ir::ValueType& data = ctx.input_type(0);
  if (types_differ(ctx.input_type(2).dtype, data.dtype))
    return ctx.error("updates and data have different types");
  PG_ASSIGN_OR_RETURN(std::string reduction, ctx.attrs().get_string("reduction", "none"));
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" &&
      reduction != "min")
    return ctx.error("reduction '" + reduction + "' is not one of none, add, mul, max, min");
  ctx.set_output(0, data);
  return Status::ok();
}

Status infer_compress(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_rank(ctx, 1, 1, 1));
  if (!is_type_or_unknown(ctx.input_type(1).dtype, DType::kBool))
    return ctx.error("condition must be bool");
  const ir::ValueType& in = ctx.input_type(0);
  const Tensor* cond = ctx.input_value(1);
  int64_t selected = -1;
  if (cond) {
    selected = 0;
    for (int64_t i = 0; i < cond->numel(); ++i) selected += cond->data<bool>()[i] ? 1 : 0;
  }
  if (!ctx.attrs().has("axis")) {
    ctx.set_output_tensor(0, in.dtype, {selected});
    return Status::ok();
  }
  PG_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attrs().get_int("axis"));
  if (!in.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(in.dtype));
    return Status::ok();
  }
  PG_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, axis_attr, in.rank()));
  Shape out = in.dims;
  // The kernel checks that no selected position lies past the axis.
  out[axis] = selected;
  ctx.set_output_tensor(0, in.dtype, out);
  return Status::ok();
}

Status infer_nonzero(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& in = ctx.input_type(0);
  ctx.set_output_tensor(0, DType::kInt64,
                        {in.has_shape ? std::max<int64_t>(in.rank(), 1) : -1, -1});
  return Status::ok();
}

Status infer_onehot(InferContext& ctx) {
  for (size_t i = 0; i < 3; ++i) PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  const ir::ValueType& idx = ctx.input_type(0);
  const ir::ValueType& values = ctx.input_type(2);
  for (size_t i = 0; i < 2; ++i) {
    DType t = ctx.input_type(i).dtype;
    if (t == DType::kString || t == DType::kBool || dtype_is_float8(t) || t == DType::kComplex64 ||
        t == DType::kComplex128)
      return ctx.error("input " + std::to_string(i) + " must be numeric");
  }
  if (values.has_shape && values.dims != Shape{2} && values.is_static())
    return ctx.error("values must have shape [2], not " + shape_to_string(values.dims));
  PG_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attrs().get_int("axis", -1));
  if (!idx.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(values.dtype));
    return Status::ok();
  }
  const int64_t out_rank = idx.rank() + 1;
  PG_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, axis_attr, out_rank));
  int64_t depth = -1;
  if (const Tensor* d = ctx.input_value(1)) {
    if (d->numel() != 1) return ctx.error("depth must have one element");
    if (d->dtype() == DType::kString || d->dtype() == DType::kBool)
      return ctx.error("depth must be numeric");
    double v = d->get_as_double(0);
    if (!(v >= 1 && v < 1e12)) return ctx.error("depth " + std::to_string(v) + " must be positive");
    depth = static_cast<int64_t>(v);
  }
  Shape out = idx.dims;
  out.insert(out.begin() + axis, depth);
  return set_checked(ctx, 0, values.dtype, out);
}

}  // namespace

void register_gather_scatter_schemas(SchemaRegistry& r) {
  auto guarded = shape_util::unless_input_unknown;
  r.add({kOnnxDomain, "Gather", 1, guarded(infer_gather), nullptr});
  r.add({kOnnxDomain, "GatherElements", 11, guarded(infer_gather_elements), nullptr});
  r.add({kOnnxDomain, "GatherND", 11, guarded(infer_gather_nd), nullptr});
  r.add({kOnnxDomain, "Scatter", 9, guarded(infer_scatter_elements), nullptr});
  r.add({kOnnxDomain, "ScatterElements", 11, guarded(infer_scatter_elements), nullptr});
  r.add({kOnnxDomain, "ScatterND", 11, guarded(infer_scatter_nd), nullptr});
  r.add({kOnnxDomain, "TensorScatter", 24, guarded(infer_tensor_scatter), nullptr});
  r.add({kOnnxDomain, "Compress", 9, guarded(infer_compress), nullptr});
  r.add({kOnnxDomain, "NonZero", 9, guarded(infer_nonzero), nullptr});
  r.add({kOnnxDomain, "OneHot", 9, guarded(infer_onehot), nullptr});
}

}  // namespace peregrine
