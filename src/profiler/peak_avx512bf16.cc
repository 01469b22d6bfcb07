// The bf16 dot-product ceiling (vdpbf16ps), the roof of nodes that run at --precision bf16.
// Compiled with -mavx512f -mavx512bf16 (CMakeLists.txt); called only where the CPU has
// AVX512_BF16. Keep shared-header code out (see machine_kernels.h).
#include "profiler/machine_kernels.h"

#if defined(PEREGRINE_X86_KERNELS)
#include <immintrin.h>

// GCC 12's 512->256 extract intrinsics read an intentionally undefined register and warn.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace peregrine::avx512bf16 {

float dot_loop(int64_t iterations) {
  // 16 independent accumulator chains, like avx512::fma_loop; operands loaded through
  // volatile so the compiler cannot fold the chains.
  volatile float opaque = 0.001f;
  const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(opaque), _mm512_set1_ps(opaque));
  __m512 a[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_ps(0.01f * static_cast<float>(i));
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) a[i] = _mm512_dpbf16_ps(a[i], x, x);
  }
  __m512 s = a[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, a[i]);
  __m256 h8 = _mm256_add_ps(_mm512_castps512_ps256(s),
                            _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
  __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
  h4 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
  h4 = _mm_add_ss(h4, _mm_movehdup_ps(h4));
  return _mm_cvtss_f32(h4);
}

}  // namespace peregrine::avx512bf16

#endif  // PEREGRINE_X86_KERNELS
