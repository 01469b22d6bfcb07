// Block transpose of 4-byte elements, AVX2: 8 x 8 blocks through register transposes (8 row
// loads, 8 column stores); the edges the blocks leave go element by element.
// Contract: ukernels/f32_vector_ukernels.h.
#include <immintrin.h>

#include "backends/cpu/ukernels/f32_vector_ukernels.h"

namespace peregrine::cpu::avx2 {

namespace {

void block8x8(const uint32_t* src, size_t ss, uint32_t* dst, size_t ds) {
  auto row = [&](size_t k) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(src + k * ss));
  };
  const __m256 r0 = row(0), r1 = row(1), r2 = row(2), r3 = row(3), r4 = row(4), r5 = row(5),
               r6 = row(6), r7 = row(7);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
               t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
               t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
               t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
               u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
               u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
               u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  auto out = [&](size_t k) { return reinterpret_cast<float*>(dst + k * ds); };
  _mm256_storeu_ps(out(0), _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(out(1), _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(out(2), _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(out(3), _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(out(4), _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(out(5), _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(out(6), _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(out(7), _mm256_permute2f128_ps(u3, u7, 0x31));
}

}  // namespace

void x32_transpose__avx2(const uint32_t* src, size_t src_stride, uint32_t* dst, size_t dst_stride,
                         size_t rows, size_t cols) {
  const size_t rows8 = rows / 8 * 8, cols8 = cols / 8 * 8;
  for (size_t i = 0; i < rows8; i += 8)
    for (size_t j = 0; j < cols8; j += 8)
      block8x8(src + i * src_stride + j, src_stride, dst + j * dst_stride + i, dst_stride);
  for (size_t j = 0; j < cols; ++j)  // the columns past cols8 (all rows), the rows past rows8
    for (size_t i = j < cols8 ? rows8 : 0; i < rows; ++i)
      dst[j * dst_stride + i] = src[i * src_stride + j];
}

}  // namespace peregrine::cpu::avx2
