// AVX2 + FMA ceiling kernels. Compiled with -mavx2 -mfma (CMakeLists.txt); called only
// where cpu::isa_supported(Isa::kAvx2). Keep shared-header code out (see machine_kernels.h).
#include "profiler/machine_kernels.h"

#if defined(PEREGRINE_X86_KERNELS)
#include <immintrin.h>

namespace peregrine::avx2 {

float fma_loop(int64_t iterations) {
  // 12 independent chains cover FMA latency (4-5 cycles) x 2 FMA ports with room to spare.
  // Loaded through volatile so the compiler cannot reason about the chains' values (it
  // would otherwise drop a chain that starts at the fixed point 1).
  volatile float opaque_m = 0.9999f, opaque_c = 0.0001f;
  const __m256 m = _mm256_set1_ps(opaque_m), c = _mm256_set1_ps(opaque_c);
  __m256 a0 = _mm256_set1_ps(0.0f), a1 = _mm256_set1_ps(0.1f), a2 = _mm256_set1_ps(0.2f);
  __m256 a3 = _mm256_set1_ps(0.3f), a4 = _mm256_set1_ps(0.4f), a5 = _mm256_set1_ps(0.5f);
  __m256 a6 = _mm256_set1_ps(0.6f), a7 = _mm256_set1_ps(0.7f), a8 = _mm256_set1_ps(0.8f);
  __m256 a9 = _mm256_set1_ps(0.9f), a10 = _mm256_set1_ps(1.05f), a11 = _mm256_set1_ps(1.1f);
  for (int64_t i = 0; i < iterations; ++i) {
    a0 = _mm256_fmadd_ps(a0, m, c); a1 = _mm256_fmadd_ps(a1, m, c);
    a2 = _mm256_fmadd_ps(a2, m, c); a3 = _mm256_fmadd_ps(a3, m, c);
    a4 = _mm256_fmadd_ps(a4, m, c); a5 = _mm256_fmadd_ps(a5, m, c);
    a6 = _mm256_fmadd_ps(a6, m, c); a7 = _mm256_fmadd_ps(a7, m, c);
    a8 = _mm256_fmadd_ps(a8, m, c); a9 = _mm256_fmadd_ps(a9, m, c);
    a10 = _mm256_fmadd_ps(a10, m, c); a11 = _mm256_fmadd_ps(a11, m, c);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

uint64_t read(const void* data, size_t bytes) {
  const __m256i* p = static_cast<const __m256i*>(data);
  size_t n = bytes / sizeof(__m256i);
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i + 4 <= n; i += 4) {
    s0 = _mm256_add_epi64(s0, _mm256_load_si256(p + i));
    s1 = _mm256_add_epi64(s1, _mm256_load_si256(p + i + 1));
    s2 = _mm256_add_epi64(s2, _mm256_load_si256(p + i + 2));
    s3 = _mm256_add_epi64(s3, _mm256_load_si256(p + i + 3));
  }
  __m256i s = _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3));
  __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  return static_cast<uint64_t>(_mm_cvtsi128_si64(h)) +
         static_cast<uint64_t>(_mm_extract_epi64(h, 1));
}

void copy(float* dst, const float* src, size_t count) {
  for (size_t i = 0; i + 16 <= count; i += 16) {
    _mm256_store_ps(dst + i, _mm256_load_ps(src + i));
    _mm256_store_ps(dst + i + 8, _mm256_load_ps(src + i + 8));
  }
}

void triad(float* a, const float* b, const float* c, float scale, size_t count) {
  const __m256 s = _mm256_set1_ps(scale);
  for (size_t i = 0; i + 16 <= count; i += 16) {
    _mm256_store_ps(a + i, _mm256_fmadd_ps(s, _mm256_load_ps(c + i), _mm256_load_ps(b + i)));
    _mm256_store_ps(a + i + 8,
                    _mm256_fmadd_ps(s, _mm256_load_ps(c + i + 8), _mm256_load_ps(b + i + 8)));
  }
}

}  // namespace peregrine::avx2

#endif  // PEREGRINE_X86_KERNELS
