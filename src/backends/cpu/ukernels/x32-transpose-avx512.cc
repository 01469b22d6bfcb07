// Block transpose of 4-byte elements, AVX-512: 16 x 16 blocks through register transposes
// (16 row loads, 16 column stores); blocks cut by the edges load and store masked.
// Contract: ukernels/f32_vector_ukernels.h.
#include <immintrin.h>

#include "backends/cpu/ukernels/avx512_lane_mask.h"
#include "backends/cpu/ukernels/f32_transpose_avx512.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"

// GCC 12's 512-bit unpack / shuffle intrinsics pass an _mm512_undefined_ps() pass-through
// operand that -W(maybe-)uninitialized reports once inlined; it is never read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace peregrine::cpu::avx512 {

namespace {

// One block of rows x cols (each <= 16) at src / dst.
template <bool kWhole>
inline void block(const uint32_t* src, size_t ss, uint32_t* dst, size_t ds, size_t rows,
                  size_t cols) {
  __m512 r[16];
  const __mmask16 load_mask = first_lanes(cols);
  for (size_t k = 0; k < 16; ++k) {
    const float* row = reinterpret_cast<const float*>(src + k * ss);
    if (kWhole)
      r[k] = _mm512_loadu_ps(row);
    else
      r[k] = k < rows ? _mm512_maskz_loadu_ps(load_mask, row) : _mm512_setzero_ps();
  }
  transpose16x16(r);  // r[j]: column j of the block
  const __mmask16 store_mask = first_lanes(rows);
  for (size_t j = 0; j < (kWhole ? 16 : cols); ++j) {
    float* out = reinterpret_cast<float*>(dst + j * ds);
    if (kWhole)
      _mm512_storeu_ps(out, r[j]);
    else
      _mm512_mask_storeu_ps(out, store_mask, r[j]);
  }
}

}  // namespace

void x32_transpose__avx512(const uint32_t* src, size_t src_stride, uint32_t* dst, size_t dst_stride,
                           size_t rows, size_t cols) {
  for (size_t i = 0; i < rows; i += 16) {
    const size_t nr = rows - i < 16 ? rows - i : 16;
    for (size_t j = 0; j < cols; j += 16) {
      const size_t nc = cols - j < 16 ? cols - j : 16;
      const uint32_t* s = src + i * src_stride + j;
      uint32_t* d = dst + j * dst_stride + i;
      if (nr == 16 && nc == 16)
        block<true>(s, src_stride, d, dst_stride, 16, 16);
      else
        block<false>(s, src_stride, d, dst_stride, nr, nc);
    }
  }
}

}  // namespace peregrine::cpu::avx512
