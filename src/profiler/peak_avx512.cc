// AVX-512 ceiling kernels. Compiled with -mavx512f (CMakeLists.txt); called only where
// cpu::isa_supported(Isa::kAvx512). Keep shared-header code out (see machine_kernels.h).
#include "profiler/machine_kernels.h"

#if defined(PEREGRINE_X86_KERNELS)
#include <immintrin.h>

// GCC 12's 512->256 extract intrinsics read an intentionally undefined register and warn.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace peregrine::avx512 {

float fma_loop(int64_t iterations) {
  // 16 independent chains: FMA latency (4 cycles) x 2 FMA ports = 8 needed, 16 is safe
  // (and there are 32 zmm registers).
  // Loaded through volatile so the compiler cannot reason about the chains' values (it
  // would otherwise drop a chain that starts at the fixed point 1).
  volatile float opaque_m = 0.9999f, opaque_c = 0.0001f;
  const __m512 m = _mm512_set1_ps(opaque_m), c = _mm512_set1_ps(opaque_c);
  __m512 a0 = _mm512_set1_ps(0.00f), a1 = _mm512_set1_ps(0.05f), a2 = _mm512_set1_ps(0.10f);
  __m512 a3 = _mm512_set1_ps(0.15f), a4 = _mm512_set1_ps(0.20f), a5 = _mm512_set1_ps(0.25f);
  __m512 a6 = _mm512_set1_ps(0.30f), a7 = _mm512_set1_ps(0.35f), a8 = _mm512_set1_ps(0.40f);
  __m512 a9 = _mm512_set1_ps(0.45f), a10 = _mm512_set1_ps(0.50f), a11 = _mm512_set1_ps(0.55f);
  __m512 a12 = _mm512_set1_ps(0.60f), a13 = _mm512_set1_ps(0.65f), a14 = _mm512_set1_ps(0.70f);
  __m512 a15 = _mm512_set1_ps(0.75f);
  for (int64_t i = 0; i < iterations; ++i) {
    a0 = _mm512_fmadd_ps(a0, m, c); a1 = _mm512_fmadd_ps(a1, m, c);
    a2 = _mm512_fmadd_ps(a2, m, c); a3 = _mm512_fmadd_ps(a3, m, c);
    a4 = _mm512_fmadd_ps(a4, m, c); a5 = _mm512_fmadd_ps(a5, m, c);
    a6 = _mm512_fmadd_ps(a6, m, c); a7 = _mm512_fmadd_ps(a7, m, c);
    a8 = _mm512_fmadd_ps(a8, m, c); a9 = _mm512_fmadd_ps(a9, m, c);
    a10 = _mm512_fmadd_ps(a10, m, c); a11 = _mm512_fmadd_ps(a11, m, c);
    a12 = _mm512_fmadd_ps(a12, m, c); a13 = _mm512_fmadd_ps(a13, m, c);
    a14 = _mm512_fmadd_ps(a14, m, c); a15 = _mm512_fmadd_ps(a15, m, c);
  }
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                           _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
  __m512 t = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)),
                           _mm512_add_ps(_mm512_add_ps(a12, a13), _mm512_add_ps(a14, a15)));
  // Reduce by halves, with AVX512F-only extracts.
  __m512 u = _mm512_add_ps(s, t);
  __m256 h8 = _mm256_add_ps(_mm512_castps512_ps256(u),
                            _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(u), 1)));
  __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
  h4 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
  h4 = _mm_add_ss(h4, _mm_movehdup_ps(h4));
  return _mm_cvtss_f32(h4);
}

uint64_t read(const void* data, size_t bytes) {
  const __m512i* p = static_cast<const __m512i*>(data);
  size_t n = bytes / sizeof(__m512i);
  __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i + 4 <= n; i += 4) {
    s0 = _mm512_add_epi64(s0, _mm512_load_si512(p + i));
    s1 = _mm512_add_epi64(s1, _mm512_load_si512(p + i + 1));
    s2 = _mm512_add_epi64(s2, _mm512_load_si512(p + i + 2));
    s3 = _mm512_add_epi64(s3, _mm512_load_si512(p + i + 3));
  }
  __m512i s = _mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3));
  __m256i h4 = _mm256_add_epi64(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
  __m128i h2 = _mm_add_epi64(_mm256_castsi256_si128(h4), _mm256_extracti128_si256(h4, 1));
  return static_cast<uint64_t>(_mm_cvtsi128_si64(h2)) +
         static_cast<uint64_t>(_mm_extract_epi64(h2, 1));
}

void copy(float* dst, const float* src, size_t count) {
  for (size_t i = 0; i + 32 <= count; i += 32) {
    _mm512_store_ps(dst + i, _mm512_load_ps(src + i));
    _mm512_store_ps(dst + i + 16, _mm512_load_ps(src + i + 16));
  }
}

void triad(float* a, const float* b, const float* c, float scale, size_t count) {
  const __m512 s = _mm512_set1_ps(scale);
  for (size_t i = 0; i + 32 <= count; i += 32) {
    _mm512_store_ps(a + i, _mm512_fmadd_ps(s, _mm512_load_ps(c + i), _mm512_load_ps(b + i)));
    _mm512_store_ps(a + i + 16,
                    _mm512_fmadd_ps(s, _mm512_load_ps(c + i + 16), _mm512_load_ps(b + i + 16)));
  }
}

}  // namespace peregrine::avx512

#endif  // PEREGRINE_X86_KERNELS
