// A dense, C-ordered tensor on the host. Copies share the buffer (like a
// shared_ptr); clone() makes a deep copy. Strings live in their own vector.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "peregrine/dtype.h"
#include "peregrine/status.h"

namespace peregrine {

using Shape = std::vector<int64_t>;

std::string shape_to_string(const Shape& shape);  // "1x3x224x224", "scalar" for rank 0
// Row-major strides in elements.
std::vector<int64_t> contiguous_strides(const Shape& shape);

// Per-tensor or per-axis quantization parameters; data in the IR, not special cases.
struct QuantParams {
  std::vector<float> scales;
  std::vector<int64_t> zero_points;
  int64_t axis = -1;  // -1 per-tensor
};

class Tensor {
 public:
  Tensor() = default;

  // Allocates zero-filled storage; fails if the byte size overflows or exceeds the limit.
  static Expected<Tensor> make(DType dtype, const Shape& shape);
  // Like make() for callers that cannot return a Status (kernels' outputs): throws StatusError
  // (core/status_error.h) where make() fails, which the executor turns into the node's error.
  static Tensor zeros(DType dtype, const Shape& shape);
  // A rank-0 or rank-1 tensor from values.
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape);
  template <typename T>
  static Tensor scalar(T value) {
    return from_vector<T>({value}, {});
  }
  // A tensor over memory it does not own (a block of an executor's arena, a caller's buffer):
  // no allocation besides the shape, no zero-fill. The owner keeps `data` alive, large enough
  // and suitably aligned for as long as any copy of the view is in use. Not for strings.
  static Tensor view(DType dtype, const Shape& shape, void* data);

  bool defined() const { return dtype_ != DType::kUndefined; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[static_cast<size_t>(i)]; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }

  template <typename T>
  T* data() {
    return static_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(raw());
  }
  void* raw() { return buffer_ ? buffer_.get() : nullptr; }
  const void* raw() const { return buffer_ ? buffer_.get() : nullptr; }
  // True when this is the only reference to storage it owns: not a view, and no copy or
  // reshape of it is alive anywhere (an executor may then reuse the storage).
  bool sole_owner() const { return buffer_ && buffer_.use_count() == 1; }
  std::vector<std::string>& strings() { return *strings_; }
  const std::vector<std::string>& strings() const { return *strings_; }

  // Same buffer, new shape with the same element count.
  Tensor reshaped(const Shape& shape) const;
  Tensor clone() const;

  // Reads element i of any numeric dtype as double / int64 (for shape inputs, tests); as int64,
  // floats truncate, NaN gives 0 and values past int64 saturate.
  double get_as_double(int64_t i) const;
  int64_t get_as_int64(int64_t i) const;
  // All elements as int64 (for shape-like inputs such as Reshape's shape).
  std::vector<int64_t> to_int64_vector() const;

  QuantParams* quant() { return quant_.get(); }
  const QuantParams* quant() const { return quant_.get(); }
  void set_quant(QuantParams q) { quant_ = std::make_shared<QuantParams>(std::move(q)); }

 private:
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  int64_t numel_ = 0;
  std::shared_ptr<uint8_t> buffer_;
  std::shared_ptr<std::vector<std::string>> strings_;
  std::shared_ptr<QuantParams> quant_;
};

// Largest single tensor Peregrine allocates (bytes); guards against absurd dims.
inline constexpr int64_t kMaxTensorBytes = int64_t{16} << 30;

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, Shape shape) {
  if (shape.empty() && values.size() != 1) shape = {static_cast<int64_t>(values.size())};
  Tensor t = zeros(DTypeOf<T>::value, shape);
  if constexpr (std::is_same_v<T, std::string>) {
    t.strings() = values;
  } else {
    T* d = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) d[i] = values[i];
  }
  return t;
}

}  // namespace peregrine
