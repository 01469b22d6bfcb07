// Schemas of the tensor_shape family: ops that create, reshape, reorder, cut or
// extend tensors without arithmetic on their elements.
#include <algorithm>

#include "ops/infer_helpers.h"
#include "ops/op_list.h"
#include "ops/tensor_shape_util.h"

namespace peregrine {

namespace {

using shape_util::IntList;

// An error from a shape_util rule, prefixed with the node and keeping its code.
Status node_error(const InferContext& ctx, const Status& s) {
  return Status(s.code(), ctx.node().describe() + ": " + s.message());
}

bool all_known(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](int64_t d) { return d >= 0; });
}

// Sets output i; a static shape must fit the tensor size limit (kernels allocate it).
Status set_out(InferContext& ctx, size_t i, DType dtype, const Shape& shape) {
  if (all_known(shape)) {
    auto n = checked_product(shape);
    auto bytes = n ? checked_mul(*n, static_cast<int64_t>(std::max<size_t>(dtype_size(dtype), 1)))
                   : std::nullopt;
    if (!bytes || *bytes > kMaxTensorBytes)
      return ctx.error("output " + std::to_string(i) + " of shape " + shape_to_string(shape) +
                       " exceeds the tensor size limit");
  }
  ctx.set_output_tensor(i, dtype, shape);
  return Status::ok();
}

void set_unknown(InferContext& ctx, size_t i, DType dtype) {
  ctx.set_output(i, ir::ValueType::tensor_unknown_shape(dtype));
}

// Past this, a rank computed from declared dims (a shape input's length, axes counts) is taken
// as unknown: no tensor has such a rank, and a fuzzed model's 6.6e17 or 2^48 would otherwise
// be allocated as that many output dims.
constexpr int64_t kMaxInferredRank = int64_t{1} << 20;

// Output i of `rank` dims, every one unknown; an unknown rank when `rank` is negative or past
// any tensor's.
void set_rank_only(InferContext& ctx, size_t i, DType dtype, int64_t rank) {
  if (rank < 0 || rank > kMaxInferredRank) {
    set_unknown(ctx, i, dtype);
    return;
  }
  ctx.set_output_tensor(i, dtype, Shape(static_cast<size_t>(rank), -1));
}

Status infer_constant(InferContext& ctx) {
  auto v = shape_util::constant_value(ctx.attrs());
  if (!v.is_ok()) return node_error(ctx, v.status());
  ctx.set_output_tensor(0, v->dtype(), v->shape());
  ctx.set_output_value(0, *v);
  return Status::ok();
}

Status infer_identity(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("input 0 is required");
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

Status infer_reshape(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& in = ctx.input_type(0);
  PG_ASSIGN_OR_RETURN(IntList shape, shape_util::ints_attr_or_input(ctx, "shape", 1, 5));
  if (!shape.present) return ctx.error("the target shape is required");
  PG_ASSIGN_OR_RETURN(int64_t allowzero, ctx.attrs().get_int("allowzero", 0));
  if (!shape.known) {
    if (ctx.opset() >= 5 && ctx.input_type(1).is_static() && ctx.input_type(1).rank() == 1) {
      set_rank_only(ctx, 0, in.dtype, ctx.input_type(1).dims[0]);
    } else {
      set_unknown(ctx, 0, in.dtype);
    }
    return Status::ok();
  }
  Shape in_dims = in.has_shape ? in.dims : Shape{};
  if (!in.has_shape) {
    // Without the input's rank only dims that need no input are known.
    Shape out;
    for (int64_t r : shape.values) out.push_back(r > 0 || (r == 0 && allowzero) ? r : -1);
    ctx.set_output_tensor(0, in.dtype, out);
    return Status::ok();
  }
  auto out = shape_util::reshape_output(in_dims, shape.values, allowzero != 0);
  if (!out.is_ok()) return node_error(ctx, out.status());
  ctx.set_output_tensor(0, in.dtype, *out);
  return Status::ok();
}

Status infer_shape(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& in = ctx.input_type(0);
  if (!in.has_shape) {
    ctx.set_output_tensor(0, DType::kInt64, {-1});
    return Status::ok();
  }
  const int64_t rank = in.rank();
  PG_ASSIGN_OR_RETURN(int64_t start, ctx.attrs().get_int("start", 0));
  PG_ASSIGN_OR_RETURN(int64_t end, ctx.attrs().get_int("end", rank));
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  Shape dims(in.dims.begin() + start, in.dims.begin() + std::max(start, end));
  ctx.set_output_tensor(0, DType::kInt64, {static_cast<int64_t>(dims.size())});
  // Known dims make the value known, so downstream shapes fold at load time.
  if (all_known(dims))
    ctx.set_output_value(0,
                         Tensor::from_vector<int64_t>(dims, {static_cast<int64_t>(dims.size())}));
  return Status::ok();
}

Status infer_size(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& in = ctx.input_type(0);
  ctx.set_output_tensor(0, DType::kInt64, {});
  if (in.is_static()) {
    auto n = checked_product(in.dims);
    if (!n) return ctx.error("input shape overflows");
    ctx.set_output_value(0, Tensor::scalar<int64_t>(*n));
  }
  return Status::ok();
}

// Product of dims [lo, hi); -1 if any is unknown.
int64_t dims_product(const Shape& d, int64_t lo, int64_t hi) {
  int64_t p = 1;
  for (int64_t i = lo; i < hi; ++i) {
    if (d[i] < 0) return -1;
    auto q = checked_mul(p, d[i]);
    if (!q) return -1;
    p = *q;
  }
  return p;
}

Status infer_flatten(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& in = ctx.input_type(0);
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 1));
  if (!in.has_shape) {
    ctx.set_output_tensor(0, in.dtype, {-1, -1});
    return Status::ok();
  }
  const int64_t rank = in.rank();
  if (axis < -rank || axis > rank)
    return ctx.error("axis " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(rank));
  if (axis < 0) axis += rank;
  ctx.set_output_tensor(0, in.dtype,
                        {dims_product(in.dims, 0, axis), dims_product(in.dims, axis, rank)});
  return Status::ok();
}

Status infer_squeeze(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& in = ctx.input_type(0);
  PG_ASSIGN_OR_RETURN(IntList axes, shape_util::ints_attr_or_input(ctx, "axes", 1, 13));
  if (!in.has_shape || (axes.present && !axes.known)) {
    set_unknown(ctx, 0, in.dtype);
    return Status::ok();
  }
  const int64_t rank = in.rank();
  std::vector<bool> drop(rank, false);
  if (axes.present) {
    auto norm = shape_util::normalize_axes(axes.values, rank, "axes");
    if (!norm.is_ok()) return node_error(ctx, norm.status());
    for (int64_t a : *norm) {
      if (in.dims[a] > 1 || in.dims[a] == 0)
        return ctx.error("cannot squeeze axis " + std::to_string(a) + " of size " +
                         std::to_string(in.dims[a]));
      drop[a] = true;
    }
  } else {
    for (int64_t d = 0; d < rank; ++d) {
      if (in.dims[d] < 0) {
        set_unknown(ctx, 0, in.dtype);
        return Status::ok();
      }
      drop[d] = in.dims[d] == 1;
    }
  }
  Shape out;
  for (int64_t d = 0; d < rank; ++d)
    if (!drop[d]) out.push_back(in.dims[d]);
  ctx.set_output_tensor(0, in.dtype, out);
  return Status::ok();
}

Status infer_unsqueeze(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& in = ctx.input_type(0);
  PG_ASSIGN_OR_RETURN(IntList axes, shape_util::ints_attr_or_input(ctx, "axes", 1, 13));
  if (!axes.present) return ctx.error("axes are required");
  if (!in.has_shape || !axes.known) {
    if (in.has_shape && ctx.opset() >= 13 && ctx.input_type(1).is_static() &&
        ctx.input_type(1).rank() == 1)
      set_rank_only(ctx, 0, in.dtype,
                    ctx.input_type(1).dims[0] > kMaxInferredRank
                        ? -1
                        : in.rank() + ctx.input_type(1).dims[0]);
    else
      set_unknown(ctx, 0, in.dtype);
    return Status::ok();
  }
  const int64_t out_rank = in.rank() + static_cast<int64_t>(axes.values.size());
  auto norm = shape_util::normalize_axes(axes.values, out_rank, "axes");
  if (!norm.is_ok()) return node_error(ctx, norm.status());
  Shape out(out_rank, 1);
  std::vector<bool> inserted(out_rank, false);
  for (int64_t a : *norm) inserted[a] = true;
  size_t next = 0;
  for (int64_t d = 0; d < out_rank; ++d)
    if (!inserted[d]) out[d] = in.dims[next++];
  ctx.set_output_tensor(0, in.dtype, out);
  return Status::ok();
}

Status infer_transpose(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& in = ctx.input_type(0);
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ctx.attrs().get_ints("perm"));
  if (!in.has_shape) {
    if (perm.empty())
      set_unknown(ctx, 0, in.dtype);
    else
      set_rank_only(ctx, 0, in.dtype, static_cast<int64_t>(perm.size()));
    return Status::ok();
  }
  const int64_t rank = in.rank();
  if (perm.empty())
    for (int64_t d = rank - 1; d >= 0; --d) perm.push_back(d);
  if (static_cast<int64_t>(perm.size()) != rank)
    return ctx.error("perm " + shape_util::dims_to_string(perm) + " does not match rank " +
                     std::to_string(rank));
  std::vector<bool> seen(rank, false);
  Shape out(rank);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t p = perm[d];
    if (p < 0 || p >= rank || seen[p])
      return ctx.error("perm " + shape_util::dims_to_string(perm) + " is not a permutation of 0.." +
                       std::to_string(rank - 1));
    seen[p] = true;
    out[d] = in.dims[p];
  }
  ctx.set_output_tensor(0, in.dtype, out);
  return Status::ok();
}

Status infer_concat(InferContext& ctx) {
  if (ctx.num_inputs() == 0) return ctx.error("needs at least one input");
  PG_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attrs().get_int("axis"));
  DType dtype = DType::kUndefined;
  int64_t rank = -1;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
    const ir::ValueType& t = ctx.input_type(i);
    if (dtype == DType::kUndefined) dtype = t.dtype;
    if (t.dtype != dtype && t.dtype != DType::kUndefined)
      return ctx.error("inputs have different types");
    if (t.has_shape) {
      if (rank >= 0 && t.rank() != rank) return ctx.error("inputs have different ranks");
      rank = t.rank();
    }
  }
  if (rank < 0) {
    set_unknown(ctx, 0, dtype);
    return Status::ok();
  }
  PG_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, axis_attr, rank));
  Shape out(rank, -1);
  out[axis] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const ir::ValueType& t = ctx.input_type(i);
    if (!t.has_shape) {
      out[axis] = -1;
      continue;
    }
    for (int64_t d = 0; d < rank; ++d) {
      if (d == axis) {
        if (out[axis] >= 0) {
          auto sum = t.dims[d] < 0 ? std::optional<int64_t>(-1) : checked_add(out[axis], t.dims[d]);
          if (!sum) return ctx.error("output dim overflows");
          out[axis] = *sum;
        }
      } else if (t.dims[d] >= 0) {
        if (out[d] >= 0 && out[d] != t.dims[d])
          return ctx.error("input " + std::to_string(i) + " has shape " + shape_to_string(t.dims) +
                           ", which does not match the others off axis " + std::to_string(axis));
        out[d] = t.dims[d];
      }
    }
  }
  return set_out(ctx, 0, dtype, out);
}

Status infer_split(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& in = ctx.input_type(0);
  PG_ASSIGN_OR_RETURN(IntList split, shape_util::ints_attr_or_input(ctx, "split", 1, 13));
  PG_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attrs().get_int("axis", 0));
  const int64_t outputs = static_cast<int64_t>(ctx.num_outputs());
  bool uneven = false;
  if (ctx.opset() >= 18 && ctx.attrs().has("num_outputs")) {
    PG_ASSIGN_OR_RETURN(int64_t n, ctx.attrs().get_int("num_outputs"));
    if (n != outputs)
      return ctx.error("num_outputs is " + std::to_string(n) + " but the node has " +
                       std::to_string(outputs) + " outputs");
    if (split.present) return ctx.error("split and num_outputs cannot both be given");
    uneven = true;
  }
  if (!in.has_shape) {
    for (int64_t i = 0; i < outputs; ++i) set_unknown(ctx, i, in.dtype);
    return Status::ok();
  }
  PG_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, axis_attr, in.rank()));
  const int64_t dim = in.dims[axis];
  std::vector<int64_t> sizes(outputs, -1);
  if (dim >= 0 && (!split.present || split.known)) {
    auto s = shape_util::split_sizes(dim, split.values, split.present, outputs, uneven);
    if (!s.is_ok()) return node_error(ctx, s.status());
    sizes = *s;
  } else if (split.known && static_cast<int64_t>(split.values.size()) == outputs) {
    sizes = split.values;
  }
  for (int64_t i = 0; i < outputs; ++i) {
    Shape out = in.dims;
    out[axis] = sizes[i];
    ctx.set_output_tensor(i, in.dtype, out);
  }
  return Status::ok();
}

Status infer_slice(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& in = ctx.input_type(0);
  PG_ASSIGN_OR_RETURN(std::vector<IntList> p, shape_util::slice_params(ctx));
  if (!p[0].present || !p[1].present) return ctx.error("starts and ends are required");
  if (!in.has_shape) {
    set_unknown(ctx, 0, in.dtype);
    return Status::ok();
  }
  bool known = in.is_static();
  for (const IntList& l : p) known = known && (!l.present || l.known);
  if (!known) {
    set_rank_only(ctx, 0, in.dtype, in.rank());
    return Status::ok();
  }
  auto axes = shape_util::slice_axes(in.dims, p[0].values, p[1].values, p[2].values, p[3].values);
  if (!axes.is_ok()) return node_error(ctx, axes.status());
  Shape out;
  for (const auto& a : *axes) out.push_back(a.count);
  ctx.set_output_tensor(0, in.dtype, out);
  return Status::ok();
}

// Reads a 1-D int64 shape-like input; nullopt when unknown.
Expected<std::optional<std::vector<int64_t>>> shape_input(const InferContext& ctx, size_t i) {
  const Tensor* t = ctx.input_value(i);
  if (!t) return std::optional<std::vector<int64_t>>();
  if (t->dtype() != DType::kInt64)
    return ctx.error("input " + std::to_string(i) + " must be int64");
  if (t->rank() != 1) return ctx.error("input " + std::to_string(i) + " must be 1-D");
  return std::optional<std::vector<int64_t>>(t->to_int64_vector());
}

// Rank of a 1-D shape-like input from its type, or -1: also for a declared length no tensor's
// rank reaches (a fuzzed model declared 6.6e17, and the output's dims were allocated from it).
int64_t shape_input_length(const InferContext& ctx, size_t i) {
  const ir::ValueType& t = ctx.input_type(i);
  return t.is_static() && t.rank() == 1 && t.dims[0] <= kMaxInferredRank ? t.dims[0] : -1;
}

Status infer_expand(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  const ir::ValueType& in = ctx.input_type(0);
  PG_ASSIGN_OR_RETURN(auto shape, shape_input(ctx, 1));
  if (!shape || !in.has_shape) {
    int64_t n = shape_input_length(ctx, 1);
    if (n >= 0 && in.has_shape)
      set_rank_only(ctx, 0, in.dtype, std::max(n, in.rank()));
    else
      set_unknown(ctx, 0, in.dtype);
    return Status::ok();
  }
  for (int64_t d : *shape)
    if (d < 0)
      return ctx.error("shape " + shape_util::dims_to_string(*shape) + " has a negative dim");
  auto out = broadcast_shapes(in.dims, *shape);
  if (!out.is_ok()) return ctx.error(out.status().message());
  return set_out(ctx, 0, in.dtype, *out);
}

Status infer_tile(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  const ir::ValueType& in = ctx.input_type(0);
  const Tensor* reps = ctx.input_value(1);
  if (!in.has_shape) {
    set_unknown(ctx, 0, in.dtype);
    return Status::ok();
  }
  if (!reps) {
    set_rank_only(ctx, 0, in.dtype, in.rank());
    return Status::ok();
  }
  if (reps->dtype() != DType::kInt64) return ctx.error("repeats must be int64");
  std::vector<int64_t> r = reps->to_int64_vector();
  if (static_cast<int64_t>(r.size()) != in.rank())
    return ctx.error("repeats has " + std::to_string(r.size()) + " values for rank " +
                     std::to_string(in.rank()));
  Shape out(in.rank());
  for (int64_t d = 0; d < in.rank(); ++d) {
    if (r[d] < 0)
      return ctx.error("repeats " + shape_util::dims_to_string(r) + " has a negative value");
    if (in.dims[d] < 0) {
      out[d] = -1;
      continue;
    }
    auto m = checked_mul(in.dims[d], r[d]);
    if (!m) return ctx.error("output shape overflows");
    out[d] = *m;
  }
  return set_out(ctx, 0, in.dtype, out);
}

Status infer_pad(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& in = ctx.input_type(0);
  PG_ASSIGN_OR_RETURN(std::string mode, ctx.attrs().get_string("mode", "constant"));
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return ctx.error("mode '" + mode + "' is not one of constant, reflect, edge, wrap");
  if (!in.has_shape) {
    set_unknown(ctx, 0, in.dtype);
    return Status::ok();
  }
  auto spec = shape_util::pad_params(ctx, in.rank());
  if (!spec.is_ok()) return node_error(ctx, spec.status());
  if (!spec->has_value()) {
    set_rank_only(ctx, 0, in.dtype, in.rank());
    return Status::ok();
  }
  Shape out(in.rank());
  for (int64_t d = 0; d < in.rank(); ++d) {
    if (in.dims[d] < 0) {
      out[d] = -1;
      continue;
    }
    auto s = checked_add(in.dims[d], (**spec).begin[d]);
    if (s) s = checked_add(*s, (**spec).end[d]);
    if (!s || *s < 0)
      return ctx.error("pads make dim " + std::to_string(d) + " of size " +
                       std::to_string(in.dims[d]) + " negative");
    if (mode != "constant" && in.dims[d] == 0 && *s > 0)
      return ctx.error("mode '" + mode + "' cannot pad the empty dim " + std::to_string(d));
    out[d] = *s;
  }
  return set_out(ctx, 0, in.dtype, out);
}

Status infer_constant_of_shape(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  DType dtype = DType::kFloat32;
  if (const Tensor* v = ctx.attrs().get_tensor("value")) {
    if (v->numel() != 1) return ctx.error("value must have exactly one element");
    dtype = v->dtype();
  }
  PG_ASSIGN_OR_RETURN(auto shape, shape_input(ctx, 0));
  if (!shape) {
    int64_t n = shape_input_length(ctx, 0);
    if (n >= 0)
      set_rank_only(ctx, 0, dtype, n);
    else
      set_unknown(ctx, 0, dtype);
    return Status::ok();
  }
  for (int64_t d : *shape)
    if (d < 0)
      return ctx.error("shape " + shape_util::dims_to_string(*shape) + " has a negative dim");
  return set_out(ctx, 0, dtype, *shape);
}

Status infer_dropout(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& in = ctx.input_type(0);
  ctx.set_output(0, in);
  if (ctx.num_outputs() > 1) {
    ir::ValueType mask = in;
    mask.dtype = ctx.opset() >= 10 ? DType::kBool : in.dtype;
    ctx.set_output(1, mask);
  }
  return Status::ok();
}

Status infer_range(InferContext& ctx) {
  for (size_t i = 0; i < 3; ++i) PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  DType dtype = ctx.input_type(0).dtype;
  for (size_t i = 1; i < 3; ++i)
    if (ctx.input_type(i).dtype != dtype && ctx.input_type(i).dtype != DType::kUndefined &&
        dtype != DType::kUndefined)
      return ctx.error("start, limit and delta must have one type");
  const Tensor* s = ctx.input_value(0);
  const Tensor* l = ctx.input_value(1);
  const Tensor* d = ctx.input_value(2);
  if (!s || !l || !d) {
    ctx.set_output_tensor(0, dtype, {-1});
    return Status::ok();
  }
  if (s->numel() != 1 || l->numel() != 1 || d->numel() != 1)
    return ctx.error("start, limit and delta must be scalars");
  auto n = shape_util::range_count(*s, *l, *d);
  if (!n.is_ok()) return node_error(ctx, n.status());
  return set_out(ctx, 0, dtype, {*n});
}

Status infer_trilu(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 2, 1 << 20));
  return infer_same_as_input(ctx);
}

Status infer_depth_to_space(InferContext& ctx, bool to_space) {
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 4, 4));
  const ir::ValueType& in = ctx.input_type(0);
  PG_ASSIGN_OR_RETURN(int64_t b, ctx.attrs().get_int("blocksize"));
  if (b <= 0 || b > (1 << 16))
    return ctx.error("blocksize " + std::to_string(b) + " must be positive");
  // DepthToSpace has had `mode` since opset 11, SpaceToDepth since opset 28.
  PG_ASSIGN_OR_RETURN(std::string mode, ctx.attrs().get_string("mode", "DCR"));
  if (mode != "DCR" && mode != "CRD") return ctx.error("mode '" + mode + "' must be DCR or CRD");
  if (!in.has_shape) {
    set_rank_only(ctx, 0, in.dtype, 4);
    return Status::ok();
  }
  Shape out = in.dims;
  // Dims beyond the tensor size limit are rejected by set_out; saturate instead of overflowing.
  auto scale = [&](int64_t d) -> int64_t {
    return d < 0 ? -1 : checked_mul(d, b).value_or(std::numeric_limits<int64_t>::max());
  };
  if (to_space) {
    if (out[1] >= 0 && out[1] % (b * b) != 0)
      return ctx.error("channels " + std::to_string(out[1]) + " are not divisible by blocksize^2");
    out[1] = out[1] < 0 ? -1 : out[1] / (b * b);
    out[2] = scale(out[2]);
    out[3] = scale(out[3]);
  } else {
    for (int d = 2; d < 4; ++d) {
      if (out[d] >= 0 && out[d] % b != 0)
        return ctx.error("dim " + std::to_string(d) + " (" + std::to_string(out[d]) +
                         ") is not divisible by blocksize");
      out[d] = out[d] < 0 ? -1 : out[d] / b;
    }
    out[1] = out[1] < 0 ? -1 : scale(scale(out[1]));
  }
  return set_out(ctx, 0, in.dtype, out);
}

Status infer_center_crop_pad(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));  // the target shape
  const ir::ValueType& in = ctx.input_type(0);
  PG_ASSIGN_OR_RETURN(auto target, shape_input(ctx, 1));
  if (!in.has_shape) {
    set_unknown(ctx, 0, in.dtype);
    return Status::ok();
  }
  if (!target) {
    set_rank_only(ctx, 0, in.dtype, in.rank());
    return Status::ok();
  }
  auto out = shape_util::center_crop_pad_shape(ctx.attrs(), in.dims, *target);
  if (!out.is_ok()) return node_error(ctx, out.status());
  return set_out(ctx, 0, in.dtype, *out);
}

Status infer_reverse_sequence(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 2, 1 << 20));
  PG_RETURN_IF_ERROR(require_rank(ctx, 1, 1, 1));
  PG_ASSIGN_OR_RETURN(int64_t batch_axis, ctx.attrs().get_int("batch_axis", 1));
  PG_ASSIGN_OR_RETURN(int64_t time_axis, ctx.attrs().get_int("time_axis", 0));
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0)))
    return ctx.error("batch_axis and time_axis must be 0 and 1 in some order");
  return infer_same_as_input(ctx);
}

Status infer_unique(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& in = ctx.input_type(0);
  PG_ASSIGN_OR_RETURN(int64_t sorted, ctx.attrs().get_int("sorted", 1));
  (void)sorted;
  Shape y = {-1};
  int64_t inverse_len = -1;
  if (ctx.attrs().has("axis")) {
    PG_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attrs().get_int("axis"));
    if (in.has_shape) {
      PG_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, axis_attr, in.rank()));
      y = in.dims;
      y[axis] = -1;
      inverse_len = in.dims[axis];
    } else {
      set_unknown(ctx, 0, in.dtype);
    }
  } else if (in.has_shape) {
    inverse_len = dims_product(in.dims, 0, in.rank());
  }
  if (in.has_shape || !ctx.attrs().has("axis")) ctx.set_output_tensor(0, in.dtype, y);
  if (ctx.num_outputs() > 1) ctx.set_output_tensor(1, DType::kInt64, {-1});
  if (ctx.num_outputs() > 2) ctx.set_output_tensor(2, DType::kInt64, {inverse_len});
  if (ctx.num_outputs() > 3) ctx.set_output_tensor(3, DType::kInt64, {-1});
  return Status::ok();
}

Status infer_eye_like(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 2, 2));
  const ir::ValueType& in = ctx.input_type(0);
  PG_ASSIGN_OR_RETURN(int64_t dtype_attr,
                      ctx.attrs().get_int("dtype", static_cast<int64_t>(in.dtype)));
  if (!dtype_is_valid(static_cast<int32_t>(dtype_attr)) || dtype_attr == 0)
    return ctx.error("dtype " + std::to_string(dtype_attr) + " is not a valid type");
  DType dtype = static_cast<DType>(dtype_attr);
  if (dtype == DType::kString) return ctx.error("dtype cannot be string");
  ctx.set_output_tensor(0, dtype, in.has_shape ? in.dims : Shape{-1, -1});
  return Status::ok();
}

}  // namespace

void register_tensor_shape_schemas(SchemaRegistry& r) {
  auto guarded = shape_util::unless_input_unknown;
  r.add({kOnnxDomain, "Constant", 1, infer_constant, nullptr});
  r.add({kOnnxDomain, "Identity", 1, infer_identity, nullptr});
  r.add({kOnnxDomain, "Reshape", 1, guarded(infer_reshape), nullptr});
  r.add({kOnnxDomain, "Shape", 1, guarded(infer_shape), nullptr});
  r.add({kOnnxDomain, "Size", 1, guarded(infer_size), nullptr});
  r.add({kOnnxDomain, "Flatten", 1, guarded(infer_flatten), nullptr});
  r.add({kOnnxDomain, "Squeeze", 1, guarded(infer_squeeze), nullptr});
  r.add({kOnnxDomain, "Unsqueeze", 1, guarded(infer_unsqueeze), nullptr});
  r.add({kOnnxDomain, "Transpose", 1, guarded(infer_transpose), nullptr});
  r.add({kOnnxDomain, "Concat", 1, guarded(infer_concat), nullptr});
  r.add({kOnnxDomain, "Split", 1, guarded(infer_split), nullptr});
  r.add({kOnnxDomain, "Slice", 1, guarded(infer_slice), nullptr});
  r.add({kOnnxDomain, "Expand", 8, guarded(infer_expand), nullptr});
  r.add({kOnnxDomain, "Tile", 6, guarded(infer_tile), nullptr});
  r.add({kOnnxDomain, "Pad", 1, guarded(infer_pad), nullptr});
  r.add({kOnnxDomain, "ConstantOfShape", 9, guarded(infer_constant_of_shape), nullptr});
  r.add({kOnnxDomain, "Dropout", 1, guarded(infer_dropout), nullptr});
  r.add({kOnnxDomain, "Range", 11, guarded(infer_range), nullptr});
  r.add({kOnnxDomain, "Trilu", 14, guarded(infer_trilu), nullptr});
  r.add({kOnnxDomain, "DepthToSpace", 1,
         guarded([](InferContext& c) { return infer_depth_to_space(c, true); }), nullptr});
  r.add({kOnnxDomain, "SpaceToDepth", 1,
         guarded([](InferContext& c) { return infer_depth_to_space(c, false); }), nullptr});
  r.add({kOnnxDomain, "CenterCropPad", 18, guarded(infer_center_crop_pad), nullptr});
  r.add({kOnnxDomain, "ReverseSequence", 10, guarded(infer_reverse_sequence), nullptr});
  r.add({kOnnxDomain, "Unique", 11, guarded(infer_unique), nullptr});
  r.add({kOnnxDomain, "EyeLike", 9, guarded(infer_eye_like), nullptr});
}

}  // namespace peregrine
