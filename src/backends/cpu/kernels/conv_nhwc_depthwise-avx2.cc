// The NHWC depthwise inner loop compiled with avx2 + fma flags (see conv_nhwc_depthwise_impl.h).
#include "backends/cpu/kernels/conv_nhwc_depthwise_impl.h"

namespace peregrine::cpu::avx2 {

void f32_dwconv_nhwc_accumulate__avx2(float* out, const float* in, const float* w, int64_t channels,
                                      int64_t count, int64_t in_stride) {
  depthwise_nhwc_accumulate(out, in, w, channels, count, in_stride);
}

}  // namespace peregrine::cpu::avx2
