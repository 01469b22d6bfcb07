// Lane masks and a NaN-keeping clamp for AVX2 kernels. Inline, in namespace avx2, for files
// compiled with -mavx2 -mfma only.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace peregrine::cpu::avx2 {

// Lanes [0, n) set, n <= 8: the last n < 8 elements of a row for maskload / maskstore.
inline __m256i tail_mask(int64_t n) {
  alignas(32) static const int32_t kOnes[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(kOnes + 8 - n));
}

// min(max(v, lo), hi) that keeps NaN (maxps / minps return their second operand on NaN).
inline __m256 clamp(__m256 v, __m256 lo, __m256 hi) {
  return _mm256_min_ps(hi, _mm256_max_ps(lo, v));
}

}  // namespace peregrine::cpu::avx2
