#include "backends/reference/kernel_helpers.h"

#include <cstring>

#include "backends/reference/elementwise_util.h"

namespace peregrine {

BroadcastIndexer::BroadcastIndexer(const Shape& in_shape, const Shape& out_shape) {
  identity_ = in_shape == out_shape;
  if (identity_) return;  // same shape: no index math, and no allocation per kernel call
  out_dims_ = out_shape;
  in_strides_.assign(out_shape.size(), 0);
  int64_t stride = 1;
  size_t offset = out_shape.size() - in_shape.size();
  for (int64_t i = static_cast<int64_t>(in_shape.size()) - 1; i >= 0; --i) {
    if (in_shape[i] != 1) in_strides_[offset + i] = stride;
    stride *= in_shape[i];
  }
}

int64_t BroadcastIndexer::operator()(int64_t out_index) const {
  if (identity_) return out_index;
  int64_t in_index = 0;
  for (int64_t d = static_cast<int64_t>(out_dims_.size()) - 1; d >= 0; --d) {
    int64_t dim = out_dims_[d];
    int64_t coord = out_index % dim;
    out_index /= dim;
    in_index += coord * in_strides_[d];
  }
  return in_index;
}

void copy_element(const Tensor& src, int64_t src_index, Tensor& dst, int64_t dst_index) {
  if (src.dtype() == DType::kString) {
    dst.strings()[dst_index] = src.strings()[src_index];
    return;
  }
  size_t sz = dtype_size(src.dtype());
  std::memcpy(static_cast<uint8_t*>(dst.raw()) + dst_index * sz,
              static_cast<const uint8_t*>(src.raw()) + src_index * sz, sz);
}

std::vector<double> to_doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_as_double(i);
  return v;
}

Status store_doubles(const std::vector<double>& v, Tensor& t) {
  return visit_float(t.dtype(), [&]<typename T>() {
    T* d = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) d[i] = from_double<T>(v[i]);
  });
}

}  // namespace peregrine
