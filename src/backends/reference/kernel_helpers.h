// Helpers shared by reference kernels: dtype dispatch and broadcast indexing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ops/op_schema.h"

namespace peregrine {

// Calls fn.template operator()<T>() with the C++ type of `t` for the types in a set;
// returns an "unsupported dtype" error otherwise. Use with C++20 template lambdas:
//   PG_RETURN_IF_ERROR(visit_float(t, [&]<typename T>() { ... }));
template <typename F>
Status visit_float(DType t, F&& fn) {
  switch (t) {
    case DType::kFloat32: fn.template operator()<float>(); return Status::ok();
    case DType::kFloat64: fn.template operator()<double>(); return Status::ok();
    case DType::kFloat16: fn.template operator()<Float16>(); return Status::ok();
    case DType::kBFloat16: fn.template operator()<BFloat16>(); return Status::ok();
    default: return unsupported("element type " + std::string(dtype_name(t)) + " is not supported here (float types only)");
  }
}

template <typename F>
Status visit_integer(DType t, F&& fn) {
  switch (t) {
    case DType::kInt8: fn.template operator()<int8_t>(); return Status::ok();
    case DType::kInt16: fn.template operator()<int16_t>(); return Status::ok();
    case DType::kInt32: fn.template operator()<int32_t>(); return Status::ok();
    case DType::kInt64: fn.template operator()<int64_t>(); return Status::ok();
    case DType::kUInt8: fn.template operator()<uint8_t>(); return Status::ok();
    case DType::kUInt16: fn.template operator()<uint16_t>(); return Status::ok();
    case DType::kUInt32: fn.template operator()<uint32_t>(); return Status::ok();
    case DType::kUInt64: fn.template operator()<uint64_t>(); return Status::ok();
    default: return unsupported("element type " + std::string(dtype_name(t)) + " is not supported here (integer types only)");
  }
}

// Floats and integers (not bool, string, float8, 4-bit or complex).
template <typename F>
Status visit_numeric(DType t, F&& fn) {
  if (dtype_is_float(t)) return visit_float(t, fn);
  return visit_integer(t, fn);
}

// Numeric plus bool.
template <typename F>
Status visit_numeric_or_bool(DType t, F&& fn) {
  if (t == DType::kBool) {
    fn.template operator()<bool>();
    return Status::ok();
  }
  return visit_numeric(t, fn);
}

// Dispatches on element *size* only: for ops that move data without looking at it
// (Transpose, Gather, Slice, Concat...). Strings need their own path.
template <typename F>
Status visit_by_size(DType t, F&& fn) {
  switch (dtype_size(t)) {
    case 1: fn.template operator()<uint8_t>(); return Status::ok();
    case 2: fn.template operator()<uint16_t>(); return Status::ok();
    case 4: fn.template operator()<uint32_t>(); return Status::ok();
    case 8: fn.template operator()<uint64_t>(); return Status::ok();
    case 16: fn.template operator()<__int128>(); return Status::ok();
    default: return unsupported("element type " + std::string(dtype_name(t)) + " cannot be copied by size");
  }
}

// Maps a flat index of `out_shape` to the flat index of an input of `in_shape`
// broadcast to it (in_shape right-aligned, size-1 dims repeat).
class BroadcastIndexer {
 public:
  BroadcastIndexer(const Shape& in_shape, const Shape& out_shape);
  int64_t operator()(int64_t out_index) const;

 private:
  std::vector<int64_t> out_dims_;
  std::vector<int64_t> in_strides_;  // 0 where broadcast
  bool identity_ = false;
};

// Every element of a numeric tensor as double, for kernels that compute in double.
std::vector<double> to_doubles(const Tensor& t);

// Writes v (v.size() == t.numel()) into a float tensor, rounding each value to t's type.
Status store_doubles(const std::vector<double>& v, Tensor& t);

// Copies element `src_index` of src into `dst_index` of dst, any dtype incl. strings.
void copy_element(const Tensor& src, int64_t src_index, Tensor& dst, int64_t dst_index);

}  // namespace peregrine
