// Data-movement helpers shared by the tensor_shape and gather_scatter reference kernels.
// They copy elements without looking at them, so they serve every dtype incl. strings.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/reference/kernel_helpers.h"

namespace peregrine::move_util {

// out[i] = in[src_index(i)] for every element of out.
template <class F>
Status copy_by_index(const Tensor& in, Tensor& out, F&& src_index) {
  const int64_t n = out.numel();
  if (in.dtype() == DType::kString) {
    const auto& src = in.strings();
    auto& dst = out.strings();
    for (int64_t i = 0; i < n; ++i) dst[i] = src[src_index(i)];
    return Status::ok();
  }
  return visit_by_size(in.dtype(), [&]<typename T>() {
    const T* src = static_cast<const T*>(in.raw());
    T* dst = static_cast<T*>(out.raw());
    for (int64_t i = 0; i < n; ++i) dst[i] = src[src_index(i)];
  });
}

// Copies `count` consecutive elements from src[src_offset] to dst[dst_offset].
inline void copy_range(const Tensor& src, int64_t src_offset, Tensor& dst, int64_t dst_offset,
                       int64_t count) {
  if (count <= 0) return;
  if (src.dtype() == DType::kString) {
    for (int64_t i = 0; i < count; ++i)
      dst.strings()[dst_offset + i] = src.strings()[src_offset + i];
    return;
  }
  const size_t size = dtype_size(src.dtype());
  uint8_t* to = static_cast<uint8_t*>(dst.raw()) + dst_offset * size;
  const uint8_t* from = static_cast<const uint8_t*>(src.raw()) + src_offset * size;
  if (to != from) std::memcpy(to, from, count * size);  // equal: a Concat part planned in place
}

// Coordinates of a flat index in a row-major shape.
inline void unravel(int64_t flat, const Shape& shape, std::vector<int64_t>& coords) {
  coords.resize(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    coords[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
}

// Product of dims [lo, hi).
inline int64_t product(const Shape& s, int64_t lo, int64_t hi) {
  int64_t p = 1;
  for (int64_t i = lo; i < hi; ++i) p *= s[i];
  return p;
}

// Maps index values to [0, dim), or an error naming the bad one.
inline Expected<std::vector<int64_t>> checked_indices(const Tensor& indices, int64_t dim,
                                                      const std::string& what) {
  std::vector<int64_t> out(static_cast<size_t>(indices.numel()));
  for (int64_t i = 0; i < indices.numel(); ++i) {
    int64_t v = indices.get_as_int64(i);
    if (v < -dim || v >= dim)
      return invalid_input(what + " index " + std::to_string(v) + " is out of range for a dim of " +
                           std::to_string(dim));
    out[i] = v < 0 ? v + dim : v;
  }
  return out;
}

}  // namespace peregrine::move_util
