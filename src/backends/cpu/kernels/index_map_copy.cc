#include "backends/cpu/kernels/index_map_copy.h"

#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels/copy_ops.h"
#include "backends/cpu/thread_pool.h"

namespace peregrine::cpu {

namespace {

// `count` copies of the `size`-byte element at `value`.
void fill_elements(uint8_t* dst, int64_t count, const uint8_t* value, size_t size) {
  if (count <= 0) return;
  bool zero = true;
  for (size_t i = 0; i < size; ++i) zero &= value[i] == 0;
  if (zero) {
    std::memset(dst, 0, static_cast<size_t>(count) * size);
    return;
  }
  auto typed = [&]<typename T>() {
    T v;
    std::memcpy(&v, value, sizeof(T));
    T* d = reinterpret_cast<T*>(dst);
    for (int64_t i = 0; i < count; ++i) std::memcpy(d + i, &v, sizeof(T));
  };
  switch (size) {
    case 1: return typed.operator()<uint8_t>();
    case 2: return typed.operator()<uint16_t>();
    case 4: return typed.operator()<uint32_t>();
    case 8: return typed.operator()<uint64_t>();
    default:
      for (int64_t i = 0; i < count; ++i) std::memcpy(dst + static_cast<size_t>(i) * size, value, size);
  }
}

}  // namespace

void IndexMapCopy::plan(const Shape& in, const Shape& out, std::vector<std::vector<int64_t>> maps,
                        size_t elem_size) {
  elem_size_ = elem_size;
  size_t rank = out.size();
  // Fold trailing identity dims into the block.
  int64_t block = 1;
  while (rank > 0) {
    const size_t d = rank - 1;
    if (in[d] != out[d]) break;
    bool identity = true;
    for (int64_t c = 0; c < out[d] && identity; ++c) identity = maps[d][static_cast<size_t>(c)] == c;
    if (!identity) break;
    block *= out[d];
    --rank;
  }
  block_bytes_ = static_cast<size_t>(block) * elem_size;
  // Input strides in blocks for the remaining dims.
  std::vector<int64_t> stride(rank, 1);
  for (size_t d = rank; d-- > 1;) stride[d - 1] = stride[d] * in[d];
  runs_.clear();
  outer_dims_.clear();
  outer_offsets_.clear();
  if (rank == 0) {  // everything is one block
    runs_.push_back({0, 0, 1, false});
    row_blocks_ = 1;
    rows_ = 1;
    return;
  }
  const size_t inner = rank - 1;
  const std::vector<int64_t>& m = maps[inner];
  for (int64_t c = 0; c < out[inner]; ++c) {
    const int64_t s = m[static_cast<size_t>(c)];
    const int64_t src = s == kFill ? kFill : s * stride[inner];
    if (!runs_.empty()) {
      Run& r = runs_.back();
      if ((src == kFill && r.src < 0) ||
          (src >= 0 && r.src >= 0 && !r.repeat && src == r.src + r.len)) {
        ++r.len;
        continue;
      }
      if (src >= 0 && src == r.src && (r.repeat || r.len == 1)) {
        r.repeat = true;
        ++r.len;
        continue;
      }
    }
    runs_.push_back({c, src, 1, false});
  }
  row_blocks_ = out[inner];
  rows_ = 1;
  for (size_t d = 0; d < inner; ++d) {
    outer_dims_.push_back(out[d]);
    rows_ *= out[d];
    std::vector<int64_t> offs(static_cast<size_t>(out[d]));
    for (int64_t c = 0; c < out[d]; ++c) {
      const int64_t s = maps[d][static_cast<size_t>(c)];
      offs[static_cast<size_t>(c)] = s == kFill ? kFill : s * stride[d];
    }
    outer_offsets_.push_back(std::move(offs));
  }
}

void IndexMapCopy::run(const void* src, void* dst, const void* fill, int num_threads) const {
  if (rows_ == 0 || row_blocks_ == 0 || block_bytes_ == 0) return;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  const auto* f = static_cast<const uint8_t*>(fill);
  const int64_t elems_per_block = static_cast<int64_t>(block_bytes_ / elem_size_);
  const size_t row_bytes = static_cast<size_t>(row_blocks_) * block_bytes_;
  const int64_t rows_per_task =
      std::max<int64_t>(1, kCopyBytesPerTask / static_cast<int64_t>(std::max<size_t>(1, row_bytes)));
  const int64_t tasks = (rows_ + rows_per_task - 1) / rows_per_task;
  const size_t outer = outer_dims_.size();
  cpu_thread_pool().parallel_for(tasks, num_threads, [&](int64_t t, int) {
    const int64_t r0 = t * rows_per_task, r1 = std::min(rows_, r0 + rows_per_task);
    // Odometer at row r0.
    int64_t coord[16];
    std::vector<int64_t> coord_big;
    int64_t* c = outer <= 16 ? coord : (coord_big.resize(outer), coord_big.data());
    for (size_t k = outer, rem = static_cast<size_t>(r0); k-- > 0;) {
      c[k] = static_cast<int64_t>(rem % static_cast<size_t>(outer_dims_[k]));
      rem /= static_cast<size_t>(outer_dims_[k]);
    }
    for (int64_t r = r0; r < r1; ++r) {
      uint8_t* drow = d + static_cast<size_t>(r) * row_bytes;
      int64_t base = 0;
      bool filled = false;
      for (size_t k = 0; k < outer; ++k) {
        const int64_t o = outer_offsets_[k][static_cast<size_t>(c[k])];
        if (o == kFill) filled = true;
        base += o;
      }
      if (filled) {
        fill_elements(drow, row_blocks_ * elems_per_block, f, elem_size_);
      } else {
        for (const Run& run : runs_) {
          uint8_t* dp = drow + static_cast<size_t>(run.dst) * block_bytes_;
          const uint8_t* sp =
              run.src < 0 ? nullptr : s + static_cast<size_t>(base + run.src) * block_bytes_;
          if (run.src < 0) {
            fill_elements(dp, run.len * elems_per_block, f, elem_size_);
          } else if (run.repeat && elems_per_block == 1) {
            fill_elements(dp, run.len, sp, elem_size_);
          } else if (run.repeat) {
            for (int64_t b = 0; b < run.len; ++b)
              std::memcpy(dp + static_cast<size_t>(b) * block_bytes_, sp, block_bytes_);
          } else {
            std::memcpy(dp, sp, static_cast<size_t>(run.len) * block_bytes_);
          }
        }
      }
      for (size_t k = outer; k-- > 0;) {
        if (++c[k] < outer_dims_[k]) break;
        c[k] = 0;
      }
    }
  });
}

}  // namespace peregrine::cpu
