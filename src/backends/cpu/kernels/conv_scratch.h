// Scratch memory shared by the convolution kernels (NHWC im2col, depthwise rows, ConvTranspose
// columns): one per-thread buffer, since no two of them are live in one thread at once.
#pragma once

#include <cstddef>
#include <cstdint>

namespace peregrine::cpu {

// Bound on one im2col block, in floats (4 MiB): large images are unrolled in slices.
inline constexpr int64_t kIm2colFloats = int64_t{1} << 20;

// A per-thread, grow-only float buffer, 64-byte aligned: no allocation once a size has
// been seen. Valid until the next call on the same thread.
float* conv_scratch_floats(size_t count);

}  // namespace peregrine::cpu
