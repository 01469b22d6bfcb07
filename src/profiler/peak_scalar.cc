// Scalar FP32 peak: independent mul+add chains. Compiled with auto-vectorization off
// (CMakeLists.txt) so the compiler cannot pack the chains into SIMD registers.
// No FMA flags either: this is the roof of code built for the baseline ISA.
#include "profiler/machine_kernels.h"

namespace peregrine::scalar {

float fma_loop(int64_t iterations) {
  // Converges to 1 (a = a * m + c with c = 1 - m): no overflow, no denormals.
  // Loaded through volatile so the compiler cannot reason about the chains' values (it
  // would otherwise drop a chain that starts at the fixed point 1).
  volatile float opaque_m = 0.9999f, opaque_c = 0.0001f;
  const float m = opaque_m, c = opaque_c;
  float a0 = 0.f, a1 = 0.1f, a2 = 0.2f, a3 = 0.3f, a4 = 0.4f, a5 = 0.5f;
  float a6 = 0.6f, a7 = 0.7f, a8 = 0.8f, a9 = 0.9f, a10 = 1.05f, a11 = 1.1f;
  for (int64_t i = 0; i < iterations; ++i) {
    a0 = a0 * m + c; a1 = a1 * m + c; a2 = a2 * m + c; a3 = a3 * m + c;
    a4 = a4 * m + c; a5 = a5 * m + c; a6 = a6 * m + c; a7 = a7 * m + c;
    a8 = a8 * m + c; a9 = a9 * m + c; a10 = a10 * m + c; a11 = a11 * m + c;
  }
  return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
}

}  // namespace peregrine::scalar
