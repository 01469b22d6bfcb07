// Reference kernels of the gather_scatter family. Every index read from a tensor is
// range-checked before it is used, so bad indices are errors, never stray reads.
#include <algorithm>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"
#include "backends/reference/tensor_shape_util.h"

namespace peregrine {

namespace {

using move_util::checked_indices;
using move_util::copy_by_index;
using move_util::copy_range;
using move_util::product;
using move_util::unravel;

int64_t normalized_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

Status gather_kernel(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  axis = normalized_axis(axis, data.rank());
  const int64_t dim = data.dim(axis);
  auto idx = checked_indices(ctx.input(1), dim, "Gather");
  if (!idx.is_ok()) return ctx.error(idx.status().message());
  const int64_t n = static_cast<int64_t>(idx->size());
  const int64_t inner = product(data.shape(), axis + 1, data.rank());
  Tensor& out = ctx.output(0);
  return copy_by_index(data, out, [&](int64_t i) {
    const int64_t k = i % inner, j = (i / inner) % n, o = i / inner / n;
    return (o * dim + (*idx)[j]) * inner + k;
  });
}

// GatherElements / ScatterElements: element positions of data addressed by `indices`
// (same rank as data), with the index replacing the coordinate on `axis`.
Expected<std::vector<int64_t>> element_positions(const KernelContext& ctx, const Tensor& data,
                                                 const Tensor& indices, int64_t axis) {
  if (indices.rank() != data.rank()) return ctx.error("indices and data have different ranks");
  for (int64_t d = 0; d < data.rank(); ++d)
    if (d != axis && indices.dim(d) > data.dim(d))
      return ctx.error("indices dim " + std::to_string(d) + " (" + std::to_string(indices.dim(d)) +
                       ") exceeds data's (" + std::to_string(data.dim(d)) + ")");
  auto idx = checked_indices(indices, data.dim(axis), ctx.node().op_type);
  if (!idx.is_ok()) return ctx.error(idx.status().message());
  std::vector<int64_t> strides = contiguous_strides(data.shape());
  std::vector<int64_t> pos(idx->size()), coords;
  for (int64_t i = 0; i < indices.numel(); ++i) {
    unravel(i, indices.shape(), coords);
    coords[axis] = (*idx)[i];
    int64_t p = 0;
    for (int64_t d = 0; d < data.rank(); ++d) p += coords[d] * strides[d];
    pos[i] = p;
  }
  return pos;
}

Status gather_elements_kernel(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  axis = normalized_axis(axis, data.rank());
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> pos, element_positions(ctx, data, ctx.input(1), axis));
  Tensor& out = ctx.output(0);
  return copy_by_index(data, out, [&](int64_t i) { return pos[i]; });
}

// GatherND / ScatterND: for each index tuple, the flat offset of the slice it selects.
// batch_dims leading dims are shared by data and indices.
Expected<std::vector<int64_t>> nd_offsets(const KernelContext& ctx, const Tensor& data,
                                          const Tensor& indices, int64_t batch_dims,
                                          int64_t* slice_size) {
  if (indices.rank() < 1) return ctx.error("indices must have rank >= 1");
  const int64_t q = indices.dim(indices.rank() - 1);
  if (q < 1 || q > data.rank() - batch_dims)
    return ctx.error("indices' last dim " + std::to_string(q) + " does not fit data of rank " +
                     std::to_string(data.rank()));
  for (int64_t d = 0; d < batch_dims; ++d)
    if (indices.dim(d) != data.dim(d)) return ctx.error("batch dims of data and indices differ");
  std::vector<int64_t> strides = contiguous_strides(data.shape());
  const int64_t batches = product(data.shape(), 0, batch_dims);
  const int64_t batch_block = product(data.shape(), batch_dims, data.rank());
  const int64_t tuples = indices.numel() / q;
  const int64_t per_batch = batches == 0 ? 0 : tuples / batches;
  *slice_size = product(data.shape(), batch_dims + q, data.rank());
  std::vector<int64_t> offsets(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = (t / per_batch) * batch_block;
    for (int64_t k = 0; k < q; ++k) {
      const int64_t dim = data.dim(batch_dims + k);
      int64_t v = indices.get_as_int64(t * q + k);
      if (v < -dim || v >= dim)
        return ctx.error("index " + std::to_string(v) + " is out of range for dim " +
                         std::to_string(batch_dims + k) + " of size " + std::to_string(dim));
      if (v < 0) v += dim;
      off += v * strides[batch_dims + k];
    }
    offsets[t] = off;
  }
  return offsets;
}

Status gather_nd_kernel(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  PG_ASSIGN_OR_RETURN(int64_t batch_dims, ctx.attrs().get_int("batch_dims", 0));
  int64_t slice = 0;
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> offsets,
                      nd_offsets(ctx, data, ctx.input(1), batch_dims, &slice));
  Tensor& out = ctx.output(0);
  for (size_t t = 0; t < offsets.size(); ++t) copy_range(data, offsets[t], out, t * slice, slice);
  return Status::ok();
}

// Combines update u into x under a reduction; "none" is handled by the caller.
template <typename T>
T reduce(const std::string& reduction, T x, T u) {
  if constexpr (std::is_same_v<T, bool>) {
    if (reduction == "add" || reduction == "max") return x || u;
    return x && u;  // mul, min
  } else {
    if (reduction == "add") return static_cast<T>(x + u);
    if (reduction == "mul") return static_cast<T>(x * u);
    if (reduction == "max") return static_cast<float>(u) > static_cast<float>(x) || u > x ? u : x;
    return u < x ? u : x;  // min
  }
}

// out[pos[i] + k] (op)= updates[i * block + k] for every i and k < block.
Status apply_updates(KernelContext& ctx, const std::vector<int64_t>& pos, int64_t block) {
  const Tensor& updates = ctx.input(2);
  Tensor& out = ctx.output(0);
  std::string reduction = "none";
  if (ctx.attrs().has("reduction")) {
    PG_ASSIGN_OR_RETURN(reduction, ctx.attrs().get_string("reduction"));
  }
  const int64_t expected = static_cast<int64_t>(pos.size()) * block;
  if (updates.numel() != expected)
    return ctx.error("updates have " + std::to_string(updates.numel()) + " elements, expected " +
                     std::to_string(expected));
  if (reduction == "none") {
    for (size_t i = 0; i < pos.size(); ++i) copy_range(updates, i * block, out, pos[i], block);
    return Status::ok();
  }
  return visit_numeric_or_bool(out.dtype(), [&]<typename T>() {
    T* o = out.data<T>();
    const T* u = updates.data<T>();
    for (size_t i = 0; i < pos.size(); ++i)
      for (int64_t k = 0; k < block; ++k)
        o[pos[i] + k] = reduce<T>(reduction, o[pos[i] + k], u[i * block + k]);
  });
}

Status scatter_elements_kernel(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  if (ctx.input(2).shape() != indices.shape())
    return ctx.error("updates " + shape_to_string(ctx.input(2).shape()) + " and indices " +
                     shape_to_string(indices.shape()) + " have different shapes");
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  axis = normalized_axis(axis, data.rank());
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> pos, element_positions(ctx, data, indices, axis));
  Tensor& out = ctx.output(0);
  copy_range(data, 0, out, 0, data.numel());
  return apply_updates(ctx, pos, 1);
}

Status scatter_nd_kernel(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  int64_t slice = 0;
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, nd_offsets(ctx, data, indices, 0, &slice));
  // updates: indices.shape[:-1] + data.shape[q:]
  Shape expected(indices.shape().begin(), indices.shape().end() - 1);
  expected.insert(expected.end(), data.shape().begin() + indices.dim(indices.rank() - 1),
                  data.shape().end());
  if (ctx.input(2).shape() != expected)
    return ctx.error("updates have shape " + shape_to_string(ctx.input(2).shape()) + ", expected " +
                     shape_to_string(expected));
  Tensor& out = ctx.output(0);
  copy_range(data, 0, out, 0, data.numel());
  return apply_updates(ctx, offsets, slice);
}

// TensorScatter: the cache copied, then for every index before the sequence axis the update's
// rows written from the batch entry's write index on (modulo the cache length when circular).
Status tensor_scatter_kernel(KernelContext& ctx) {
  const Tensor& cache = ctx.input(0);
  const Tensor& update = ctx.input(1);
  PG_ASSIGN_OR_RETURN(std::string mode, ctx.attrs().get_string("mode", "linear"));
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -2));
  axis = normalized_axis(axis, cache.rank());
  const int64_t max_len = cache.dim(axis), len = update.dim(axis);
  const int64_t batch = cache.dim(0);
  const int64_t outer = product(cache.shape(), 0, axis),
                inner = product(cache.shape(), axis + 1, cache.rank());
  const int64_t per_batch = outer / std::max<int64_t>(batch, 1);
  const Tensor* indices = ctx.num_inputs() > 2 && ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (indices && (indices->rank() != 1 || indices->dim(0) != batch))
    return ctx.error("write_indices has shape " + shape_to_string(indices->shape()) +
                     ", expected (" + std::to_string(batch) + ")");
  Tensor& out = ctx.output(0);
  copy_range(cache, 0, out, 0, cache.numel());
  for (int64_t o = 0; o < outer; ++o) {
    const int64_t start = indices ? indices->get_as_int64(o / per_batch) : 0;
    for (int64_t s = 0; s < len; ++s) {
      int64_t row = start + s;
      if (mode == "circular") row = ((row % max_len) + max_len) % max_len;
      if (row < 0 || row >= max_len)
        return ctx.error("write index " + std::to_string(start) + " + " + std::to_string(s) +
                         " is outside the cache's " + std::to_string(max_len) + " positions");
      copy_range(update, (o * len + s) * inner, out, (o * max_len + row) * inner, inner);
    }
  }
  return Status::ok();
}

Status compress_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const Tensor& cond = ctx.input(1);
  const bool* c = cond.data<bool>();
  int64_t outer = 1, len = in.numel(), inner = 1, axis = -1;
  if (ctx.attrs().has("axis")) {
    PG_ASSIGN_OR_RETURN(axis, ctx.attrs().get_int("axis"));
    axis = normalized_axis(axis, in.rank());
    outer = product(in.shape(), 0, axis);
    len = in.dim(axis);
    inner = product(in.shape(), axis + 1, in.rank());
  }
  std::vector<int64_t> chosen;
  for (int64_t i = 0; i < cond.numel(); ++i) {
    if (!c[i]) continue;
    if (i >= len)
      return ctx.error("condition selects position " + std::to_string(i) +
                       " past the axis length " + std::to_string(len));
    chosen.push_back(i);
  }
  const int64_t n = static_cast<int64_t>(chosen.size());
  Shape shape = axis >= 0 ? in.shape() : Shape{n};
  if (axis >= 0) shape[axis] = n;
  Tensor& out = ctx.allocate_output(0, in.dtype(), shape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j)
      copy_range(in, (o * len + chosen[j]) * inner, out, (o * n + j) * inner, inner);
  return Status::ok();
}

Status nonzero_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  if (in.dtype() == DType::kString) return ctx.error("string input is not supported");
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < in.numel(); ++i)
    if (in.get_as_double(i) != 0) hits.push_back(i);
  // A scalar counts as a 1-D tensor of one element, as numpy does.
  const Shape shape = in.rank() == 0 ? Shape{1} : in.shape();
  const int64_t rank = static_cast<int64_t>(shape.size()), n = static_cast<int64_t>(hits.size());
  Tensor& out = ctx.allocate_output(0, DType::kInt64, {rank, n});
  std::vector<int64_t> coords;
  for (int64_t j = 0; j < n; ++j) {
    unravel(hits[j], shape, coords);
    for (int64_t d = 0; d < rank; ++d) out.data<int64_t>()[d * n + j] = coords[d];
  }
  return Status::ok();
}

Status onehot_kernel(KernelContext& ctx) {
  const Tensor& indices = ctx.input(0);
  const Tensor& values = ctx.input(2);
  if (values.numel() != 2) return ctx.error("values must have two elements");
  Tensor& out = ctx.output(0);
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
  axis = normalized_axis(axis, out.rank());
  const int64_t depth = out.dim(axis);
  const int64_t inner = product(out.shape(), axis + 1, out.rank());
  for (int64_t i = 0; i < out.numel(); ++i) copy_element(values, 0, out, i);
  for (int64_t i = 0; i < indices.numel(); ++i) {
    const double raw = indices.get_as_double(i);
    if (!(raw >= -static_cast<double>(depth) && raw < static_cast<double>(depth))) continue;
    int64_t v = static_cast<int64_t>(raw);
    if (v < 0) v += depth;
    const int64_t o = i / inner, k = i % inner;
    copy_element(values, 1, out, (o * depth + v) * inner + k);
  }
  return Status::ok();
}

}  // namespace

void register_gather_scatter_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "Gather", gather_kernel);
  r.add(kOnnxDomain, "GatherElements", gather_elements_kernel);
  r.add(kOnnxDomain, "GatherND", gather_nd_kernel);
  r.add(kOnnxDomain, "Scatter", scatter_elements_kernel);
  r.add(kOnnxDomain, "ScatterElements", scatter_elements_kernel);
  r.add(kOnnxDomain, "ScatterND", scatter_nd_kernel);
  r.add(kOnnxDomain, "TensorScatter", tensor_scatter_kernel);
  r.add(kOnnxDomain, "Compress", compress_kernel);
  r.add(kOnnxDomain, "NonZero", nonzero_kernel);
  r.add(kOnnxDomain, "OneHot", onehot_kernel);
}

}  // namespace peregrine
