#include "peregrine/tensor.h"

#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/checked_math.h"
#include "core/memory_budget.h"
#include "core/narrow_float.h"
#include "core/status_error.h"

namespace peregrine {

std::string shape_to_string(const Shape& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += "x";
    s += shape[i] < 0 ? "?" : std::to_string(shape[i]);
  }
  return s;
}

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

Expected<Tensor> Tensor::make(DType dtype, const Shape& shape) {
  auto n = checked_product(shape);
  if (!n) return invalid_model("tensor shape " + shape_to_string(shape) + " is negative or overflows");
  auto bytes = checked_mul(*n, static_cast<int64_t>(std::max<size_t>(dtype_size(dtype), 1)));
  if (!bytes || *bytes > kMaxTensorBytes)
    return invalid_model("tensor of shape " + shape_to_string(shape) + " and type " +
                         std::string(dtype_name(dtype)) + " exceeds the " +
                         std::to_string(kMaxTensorBytes >> 30) + " GiB tensor limit");
  // Past physical memory an allocation can only end in the OOM killer: refuse it.
  static const int64_t physical = physical_memory_bytes();
  if (physical > 0 && *bytes > physical)
    return invalid_model("tensor of shape " + shape_to_string(shape) + " and type " +
                         std::string(dtype_name(dtype)) + " needs " + format_bytes(*bytes) +
                         ", more than this machine's " + format_bytes(physical) + " of memory");
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.numel_ = *n;
  if (dtype == DType::kString) {
    t.strings_ = std::make_shared<std::vector<std::string>>(static_cast<size_t>(*n));
  }
  // 64-byte aligned so vector kernels can use aligned loads; at least one byte so data() != null.
  size_t size = (static_cast<size_t>(*bytes) + 63) / 64 * 64;
  if (size == 0) size = 64;
  void* p = std::aligned_alloc(64, size);
  if (!p) return internal_error("out of memory allocating " + std::to_string(size) + " bytes");
  std::memset(p, 0, size);
  t.buffer_ = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
  return t;
}

Tensor Tensor::zeros(DType dtype, const Shape& shape) {
  auto t = make(dtype, shape);
  if (!t.is_ok()) throw StatusError(t.status());
  return std::move(t).value();
}

Tensor Tensor::view(DType dtype, const Shape& shape, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.numel_ = 1;
  for (int64_t d : shape) t.numel_ *= d;
  // The aliasing constructor with an empty owner: points at `data`, owns nothing.
  t.buffer_ = std::shared_ptr<uint8_t>(std::shared_ptr<uint8_t>(), static_cast<uint8_t*>(data));
  return t;
}

Tensor Tensor::reshaped(const Shape& shape) const {
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = zeros(dtype_, shape_);
  if (dtype_ == DType::kString) {
    t.strings() = strings();
  } else if (nbytes()) {
    std::memcpy(t.raw(), raw(), nbytes());
  }
  t.quant_ = quant_;
  return t;
}

double Tensor::get_as_double(int64_t i) const {
  switch (dtype_) {
    case DType::kFloat32: return data<float>()[i];
    case DType::kFloat64: return data<double>()[i];
    case DType::kFloat16: return data<Float16>()[i];
    case DType::kBFloat16: return data<BFloat16>()[i];
    case DType::kInt8:
    case DType::kInt4:
    case DType::kInt2:
      return data<int8_t>()[i];
    case DType::kInt16: return data<int16_t>()[i];
    case DType::kInt32: return data<int32_t>()[i];
    case DType::kInt64: return static_cast<double>(data<int64_t>()[i]);
    case DType::kUInt8:
    case DType::kUInt4:
    case DType::kUInt2:
      return data<uint8_t>()[i];
    case DType::kUInt16: return data<uint16_t>()[i];
    case DType::kUInt32: return data<uint32_t>()[i];
    case DType::kUInt64: return static_cast<double>(data<uint64_t>()[i]);
    case DType::kBool: return data<bool>()[i] ? 1.0 : 0.0;
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
      return float8_to_float(data<uint8_t>()[i], float8_format(dtype_));
    case DType::kFloat8E8M0:
      return float8e8m0_to_float(data<uint8_t>()[i]);
    case DType::kFloat4E2M1:
      return float4e2m1_to_float(data<uint8_t>()[i]);
    default: return 0.0;
  }
}

int64_t Tensor::get_as_int64(int64_t i) const {
  switch (dtype_) {
    case DType::kInt64: return data<int64_t>()[i];
    case DType::kInt32: return data<int32_t>()[i];
    case DType::kUInt64: return static_cast<int64_t>(data<uint64_t>()[i]);
    default: {
      // Truncated toward zero; NaN gives 0 and values past int64 saturate (a float read as an
      // index or count, e.g. a fuzzed Loop trip count, must not be undefined behaviour).
      const double v = get_as_double(i);
      if (std::isnan(v)) return 0;
      if (v >= 9223372036854775807.0) return INT64_MAX;
      if (v <= -9223372036854775808.0) return INT64_MIN;
      return static_cast<int64_t>(v);
    }
  }
}

std::vector<int64_t> Tensor::to_int64_vector() const {
  std::vector<int64_t> v(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) v[i] = get_as_int64(i);
  return v;
}

}  // namespace peregrine
