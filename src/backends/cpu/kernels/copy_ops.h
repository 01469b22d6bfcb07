// The CPU backend's data-movement ops, any fixed-size dtype, byte copies only:
//   kernels/concat_split.cc    Concat, Split (any axis)
//   kernels/resize_nearest.cc  Resize mode=nearest on the two trailing axes of a 4-D tensor
//   kernels/transpose.cc       Transpose, every perm but the NCHW <-> NHWC pair of
//                              kernels/transpose_nchw_nhwc.cc
//   kernels/data_movement.cc   Slice, Pad, Tile, Expand, Gather (kernels/index_map_copy.h)
// The kernel table lets them take any dtype; a case a kernel does not handle at run time runs
// the reference kernel.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace peregrine::cpu {

bool claims_concat_split(const ir::Node& node);
Expected<std::unique_ptr<PreparedKernel>> prepare_concat_split(const ir::Node& node);
bool claims_resize_nearest(const ir::Node& node);
Expected<std::unique_ptr<PreparedKernel>> prepare_resize_nearest(const ir::Node& node);
bool claims_transpose(const ir::Node& node);
Expected<std::unique_ptr<PreparedKernel>> prepare_transpose(const ir::Node& node);

// Slice, Pad, Tile, Expand, Gather as coordinate maps (kernels/data_movement.cc).
bool claims_map_copy(const ir::Node& node);
Expected<std::unique_ptr<PreparedKernel>> prepare_map_copy(const ir::Node& node);
// Reshape, Flatten, Squeeze, Unsqueeze, Identity as views (kernels/data_movement.cc).
bool claims_view(const ir::Node& node);
Expected<std::unique_ptr<PreparedKernel>> prepare_view(const ir::Node& node);

// Bytes per thread-pool task for the copy kernels (kElementsPerTask float32 elements).
inline constexpr int64_t kCopyBytesPerTask = 16384 * 4;

// Whether a dtype is copied as plain bytes here: every fixed-size one (4-bit types are held one
// element per byte) but string.
inline bool is_copyable_dtype(DType t) { return t != DType::kUndefined && t != DType::kString; }

}  // namespace peregrine::cpu
