// Bandwidth kernels at the build's baseline ISA; plain loops the compiler vectorizes
// with whatever the baseline allows (SSE2 on x86-64).
#include "profiler/machine_kernels.h"

namespace peregrine::baseline {

uint64_t read(const void* data, size_t bytes) {
  // Integer sums vectorize without reassociation concerns; four chains hide add latency.
  const uint64_t* p = static_cast<const uint64_t*>(data);
  size_t n = bytes / sizeof(uint64_t);
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i + 4 <= n; i += 4) {
    s0 += p[i];
    s1 += p[i + 1];
    s2 += p[i + 2];
    s3 += p[i + 3];
  }
  return s0 + s1 + s2 + s3;
}

void copy(float* dst, const float* src, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = src[i];
}

void triad(float* a, const float* b, const float* c, float scale, size_t count) {
  for (size_t i = 0; i < count; ++i) a[i] = b[i] + scale * c[i];
}

}  // namespace peregrine::baseline
