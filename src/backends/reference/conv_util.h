// Loops shared by the reference conv and pool kernels: the accumulation type per
// element type, strided gathers/scatters between an N-D grid and an N-D plane, and
// a row-wise matrix product whose inner loop runs over contiguous memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "peregrine/float_types.h"
#include "peregrine/tensor.h"

namespace peregrine {

// Narrow floats accumulate in float; other types in themselves.
template <typename T>
struct Accumulator {
  using type = T;
};
template <>
struct Accumulator<Float16> {
  using type = float;
};
template <>
struct Accumulator<BFloat16> {
  using type = float;
};
template <typename T>
using AccumulatorOf = typename Accumulator<T>::type;

inline int64_t product_of(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

// Advances a row-major multi-index over `dims`; false after the last one.
inline bool next_index(std::vector<int64_t>& index, const std::vector<int64_t>& dims) {
  for (size_t i = index.size(); i-- > 0;) {
    if (++index[i] < dims[i]) return true;
    index[i] = 0;
  }
  return false;
}

// Walks a grid (`grid_dims`) mapped onto a plane (`plane_dims`) by
// plane_pos = grid_pos * stride + offset, one grid row (last dim) at a time. For each row
// calls fn(grid_row_start, plane_row_base, lo, hi): grid element grid_row_start + j, for j in
// [lo, hi), maps to plane element plane_row_base + j * stride_last + offset_last; rows that
// fall outside the plane get lo == hi. All vectors have one entry per spatial dim (>= 1).
template <typename F>
void for_each_strided_row(const std::vector<int64_t>& grid_dims,
                          const std::vector<int64_t>& plane_dims,
                          const std::vector<int64_t>& strides, const std::vector<int64_t>& offsets,
                          F&& fn) {
  const size_t rank = grid_dims.size();
  const size_t last = rank - 1;
  const int64_t row_len = grid_dims[last];
  const int64_t plane_row_len = plane_dims[last];
  const int64_t s = strides[last], off = offsets[last];
  // Grid indices j with 0 <= j * s + off < plane_row_len.
  int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
  int64_t hi = plane_row_len - off <= 0 ? 0 : (plane_row_len - off - 1) / s + 1;
  lo = std::min(lo, row_len);
  hi = std::clamp(hi, lo, row_len);
  std::vector<int64_t> outer_dims(grid_dims.begin(),
                                  grid_dims.begin() + static_cast<std::ptrdiff_t>(last));
  std::vector<int64_t> index(last, 0);
  for (int64_t d : outer_dims)
    if (d == 0) return;
  if (row_len == 0) return;
  int64_t grid_row_start = 0;
  do {
    bool inside = true;
    int64_t plane_row = 0;
    for (size_t d = 0; d < last; ++d) {
      const int64_t p = index[d] * strides[d] + offsets[d];
      if (p < 0 || p >= plane_dims[d]) {
        inside = false;
        break;
      }
      plane_row = plane_row * plane_dims[d] + p;
    }
    if (inside) {
      fn(grid_row_start, plane_row * plane_row_len, lo, hi);
    } else {
      fn(grid_row_start, int64_t{0}, int64_t{0}, int64_t{0});
    }
    grid_row_start += row_len;
  } while (next_index(index, outer_dims));
}

// grid[g] = plane[g * stride + offset], 0 outside the plane (one im2col row).
template <typename A>
void gather_strided(const A* plane, const std::vector<int64_t>& plane_dims, A* grid,
                    const std::vector<int64_t>& grid_dims, const std::vector<int64_t>& strides,
                    const std::vector<int64_t>& offsets) {
  const int64_t row_len = grid_dims.back();
  const int64_t s = strides.back(), off = offsets.back();
  for_each_strided_row(grid_dims, plane_dims, strides, offsets,
                       [&](int64_t g0, int64_t p0, int64_t lo, int64_t hi) {
                         A* dst = grid + g0;
                         std::fill(dst, dst + lo, A(0));
                         const A* src = plane + p0 + off;
                         if (s == 1) {
                           for (int64_t j = lo; j < hi; ++j) dst[j] = src[j];
                         } else {
                           for (int64_t j = lo; j < hi; ++j) dst[j] = src[j * s];
                         }
                         std::fill(dst + std::max(lo, hi), dst + row_len, A(0));
                       });
}

// plane[g * stride + offset] += grid[g] where inside the plane (one col2im row).
template <typename A>
void scatter_add_strided(const A* grid, const std::vector<int64_t>& grid_dims, A* plane,
                         const std::vector<int64_t>& plane_dims,
                         const std::vector<int64_t>& strides, const std::vector<int64_t>& offsets) {
  const int64_t s = strides.back(), off = offsets.back();
  for_each_strided_row(grid_dims, plane_dims, strides, offsets,
                       [&](int64_t g0, int64_t p0, int64_t lo, int64_t hi) {
                         const A* src = grid + g0;
                         A* dst = plane + p0 + off;
                         for (int64_t j = lo; j < hi; ++j) dst[j * s] += src[j];
                       });
}

// out[m, :] += sum_r a[m, r] * b[r, :] for m < rows_a, r < inner, over `cols` columns;
// a, b and out have row strides a_stride, b_stride and out_stride. The innermost loop is an
// axpy over one contiguous row; columns go in tiles so the rows of b being reused stay in
// cache.
template <typename A>
void accumulate_product(const A* a, int64_t a_stride, const A* b, int64_t b_stride, A* out,
                        int64_t out_stride, int64_t rows_a, int64_t inner, int64_t cols) {
  constexpr int64_t kTile = 512;
  for (int64_t p0 = 0; p0 < cols; p0 += kTile) {
    const int64_t p1 = std::min(cols, p0 + kTile);
    for (int64_t m = 0; m < rows_a; ++m) {
      A* __restrict out_row = out + m * out_stride;
      for (int64_t r = 0; r < inner; ++r) {
        const A w = a[m * a_stride + r];
        const A* __restrict b_row = b + r * b_stride;
        for (int64_t p = p0; p < p1; ++p) out_row[p] += w * b_row[p];
      }
    }
  }
}

// Elements of an im2col-style buffer above which kernels work on slabs of the outermost
// spatial dim instead of the whole plane (keeps memory bounded for large images).
inline constexpr int64_t kColumnBufferElements = int64_t{1} << 22;

// How many slices of the outermost dim (each `slice_elements` per buffer row) fit the
// column budget for `rows` buffer rows; at least 1.
inline int64_t slab_height(int64_t rows, int64_t slice_elements, int64_t outer_dim) {
  const int64_t per_slice = std::max<int64_t>(1, rows * slice_elements);
  return std::clamp<int64_t>(kColumnBufferElements / per_slice, 1, std::max<int64_t>(outer_dim, 1));
}

// Copies (converting) n elements of a tensor's data to the accumulation type.
template <typename T, typename A>
std::vector<A> to_accumulator(const T* data, int64_t n) {
  std::vector<A> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<A>(data[i]);
  return out;
}

}  // namespace peregrine
