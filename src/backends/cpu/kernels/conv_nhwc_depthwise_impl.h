// The inner loop of the NHWC depthwise conv, written once and compiled per ISA: each
// including file (kernels/conv_nhwc_depthwise-<isa>.cc, built with that ISA's flags, and
// conv_nhwc.cc for the baseline) gets its own internal-linkage copy, so a wider-ISA
// instantiation can never be merged into generic code.
#pragma once

#include <cstdint>

namespace peregrine::cpu {
namespace {

// For `count` output pixels p: out(p, C) += w(C) * in(p, C), out pixels `channels` apart and
// input pixels `in_stride` apart (stride_w * C). The channel loop is plain and restrict-
// qualified so the compiler vectorizes it at the file's ISA width (baseline: 4 floats, avx2:
// 8 with FMA); C need not be a multiple of the width (the compiler's tail loop).
inline void depthwise_nhwc_accumulate(float* out, const float* in, const float* w, int64_t channels,
                                      int64_t count, int64_t in_stride) {
  for (int64_t p = 0; p < count; ++p) {
    float* __restrict o = out + p * channels;
    const float* __restrict x = in + p * in_stride;
    const float* __restrict wv = w;
    for (int64_t c = 0; c < channels; ++c) o[c] += wv[c] * x[c];
  }
}

}  // namespace
}  // namespace peregrine::cpu
