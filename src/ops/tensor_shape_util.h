// Parameter rules shared by the tensor_shape / gather_scatter schemas and their reference
// kernels, so that inference and execution agree on one computation. Errors carry only
// the rule; callers prefix the node (ctx.error(status.message())).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/checked_math.h"
#include "ir/attributes.h"
#include "ops/op_schema.h"

namespace peregrine::shape_util {

inline std::string dims_to_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// Maps axis in [-rank, rank) to [0, rank).
inline Expected<int64_t> normalize(int64_t axis, int64_t rank, const std::string& what) {
  if (axis < -rank || axis >= rank)
    return invalid_model(what + " " + std::to_string(axis) + " is out of range for rank " +
                         std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

// Normalizes a list of axes and rejects duplicates.
inline Expected<std::vector<int64_t>> normalize_axes(const std::vector<int64_t>& axes, int64_t rank,
                                                     const std::string& what) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    auto n = normalize(a, rank, what);
    if (!n.is_ok()) return n.status();
    if (std::find(out.begin(), out.end(), *n) != out.end())
      return invalid_model(what + " " + dims_to_string(axes) + " repeats an axis");
    out.push_back(*n);
  }
  return out;
}

// Constant's value from whichever value attribute is set.
inline Expected<Tensor> constant_value(const ir::AttrView& attrs) {
  int count = 0;
  for (const char* name : {"value", "value_float", "value_floats", "value_int", "value_ints",
                           "value_string", "value_strings", "sparse_value"})
    if (attrs.has(name)) ++count;
  if (count != 1)
    return invalid_model("exactly one value attribute must be set, found " + std::to_string(count));
  if (attrs.has("sparse_value")) return unsupported("sparse_value is not supported");
  if (const Tensor* t = attrs.get_tensor("value")) return *t;
  if (attrs.has("value_float")) {
    auto v = attrs.get_float("value_float");
    if (!v.is_ok()) return v.status();
    return Tensor::scalar<float>(*v);
  }
  if (attrs.has("value_floats")) {
    auto v = attrs.get_floats("value_floats");
    if (!v.is_ok()) return v.status();
    return Tensor::from_vector<float>(*v, {static_cast<int64_t>(v->size())});
  }
  if (attrs.has("value_int")) {
    auto v = attrs.get_int("value_int");
    if (!v.is_ok()) return v.status();
    return Tensor::scalar<int64_t>(*v);
  }
  if (attrs.has("value_ints")) {
    auto v = attrs.get_ints("value_ints");
    if (!v.is_ok()) return v.status();
    return Tensor::from_vector<int64_t>(*v, {static_cast<int64_t>(v->size())});
  }
  if (attrs.has("value_string")) {
    auto v = attrs.get_string("value_string");
    if (!v.is_ok()) return v.status();
    return Tensor::scalar<std::string>(*v);
  }
  auto v = attrs.get_strings("value_strings");
  if (!v.is_ok()) return v.status();
  return Tensor::from_vector<std::string>(*v, {static_cast<int64_t>(v->size())});
}

// Reshape's output from the requested shape (0 copies, -1 infers). Input dims may be
// -1 (unknown); then an inferred -1 stays unknown.
inline Expected<Shape> reshape_output(const Shape& in, const std::vector<int64_t>& requested,
                                      bool allowzero) {
  Shape out(requested.size());
  int64_t infer_at = -1;
  bool has_zero = false;
  int64_t known_product = 1;
  for (size_t i = 0; i < requested.size(); ++i) {
    int64_t r = requested[i];
    if (r == -1) {
      if (infer_at >= 0)
        return invalid_model("shape " + dims_to_string(requested) + " has more than one -1");
      infer_at = static_cast<int64_t>(i);
      continue;
    }
    if (r < -1) return invalid_model("shape " + dims_to_string(requested) + " has a dim < -1");
    if (r == 0) {
      has_zero = true;
      if (!allowzero) {
        if (i >= in.size())
          return invalid_model("shape " + dims_to_string(requested) + " copies dim " +
                               std::to_string(i) + " (0) beyond the input's rank");
        r = in[i];
      }
    }
    out[i] = r;
    if (r >= 0) {
      auto p = checked_mul(known_product, r);
      if (!p) return invalid_model("shape " + dims_to_string(requested) + " overflows");
      known_product = *p;
    }
  }
  if (allowzero && has_zero && infer_at >= 0)
    return invalid_model("shape " + dims_to_string(requested) +
                         " has both 0 and -1 with allowzero");
  bool in_known = std::all_of(in.begin(), in.end(), [](int64_t d) { return d >= 0; });
  bool out_known = std::all_of(out.begin(), out.end(), [&](int64_t d) { return d >= 0; });
  std::optional<int64_t> in_count = in_known ? checked_product(in) : std::optional<int64_t>(0);
  if (in_known && !in_count) return invalid_model("input shape overflows");
  if (infer_at >= 0) {
    // out[infer_at] is 0 here; only the other dims are counted.
    bool others_known = true;
    for (size_t i = 0; i < out.size(); ++i)
      if (static_cast<int64_t>(i) != infer_at && out[i] < 0) others_known = false;
    if (in_known && others_known) {
      if (known_product == 0 || *in_count % known_product != 0)
        return invalid_model("cannot reshape " + shape_to_string(in) + " to " +
                             dims_to_string(requested));
      out[infer_at] = *in_count / known_product;
    } else {
      out[infer_at] = -1;
    }
  } else if (in_known && out_known && known_product != *in_count) {
    return invalid_model("cannot reshape " + shape_to_string(in) + " (" +
                         std::to_string(*in_count) + " elements) to " + dims_to_string(requested));
  }
  return out;
}

// One axis of a Slice: the first index, the step and the element count.
struct SliceAxis {
  int64_t start = 0;
  int64_t step = 1;
  int64_t count = 0;
};

// Slice per axis of a known input shape (ONNX clamping rules).
inline Expected<std::vector<SliceAxis>> slice_axes(const Shape& in,
                                                   const std::vector<int64_t>& starts,
                                                   const std::vector<int64_t>& ends,
                                                   std::vector<int64_t> axes,
                                                   std::vector<int64_t> steps) {
  const int64_t rank = static_cast<int64_t>(in.size());
  if (starts.size() != ends.size()) return invalid_model("starts and ends have different lengths");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size())
    return invalid_model("starts, ends, axes and steps must have the same length");
  auto norm = normalize_axes(axes, rank, "slice axes");
  if (!norm.is_ok()) return norm.status();
  std::vector<SliceAxis> result(in.size());
  for (int64_t d = 0; d < rank; ++d) result[d] = {0, 1, in[d]};
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = (*norm)[i];
    int64_t dim = in[axis];
    int64_t step = steps[i];
    if (step == 0) return invalid_model("slice step is 0");
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start += dim;  // no overflow: dim >= 0
    if (end < 0) end += dim;
    int64_t count = 0;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      if (end > start) count = (end - start - 1) / step + 1;
    } else if (dim > 0) {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      if (start > end)
        count = step == std::numeric_limits<int64_t>::min() ? 1 : (start - end - 1) / -step + 1;
    }
    result[axis] = {start, step, count};
  }
  return result;
}

// Pads as begin/end per dim from ONNX's [begin_0.., end_0..] over the given axes.
struct PadSpec {
  std::vector<int64_t> begin;
  std::vector<int64_t> end;
};

inline Expected<PadSpec> pad_spec(int64_t rank, const std::vector<int64_t>& pads,
                                  std::vector<int64_t> axes) {
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  auto norm = normalize_axes(axes, rank, "pad axes");
  if (!norm.is_ok()) return norm.status();
  if (pads.size() != 2 * axes.size())
    return invalid_model("pads has " + std::to_string(pads.size()) + " values, expected " +
                         std::to_string(2 * axes.size()));
  PadSpec s{std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 0)};
  for (size_t i = 0; i < axes.size(); ++i) {
    s.begin[(*norm)[i]] = pads[i];
    s.end[(*norm)[i]] = pads[i + axes.size()];
  }
  return s;
}

// Split sizes along one axis of length `dim` (dim known).
inline Expected<std::vector<int64_t>> split_sizes(int64_t dim, const std::vector<int64_t>& split,
                                                  bool has_split, int64_t num_outputs,
                                                  bool uneven_allowed) {
  if (has_split) {
    if (static_cast<int64_t>(split.size()) != num_outputs)
      return invalid_model("split has " + std::to_string(split.size()) + " entries for " +
                           std::to_string(num_outputs) + " outputs");
    int64_t sum = 0;
    for (int64_t s : split) {
      if (s < 0) return invalid_model("split " + dims_to_string(split) + " has a negative size");
      auto t = checked_add(sum, s);
      if (!t) return invalid_model("split sizes overflow");
      sum = *t;
    }
    if (sum != dim)
      return invalid_model("split " + dims_to_string(split) + " sums to " + std::to_string(sum) +
                           ", the axis has " + std::to_string(dim));
    return split;
  }
  if (num_outputs <= 0) return invalid_model("Split needs at least one output");
  std::vector<int64_t> sizes;
  if (dim % num_outputs == 0) {
    sizes.assign(num_outputs, dim / num_outputs);
  } else {
    if (!uneven_allowed)
      return invalid_model("axis of length " + std::to_string(dim) + " cannot be split into " +
                           std::to_string(num_outputs) + " equal parts");
    int64_t chunk =
        dim / num_outputs + 1;  // ceil: dim is not a multiple here (no dim + n overflow)
    int64_t left = dim;
    for (int64_t i = 0; i < num_outputs; ++i) {
      int64_t s = std::min(chunk, left);
      sizes.push_back(s);
      left -= s;
    }
    if (left != 0 || sizes.back() <= 0)
      return invalid_model("axis of length " + std::to_string(dim) + " cannot be split into " +
                           std::to_string(num_outputs) + " parts");
  }
  return sizes;
}

}  // namespace peregrine::shape_util

namespace peregrine::shape_util {

// An int list that is an attribute in older opsets and an input in newer ones.
struct IntList {
  bool present = false;  // given at all
  bool known = false;    // its values are known now
  std::vector<int64_t> values;
};

// The input's value if present and known now; works for InferContext and KernelContext.
template <class Ctx>
const Tensor* known_input(const Ctx& c, size_t i) {
  if (!c.has_input(i)) return nullptr;
  if constexpr (std::is_same_v<Ctx, InferContext>) {
    return c.input_value(i);
  } else {
    return c.input_value(i).is_tensor() ? &c.input(i) : nullptr;
  }
}

// Attribute `attr` before opset `input_since`, input `input` from then on.
template <class Ctx>
Expected<IntList> ints_attr_or_input(const Ctx& c, const char* attr, size_t input,
                                     int input_since) {
  IntList r;
  if (c.opset() < input_since) {
    if (!c.attrs().has(attr)) return r;
    auto v = c.attrs().get_ints(attr);
    if (!v.is_ok()) return v.status();
    r.present = r.known = true;
    r.values = std::move(*v);
    return r;
  }
  if (!c.has_input(input)) return r;
  r.present = true;
  if (const Tensor* t = known_input(c, input)) {
    if (t->dtype() != DType::kInt64 && t->dtype() != DType::kInt32)
      return invalid_model("input " + std::to_string(input) + " must be int64 or int32");
    r.known = true;
    r.values = t->to_int64_vector();
  }
  return r;
}

// Slice's starts/ends/axes/steps for this node's opset.
template <class Ctx>
Expected<std::vector<IntList>> slice_params(const Ctx& ctx) {
  std::vector<IntList> p(4);
  const char* names[] = {"starts", "ends", "axes", "steps"};
  for (size_t i = 0; i < 4; ++i) {
    if (ctx.opset() < 10 && i == 3) break;
    auto v = ints_attr_or_input(ctx, names[i], i + 1, 10);
    if (!v.is_ok()) return v.status();
    p[i] = std::move(*v);
  }
  return p;
}

// Pad parameters for this node's opset; shared with the kernel.
template <class Ctx>
Expected<std::optional<PadSpec>> pad_params(const Ctx& ctx, int64_t rank) {
  using Result = std::optional<PadSpec>;
  std::vector<int64_t> pads, axes;
  if (ctx.opset() < 11) {
    const char* name = ctx.opset() < 2 ? "paddings" : "pads";
    auto v = ctx.attrs().get_ints(name);
    if (!v.is_ok()) return v.status();
    pads = *v;
  } else {
    const Tensor* t = known_input(ctx, 1);
    if (!ctx.has_input(1)) return invalid_model("pads are required");
    if (!t) return Result();
    if (t->dtype() != DType::kInt64) return invalid_model("pads must be int64");
    pads = t->to_int64_vector();
    if (ctx.has_input(3)) {
      const Tensor* a = known_input(ctx, 3);
      if (!a) return Result();
      if (a->dtype() != DType::kInt64 && a->dtype() != DType::kInt32)
        return invalid_model("axes must be int64 or int32");
      axes = a->to_int64_vector();
    }
  }
  auto s = pad_spec(rank, pads, axes);
  if (!s.is_ok()) return s.status();
  return Result(std::move(*s));
}

// Number of Range elements: max(ceil((limit - start) / delta), 0).
inline Expected<int64_t> range_count(const Tensor& start, const Tensor& limit,
                                     const Tensor& delta) {
  if (dtype_is_float(start.dtype())) {
    double s = start.get_as_double(0), l = limit.get_as_double(0), d = delta.get_as_double(0);
    if (d == 0) return invalid_model("delta is 0");
    double n = std::ceil((l - s) / d);
    if (!(n < 1e15)) return invalid_model("range has too many elements");
    return n > 0 ? static_cast<int64_t>(n) : 0;
  }
  int64_t s = start.get_as_int64(0), l = limit.get_as_int64(0), d = delta.get_as_int64(0);
  if (d == 0) return invalid_model("delta is 0");
  __int128 diff = static_cast<__int128>(l) - s;
  __int128 n = diff / d;
  if (n * d != diff && (diff > 0) == (d > 0)) ++n;  // ceil for exact-sign quotients
  if (n < 0) n = 0;
  if (n > (__int128{1} << 50)) return invalid_model("range has too many elements");
  return static_cast<int64_t>(n);
}

// CenterCropPad's target size per input dim; shared with the kernel.
inline Expected<Shape> center_crop_pad_shape(const ir::AttrView& attrs, const Shape& in,
                                             const std::vector<int64_t>& target) {
  auto axes_attr = attrs.get_ints("axes");
  if (!axes_attr.is_ok()) return axes_attr.status();
  std::vector<int64_t> axes = *axes_attr;
  const int64_t rank = static_cast<int64_t>(in.size());
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  auto norm = normalize_axes(axes, rank, "axes");
  if (!norm.is_ok()) return norm.status();
  if (target.size() != norm->size())
    return invalid_model("shape has " + std::to_string(target.size()) + " values for " +
                         std::to_string(norm->size()) + " axes");
  Shape out = in;
  for (size_t i = 0; i < norm->size(); ++i) {
    if (target[i] < 0)
      return invalid_model("shape " + dims_to_string(target) + " has a negative dim");
    out[(*norm)[i]] = target[i];
  }
  return out;
}

}  // namespace peregrine::shape_util

namespace peregrine::shape_util {

// Wraps an infer function: an input whose kind is still unknown at load time (e.g. an
// If output) is seen as a tensor of unknown type and shape, so outputs get what can be
// known (an attribute's dtype, a rank); run time infers again with the real types.
inline InferFn unless_input_unknown(InferFn fn) {
  return [fn = std::move(fn)](InferContext& ctx) -> Status {
    static const ir::ValueType kAnyTensor = ir::ValueType::tensor_unknown_shape(DType::kUndefined);
    bool substituted = false;
    std::vector<const ir::ValueType*> types(ctx.num_inputs(), nullptr);
    std::vector<const Tensor*> values(ctx.num_inputs(), nullptr);
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) continue;
      values[i] = ctx.input_value(i);
      types[i] = &ctx.input_type(i);
      if (types[i]->kind == ir::ValueType::Kind::kUnknown) {
        types[i] = &kAnyTensor;
        substituted = true;
      }
    }
    if (!substituted) return fn(ctx);
    InferContext inner(ctx.node(), types, values);
    PG_RETURN_IF_ERROR(fn(inner));
    ctx.output_types() = inner.output_types();
    ctx.output_values() = inner.output_values();
    return Status::ok();
  };
}

}  // namespace peregrine::shape_util
