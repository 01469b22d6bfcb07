// Reference kernels of the tensor_shape family. Output shapes come from the schema
// (inferred with every input value known); kernels only move elements.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"
#include "backends/reference/tensor_shape_util.h"
#include "ops/tensor_shape_util.h"

namespace peregrine {

namespace {

using move_util::copy_by_index;
using move_util::copy_range;
using move_util::product;
using move_util::unravel;

Status fail(const KernelContext& ctx, const Status& s) {
  return Status(s.code() == StatusCode::kInvalidModel ? StatusCode::kInvalidInput : s.code(),
                ctx.node().describe() + ": " + s.message());
}

Status constant_kernel(KernelContext& ctx) {
  auto v = shape_util::constant_value(ctx.attrs());
  if (!v.is_ok()) return fail(ctx, v.status());
  ctx.set_output(0, *v);
  return Status::ok();
}

Status identity_kernel(KernelContext& ctx) {
  if (!ctx.input_present_slot(0)) return ctx.error("input 0 is required");
  ctx.set_output_value(0, ctx.input_value(0));
  return Status::ok();
}

// Reshape, Flatten, Squeeze, Unsqueeze: the same buffer under the inferred shape.
Status reshape_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const ir::ValueType& t = ctx.output_type(0);
  if (!t.is_static())
    return internal_error(ctx.node().describe() + ": output shape is not known at run time");
  auto n = checked_product(t.dims);
  if (!n || *n != in.numel())
    return ctx.error("cannot view " + shape_to_string(in.shape()) + " as " +
                     shape_to_string(t.dims));
  ctx.set_output(0, in.reshaped(t.dims));
  return Status::ok();
}

Status shape_kernel(KernelContext& ctx) {
  const Shape& s = ctx.input(0).shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  PG_ASSIGN_OR_RETURN(int64_t start, ctx.attrs().get_int("start", 0));
  PG_ASSIGN_OR_RETURN(int64_t end, ctx.attrs().get_int("end", rank));
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  std::vector<int64_t> dims(s.begin() + start, s.begin() + std::max(start, end));
  ctx.set_output(0, Tensor::from_vector<int64_t>(dims, {static_cast<int64_t>(dims.size())}));
  return Status::ok();
}

Status size_kernel(KernelContext& ctx) {
  ctx.set_output(0, Tensor::scalar<int64_t>(ctx.input(0).numel()));
  return Status::ok();
}

Status transpose_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const int64_t rank = in.rank();
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ctx.attrs().get_ints("perm"));
  if (perm.empty())
    for (int64_t d = rank - 1; d >= 0; --d) perm.push_back(d);
  Tensor& out = ctx.output(0);
  std::vector<int64_t> in_strides = contiguous_strides(in.shape());
  std::vector<int64_t> coords;
  return copy_by_index(in, out, [&](int64_t i) {
    unravel(i, out.shape(), coords);
    int64_t src = 0;
    for (int64_t d = 0; d < rank; ++d) src += coords[d] * in_strides[perm[d]];
    return src;
  });
}

Status concat_kernel(KernelContext& ctx) {
  Tensor& out = ctx.output(0);
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis"));
  if (axis < 0) axis += out.rank();
  const int64_t outer = product(out.shape(), 0, axis);
  const int64_t inner = product(out.shape(), axis + 1, out.rank());
  const int64_t out_axis = out.dim(axis);
  int64_t offset = 0;  // position along the axis where this input starts
  for (size_t k = 0; k < ctx.num_inputs(); ++k) {
    const Tensor& in = ctx.input(k);
    const int64_t len = in.dim(axis);
    for (int64_t o = 0; o < outer; ++o)
      copy_range(in, o * len * inner, out, (o * out_axis + offset) * inner, len * inner);
    offset += len;
  }
  return Status::ok();
}

Status split_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  if (axis < 0) axis += in.rank();
  const int64_t outer = product(in.shape(), 0, axis);
  const int64_t inner = product(in.shape(), axis + 1, in.rank());
  int64_t offset = 0;
  for (size_t k = 0; k < ctx.num_outputs(); ++k) {
    const int64_t len = ctx.output_type(k).dims[axis];
    if (ctx.wants_output(k)) {
      Tensor& out = ctx.output(k);
      for (int64_t o = 0; o < outer; ++o)
        copy_range(in, (o * in.dim(axis) + offset) * inner, out, o * len * inner, len * inner);
    }
    offset += len;
  }
  return Status::ok();
}

Status slice_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  PG_ASSIGN_OR_RETURN(auto p, shape_util::slice_params(ctx));
  auto axes =
      shape_util::slice_axes(in.shape(), p[0].values, p[1].values, p[2].values, p[3].values);
  if (!axes.is_ok()) return fail(ctx, axes.status());
  Tensor& out = ctx.output(0);
  std::vector<int64_t> in_strides = contiguous_strides(in.shape());
  std::vector<int64_t> coords;
  return copy_by_index(in, out, [&](int64_t i) {
    unravel(i, out.shape(), coords);
    int64_t src = 0;
    for (size_t d = 0; d < coords.size(); ++d)
      src += ((*axes)[d].start + coords[d] * (*axes)[d].step) * in_strides[d];
    return src;
  });
}

Status expand_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  BroadcastIndexer index(in.shape(), out.shape());
  return copy_by_index(in, out, [&](int64_t i) { return index(i); });
}

Status tile_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  std::vector<int64_t> in_strides = contiguous_strides(in.shape());
  std::vector<int64_t> coords;
  return copy_by_index(in, out, [&](int64_t i) {
    unravel(i, out.shape(), coords);
    int64_t src = 0;
    for (size_t d = 0; d < coords.size(); ++d) src += (coords[d] % in.dim(d)) * in_strides[d];
    return src;
  });
}

// A one-element tensor of `dtype` holding Pad's constant value.
Expected<Tensor> pad_fill_value(const KernelContext& ctx, DType dtype) {
  if (ctx.opset() >= 11) {
    if (ctx.has_input(2) && ctx.input(2).numel() > 0) {
      if (ctx.input(2).dtype() != dtype)
        return ctx.error("constant_value has a different type than data");
      return ctx.input(2);
    }
    return Tensor::zeros(dtype, {});
  }
  auto v = ctx.attrs().get_float("value", 0.f);
  if (!v.is_ok()) return v.status();
  Tensor fill = Tensor::zeros(dtype, {});
  if (dtype == DType::kString) return fill;
  Status st =
      visit_numeric_or_bool(dtype, [&]<typename T>() { fill.data<T>()[0] = static_cast<T>(*v); });
  if (!st.is_ok()) return st;
  return fill;
}

Status pad_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const int64_t rank = in.rank();
  PG_ASSIGN_OR_RETURN(std::string mode, ctx.attrs().get_string("mode", "constant"));
  auto spec = shape_util::pad_params(ctx, rank);
  if (!spec.is_ok()) return fail(ctx, spec.status());
  if (!spec->has_value()) return ctx.error("pads are not known");
  const shape_util::PadSpec& pads = **spec;
  PG_ASSIGN_OR_RETURN(Tensor fill, pad_fill_value(ctx, in.dtype()));
  Tensor& out = ctx.output(0);
  // Negative pads crop: each dim reads the window [lo, lo + len) of the input.
  std::vector<int64_t> lo(rank), len(rank), before(rank);
  for (int64_t d = 0; d < rank; ++d) {
    lo[d] = std::max<int64_t>(0, -pads.begin[d]);
    len[d] = in.dim(d) - lo[d] - std::max<int64_t>(0, -pads.end[d]);
    before[d] = std::max<int64_t>(0, pads.begin[d]);
    if (len[d] <= 0 && mode != "constant" && out.dim(d) > 0)
      return ctx.error("mode '" + mode + "' cannot pad dim " + std::to_string(d) +
                       " with nothing left to copy");
  }
  std::vector<int64_t> in_strides = contiguous_strides(in.shape());
  std::vector<int64_t> coords;
  for (int64_t i = 0; i < out.numel(); ++i) {
    unravel(i, out.shape(), coords);
    int64_t src = 0;
    bool inside = true;
    for (int64_t d = 0; d < rank && inside; ++d) {
      int64_t c = coords[d] - before[d];  // position in the window
      if (c < 0 || c >= len[d]) {
        if (mode == "constant") {
          inside = false;
        } else if (mode == "edge") {
          c = std::clamp<int64_t>(c, 0, len[d] - 1);
        } else if (mode == "wrap") {
          c = ((c % len[d]) + len[d]) % len[d];
        } else if (len[d] == 1) {  // reflect
          c = 0;
        } else {
          const int64_t period = 2 * (len[d] - 1);
          c = ((c % period) + period) % period;
          if (c >= len[d]) c = period - c;
        }
      }
      src += (lo[d] + c) * in_strides[d];
    }
    if (inside)
      copy_element(in, src, out, i);
    else
      copy_element(fill, 0, out, i);
  }
  return Status::ok();
}

Status constant_of_shape_kernel(KernelContext& ctx) {
  Tensor& out = ctx.output(0);
  const Tensor* value = ctx.attrs().get_tensor("value");
  Tensor zero = Tensor::zeros(DType::kFloat32, {});
  const Tensor& fill = value ? *value : zero;
  for (int64_t i = 0; i < out.numel(); ++i) copy_element(fill, 0, out, i);
  return Status::ok();
}

Status dropout_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  bool training = false;
  if (ctx.opset() >= 12 && ctx.has_input(2)) training = ctx.input(2).get_as_double(0) != 0;
  double ratio = 0.5;
  if (ctx.opset() >= 12) {
    if (ctx.has_input(1)) ratio = ctx.input(1).get_as_double(0);
  } else {
    PG_ASSIGN_OR_RETURN(float r, ctx.attrs().get_float("ratio", 0.5f));
    ratio = r;
  }
  if (!(ratio >= 0 && ratio < 1)) return ctx.error("ratio must be in [0, 1)");
  // Training mode drops at random; only the deterministic ratio 0 case is supported.
  if (training && ratio != 0)
    return unsupported(ctx.node().describe() + ": training mode is not supported");
  ctx.set_output(0, in);
  if (ctx.num_outputs() > 1 && ctx.wants_output(1)) {
    Tensor& mask = ctx.output(1);
    if (mask.dtype() == DType::kBool) {
      std::fill(mask.data<bool>(), mask.data<bool>() + mask.numel(), true);
    } else {
      PG_RETURN_IF_ERROR(visit_numeric(mask.dtype(), [&]<typename T>() {
        std::fill(mask.data<T>(), mask.data<T>() + mask.numel(), static_cast<T>(1.0f));
      }));
    }
  }
  return Status::ok();
}

Status range_kernel(KernelContext& ctx) {
  const Tensor& start = ctx.input(0);
  const Tensor& delta = ctx.input(2);
  Tensor& out = ctx.output(0);
  return visit_numeric(out.dtype(), [&]<typename T>() {
    T* o = out.data<T>();
    if constexpr (std::is_integral_v<T>) {
      const int64_t s = start.get_as_int64(0), d = delta.get_as_int64(0);
      // Unsigned arithmetic wraps instead of overflowing; every value that fits is exact.
      for (int64_t i = 0; i < out.numel(); ++i)
        o[i] = static_cast<T>(static_cast<int64_t>(
            static_cast<uint64_t>(s) + static_cast<uint64_t>(i) * static_cast<uint64_t>(d)));
    } else {
      const double s = start.get_as_double(0), d = delta.get_as_double(0);
      for (int64_t i = 0; i < out.numel(); ++i)
        if constexpr (std::is_same_v<T, double>) {
          o[i] = s + i * d;
        } else {
          o[i] = static_cast<T>(static_cast<float>(s + i * d));
        }
    }
  });
}

Status trilu_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  PG_ASSIGN_OR_RETURN(int64_t upper, ctx.attrs().get_int("upper", 1));
  int64_t k = 0;
  if (ctx.has_input(1)) {
    if (ctx.input(1).numel() != 1) return ctx.error("k must be a scalar");
    k = ctx.input(1).get_as_int64(0);
  }
  Tensor& out = ctx.output(0);  // zero-filled
  const int64_t rows = in.dim(in.rank() - 2), cols = in.dim(in.rank() - 1);
  for (int64_t i = 0; i < in.numel(); ++i) {
    const int64_t r = (i / cols) % rows, c = i % cols;
    // Compared in __int128 so an extreme k cannot overflow.
    const __int128 diag = static_cast<__int128>(c) - r;
    if (upper ? diag >= k : diag <= k) copy_element(in, i, out, i);
  }
  return Status::ok();
}

Status depth_to_space_kernel(KernelContext& ctx, bool to_space) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  PG_ASSIGN_OR_RETURN(int64_t b, ctx.attrs().get_int("blocksize"));
  PG_ASSIGN_OR_RETURN(std::string mode, ctx.attrs().get_string("mode", "DCR"));
  const bool crd = mode == "CRD";
  const int64_t C = in.dim(1), H = in.dim(2), W = in.dim(3);
  const int64_t OC = out.dim(1), OH = out.dim(2), OW = out.dim(3);
  return copy_by_index(in, out, [&](int64_t i) {
    const int64_t x = i % OW, y = (i / OW) % OH, c = (i / (OW * OH)) % OC, n = i / (OW * OH * OC);
    int64_t ic, ih, iw;
    if (to_space) {
      const int64_t bh = y % b, bw = x % b;
      ic = crd ? (c * b + bh) * b + bw : (bh * b + bw) * OC + c;
      ih = y / b;
      iw = x / b;
    } else {
      // Output channel c: DCR (block, channel), CRD (channel, block).
      const int64_t block = crd ? c % (b * b) : c / C, bh = block / b, bw = block % b;
      ic = crd ? c / (b * b) : c % C;
      ih = y * b + bh;
      iw = x * b + bw;
    }
    return ((n * C + ic) * H + ih) * W + iw;
  });
}

Status center_crop_pad_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);  // zero-filled: padding stays zero
  const int64_t rank = in.rank();
  // Offset of the output window in input coordinates (negative where the output pads).
  std::vector<int64_t> offset(rank);
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t diff = in.dim(d) - out.dim(d);
    offset[d] = diff >= 0 ? diff / 2 : -((-diff) / 2);
  }
  std::vector<int64_t> in_strides = contiguous_strides(in.shape());
  std::vector<int64_t> coords;
  for (int64_t i = 0; i < out.numel(); ++i) {
    unravel(i, out.shape(), coords);
    int64_t src = 0;
    bool inside = true;
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t c = coords[d] + offset[d];
      if (c < 0 || c >= in.dim(d)) {
        inside = false;
        break;
      }
      src += c * in_strides[d];
    }
    if (inside) copy_element(in, src, out, i);
  }
  return Status::ok();
}

Status reverse_sequence_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const Tensor& lens = ctx.input(1);
  PG_ASSIGN_OR_RETURN(int64_t batch_axis, ctx.attrs().get_int("batch_axis", 1));
  const int64_t time_axis = 1 - batch_axis;
  const int64_t batch = in.dim(batch_axis), steps = in.dim(time_axis);
  if (lens.numel() != batch)
    return ctx.error("sequence_lens has " + std::to_string(lens.numel()) +
                     " values for a batch of " + std::to_string(batch));
  std::vector<int64_t> len(batch);
  for (int64_t b = 0; b < batch; ++b) {
    len[b] = lens.get_as_int64(b);
    if (len[b] < 0 || len[b] > steps)
      return ctx.error("sequence length " + std::to_string(len[b]) + " is outside [0, " +
                       std::to_string(steps) + "]");
  }
  Tensor& out = ctx.output(0);
  const int64_t inner = product(in.shape(), 2, in.rank());
  return copy_by_index(in, out, [&](int64_t i) {
    const int64_t rest = i % inner;
    const int64_t a0 = i / inner / in.dim(1), a1 = (i / inner) % in.dim(1);
    int64_t t = time_axis == 0 ? a0 : a1;
    const int64_t b = batch_axis == 0 ? a0 : a1;
    if (t < len[b]) t = len[b] - 1 - t;
    const int64_t s0 = time_axis == 0 ? t : b, s1 = time_axis == 0 ? b : t;
    return (s0 * in.dim(1) + s1) * inner + rest;
  });
}

// -1, 0 or 1 comparing element a with element b of one tensor.
using ElementCompare = std::function<int(int64_t, int64_t)>;

Expected<ElementCompare> element_compare(const Tensor& t) {
  if (t.dtype() == DType::kString) {
    const auto* s = &t.strings();
    return ElementCompare([s](int64_t a, int64_t b) {
      return (*s)[a].compare((*s)[b]) < 0 ? -1 : ((*s)[a] == (*s)[b] ? 0 : 1);
    });
  }
  ElementCompare cmp;
  Status st = visit_numeric_or_bool(t.dtype(), [&]<typename T>() {
    const T* p = t.data<T>();
    cmp = [p](int64_t a, int64_t b) {
      if constexpr (std::is_same_v<T, bool> || std::is_integral_v<T>) {
        return p[a] < p[b] ? -1 : (p[b] < p[a] ? 1 : 0);
      } else {
        // NaNs sort last and equal each other, keeping the order strict and weak.
        const double x = static_cast<double>(p[a]), y = static_cast<double>(p[b]);
        if (std::isnan(x) || std::isnan(y))
          return std::isnan(x) == std::isnan(y) ? 0 : (std::isnan(x) ? 1 : -1);
        return x < y ? -1 : (y < x ? 1 : 0);
      }
    };
  });
  if (!st.is_ok()) return st;
  return cmp;
}

Status unique_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  PG_ASSIGN_OR_RETURN(int64_t sorted, ctx.attrs().get_int("sorted", 1));
  // Slices along the axis (or single elements of the flattened input) are the items.
  int64_t outer = 1, count = in.numel(), inner = 1, axis = -1;
  if (ctx.attrs().has("axis")) {
    PG_ASSIGN_OR_RETURN(axis, ctx.attrs().get_int("axis"));
    if (axis < 0) axis += in.rank();
    outer = product(in.shape(), 0, axis);
    count = in.dim(axis);
    inner = product(in.shape(), axis + 1, in.rank());
  }
  PG_ASSIGN_OR_RETURN(ElementCompare cmp, element_compare(in));
  auto compare_items = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < inner; ++k) {
        int c = cmp((o * count + a) * inner + k, (o * count + b) * inner + k);
        if (c) return c < 0;
      }
    return false;
  };
  std::map<int64_t, int64_t, decltype(compare_items)> group_of(compare_items);  // item -> group
  std::vector<int64_t> first, counts, inverse(count);
  for (int64_t i = 0; i < count; ++i) {
    auto [it, added] = group_of.emplace(i, static_cast<int64_t>(first.size()));
    if (added) {
      first.push_back(i);
      counts.push_back(0);
    }
    ++counts[it->second];
    inverse[i] = it->second;
  }
  const int64_t groups = static_cast<int64_t>(first.size());
  std::vector<int64_t> order(groups);  // output position -> group
  if (sorted) {
    int64_t pos = 0;
    for (const auto& [item, group] : group_of) order[pos++] = group;
  } else {
    for (int64_t g = 0; g < groups; ++g) order[g] = g;
  }
  std::vector<int64_t> position(groups);
  for (int64_t p = 0; p < groups; ++p) position[order[p]] = p;

  Shape y_shape = axis >= 0 ? in.shape() : Shape{groups};
  if (axis >= 0) y_shape[axis] = groups;
  Tensor& y = ctx.allocate_output(0, in.dtype(), y_shape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t p = 0; p < groups; ++p)
      copy_range(in, (o * count + first[order[p]]) * inner, y, (o * groups + p) * inner, inner);
  auto write = [&](size_t out, int64_t n, auto value) {
    if (ctx.num_outputs() <= out || !ctx.wants_output(out)) return;
    Tensor& t = ctx.allocate_output(out, DType::kInt64, {n});
    for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = value(i);
  };
  write(1, groups, [&](int64_t p) { return first[order[p]]; });
  write(2, count, [&](int64_t i) { return position[inverse[i]]; });
  write(3, groups, [&](int64_t p) { return counts[order[p]]; });
  return Status::ok();
}

Status eye_like_kernel(KernelContext& ctx) {
  Tensor& out = ctx.output(0);  // zero-filled
  PG_ASSIGN_OR_RETURN(int64_t k, ctx.attrs().get_int("k", 0));
  const int64_t rows = out.dim(0), cols = out.dim(1);
  return visit_numeric_or_bool(out.dtype(), [&]<typename T>() {
    T* o = out.data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      const __int128 c = static_cast<__int128>(r) + k;
      if (c >= 0 && c < cols) o[r * cols + static_cast<int64_t>(c)] = static_cast<T>(1.0f);
    }
  });
}

}  // namespace

void register_tensor_shape_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "Constant", constant_kernel);
  r.add(kOnnxDomain, "Identity", identity_kernel);
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"})
    r.add(kOnnxDomain, op, reshape_kernel);
  r.add(kOnnxDomain, "Shape", shape_kernel);
  r.add(kOnnxDomain, "Size", size_kernel);
  r.add(kOnnxDomain, "Transpose", transpose_kernel);
  r.add(kOnnxDomain, "Concat", concat_kernel);
  r.add(kOnnxDomain, "Split", split_kernel);
  r.add(kOnnxDomain, "Slice", slice_kernel);
  r.add(kOnnxDomain, "Expand", expand_kernel);
  r.add(kOnnxDomain, "Tile", tile_kernel);
  r.add(kOnnxDomain, "Pad", pad_kernel);
  r.add(kOnnxDomain, "ConstantOfShape", constant_of_shape_kernel);
  r.add(kOnnxDomain, "Dropout", dropout_kernel);
  r.add(kOnnxDomain, "Range", range_kernel);
  r.add(kOnnxDomain, "Trilu", trilu_kernel);
  r.add(kOnnxDomain, "DepthToSpace",
        [](KernelContext& c) { return depth_to_space_kernel(c, true); });
  r.add(kOnnxDomain, "SpaceToDepth",
        [](KernelContext& c) { return depth_to_space_kernel(c, false); });
  r.add(kOnnxDomain, "CenterCropPad", center_crop_pad_kernel);
  r.add(kOnnxDomain, "ReverseSequence", reverse_sequence_kernel);
  r.add(kOnnxDomain, "Unique", unique_kernel);
  r.add(kOnnxDomain, "EyeLike", eye_like_kernel);
}

}  // namespace peregrine
