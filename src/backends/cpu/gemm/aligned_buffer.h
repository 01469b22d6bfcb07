// 64-byte aligned storage for GEMM operands: one-off blocks (packed weights, freed with
// std::free) and per-thread buffers that only grow, so a run allocates nothing once it has seen
// its sizes. Shared by the f32 and bf16 drivers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace peregrine::cpu {

// count elements of T (at least 64 bytes), 64-byte aligned; throws std::bad_alloc.
template <class T>
T* aligned_array(size_t count) {
  constexpr size_t kAlign = 64;
  const size_t bytes =
      std::max<size_t>(kAlign, (count * sizeof(T) + kAlign - 1) / kAlign * kAlign);
  void* p = std::aligned_alloc(kAlign, bytes);
  if (p == nullptr) throw std::bad_alloc();
  return static_cast<T*>(p);
}

template <class T>
class GrowBuffer {
 public:
  GrowBuffer() = default;
  GrowBuffer(const GrowBuffer&) = delete;
  GrowBuffer& operator=(const GrowBuffer&) = delete;
  ~GrowBuffer() { std::free(data_); }
  T* get(size_t count) {
    if (count > capacity_) {
      std::free(data_);
      data_ = aligned_array<T>(count);
      capacity_ = count;
    }
    return data_;
  }

 private:
  T* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace peregrine::cpu
