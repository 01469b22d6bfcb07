// The int8 dot-product ceiling (vpdpbusd: uint8 x int8, four products per int32 lane), the roof
// of nodes on the integer kernels. Compiled with -mavx512f -mavx512vnni (CMakeLists.txt);
// called only where the CPU has AVX512_VNNI. Keep shared-header code out (see
// machine_kernels.h).
#include "profiler/machine_kernels.h"

#if defined(PEREGRINE_X86_KERNELS)
#include <immintrin.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace peregrine::avx512vnni {

float dot_loop(int64_t iterations) {
  // 16 independent accumulator chains, like avx512::fma_loop; the operand comes through a
  // volatile so the compiler cannot fold the chains.
  volatile int opaque = 0x01010101;
  const __m512i x = _mm512_set1_epi32(opaque);
  __m512i a[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_epi32(i);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) a[i] = _mm512_dpbusd_epi32(a[i], x, x);
  }
  __m512i s = a[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_epi32(s, a[i]);
  return static_cast<float>(_mm512_reduce_add_epi32(s));
}

}  // namespace peregrine::avx512vnni

#endif  // PEREGRINE_X86_KERNELS
