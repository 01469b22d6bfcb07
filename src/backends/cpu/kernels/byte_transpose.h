// Transpose of a byte matrix: 16 x 16 blocks in SSE2 registers (four rounds of interleaves,
// each doubling the run of bytes that belong to one output row), the edges element by
// element. SSE2 is in every x86-64, so no dispatch. Used where a kernel produced the
// transpose of its 8-bit output (peregrine.QGemm's Y^T).
#pragma once

#include <emmintrin.h>

#include <cstdint>

namespace peregrine::cpu {

// dst[c * dst_stride + r] = src[r * src_stride + c] for r < rows, c < cols.
inline void transpose_bytes(const uint8_t* src, int64_t src_stride, uint8_t* dst,
                            int64_t dst_stride, int64_t rows, int64_t cols) {
  const int64_t rows16 = rows / 16 * 16, cols16 = cols / 16 * 16;
  for (int64_t r0 = 0; r0 < rows16; r0 += 16)
    for (int64_t c0 = 0; c0 < cols16; c0 += 16) {
      __m128i a[16], b[16];
      for (int i = 0; i < 16; ++i)
        a[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + (r0 + i) * src_stride + c0));
      // Round 1: rows 2i and 2i + 1 byte by byte (b[2i]: columns 0-7, b[2i + 1]: 8-15).
      for (int i = 0; i < 8; ++i) {
        b[2 * i] = _mm_unpacklo_epi8(a[2 * i], a[2 * i + 1]);
        b[2 * i + 1] = _mm_unpackhi_epi8(a[2 * i], a[2 * i + 1]);
      }
      // Round 2: four rows per 32-bit unit; a[4j + q] holds columns 4q..4q + 3 of rows
      // 4j..4j + 3.
      for (int j = 0; j < 4; ++j)
        for (int h = 0; h < 2; ++h) {
          const __m128i x = b[4 * j + h], y = b[4 * j + 2 + h];
          a[4 * j + 2 * h] = _mm_unpacklo_epi16(x, y);
          a[4 * j + 2 * h + 1] = _mm_unpackhi_epi16(x, y);
        }
      // Round 3: eight rows per 64-bit unit; b[8k + 2q + e] holds columns 4q + 2e, 4q + 2e + 1
      // of rows 8k..8k + 7.
      for (int k = 0; k < 2; ++k)
        for (int q = 0; q < 4; ++q) {
          const __m128i x = a[8 * k + q], y = a[8 * k + 4 + q];
          b[8 * k + 2 * q] = _mm_unpacklo_epi32(x, y);
          b[8 * k + 2 * q + 1] = _mm_unpackhi_epi32(x, y);
        }
      // Round 4: all sixteen rows of one column per register: column 2p from the low halves.
      for (int p = 0; p < 8; ++p) {
        const __m128i x = b[p], y = b[8 + p];
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (c0 + 2 * p) * dst_stride + r0),
                         _mm_unpacklo_epi64(x, y));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (c0 + 2 * p + 1) * dst_stride + r0),
                         _mm_unpackhi_epi64(x, y));
      }
    }
  for (int64_t r = 0; r < rows; ++r)  // the edges
    for (int64_t c = r < rows16 ? cols16 : 0; c < cols; ++c)
      dst[c * dst_stride + r] = src[r * src_stride + c];
}

}  // namespace peregrine::cpu
