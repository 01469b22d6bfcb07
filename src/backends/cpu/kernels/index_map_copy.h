// The CPU backend's one N-d copy engine for data movement by coordinate maps: output element
// (c0, .., cr-1) reads input element (map0[c0], .., mapr-1[cr-1]), or the fill value where any
// map says kFill. Slice (start + c * step, negative steps too), Pad (constant / edge / reflect
// / wrap as maps, crops as offsets), Tile (c mod d), Expand (0 on broadcast dims) and Gather
// (the indices as the map of one axis) are all such maps, for every fixed-size dtype.
//
// plan() folds the trailing dims that are copied whole (map = identity, same size in and out)
// into one block of contiguous elements, then turns the innermost remaining map into runs:
// maximal stretches where consecutive outputs read consecutive inputs become one memcpy, those
// that read one input block again and again (broadcasts) one repeat, and fills one fill call. run() walks the other dims as an odometer over output rows, split into
// thread-pool tasks of about kCopyBytesPerTask bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "peregrine/tensor.h"

namespace peregrine::cpu {

class IndexMapCopy {
 public:
  static constexpr int64_t kFill = -1;

  // `maps[d]` has out[d] entries, each in [0, in[d]) or kFill. `elem_size` is the dtype's size.
  void plan(const Shape& in, const Shape& out, std::vector<std::vector<int64_t>> maps,
            size_t elem_size);
  // Copies from `src` (laid out as `in`) to `dst` (laid out as `out`); `fill` points to one
  // element (elem_size bytes) and may be null when no map has kFill.
  void run(const void* src, void* dst, const void* fill, int num_threads) const;

 private:
  struct Run {
    int64_t dst, src, len;  // in blocks; src < 0: a fill run
    bool repeat = false;    // every block of the run reads the same input block (Expand)
  };
  size_t block_bytes_ = 0;   // bytes of one block (the folded trailing dims times elem_size)
  size_t elem_size_ = 0;
  std::vector<int64_t> outer_dims_;                  // output dims above the innermost map
  std::vector<std::vector<int64_t>> outer_offsets_;  // per outer dim: block offset or kFill
  std::vector<Run> runs_;                            // the innermost map
  int64_t row_blocks_ = 0;                           // output blocks per row
  int64_t rows_ = 0;
};

}  // namespace peregrine::cpu
