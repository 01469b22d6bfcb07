// 8-bit MaxPool output row, AVX-512 (BW): q8_ukernels.h. The window's rows are reduced into a
// row padded with the type's minimum on both sides (so every tap is a plain load), then the
// taps along the row: shifted loads at stride 1; at stride 2 the padded row is split into its
// even and odd bytes first, so tap j reads one of them shifted; other strides per column.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

// GCC 12's AVX-512 intrinsics pass an _mm256_undefined_*() pass-through operand that
// -W(maybe-)uninitialized reports once inlined; it is never read (the mask is all ones).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backends/cpu/ukernels/q8_ukernels.h"

namespace peregrine::cpu::avx512 {

namespace {

inline __mmask64 tail_mask(size_t n) { return n >= 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1; }

template <bool kSigned>
inline __m512i vmax(__m512i a, __m512i b) {
  return kSigned ? _mm512_max_epi8(a, b) : _mm512_max_epu8(a, b);
}

template <bool kSigned>
void max_pool_row(const uint8_t* const* rows, size_t nrows, const Q8MaxPoolRow& g, uint8_t* scratch,
                  uint8_t* out) {
  const uint8_t lowest = kSigned ? 0x80 : 0x00;
  const size_t used = q8_max_pool_padded_bytes(g);
  // At stride 2 each half holds `half` bytes, read by 64-byte loads up to `half` + 64, filled
  // from 64-byte loads of the padded row up to 2 * half + 64.
  const size_t half = (used / 2 + 1 + 31) / 32 * 32;
  const size_t length = g.sw == 2 ? std::max(used, 2 * half + 64) : used;
  uint8_t* padded = scratch;
  std::memset(padded, lowest, g.pl);
  for (size_t x = 0; x < g.w; x += 64) {
    const __mmask64 m = tail_mask(g.w - x);
    __m512i v = _mm512_maskz_loadu_epi8(m, rows[0] + x);
    for (size_t r = 1; r < nrows; ++r)
      v = vmax<kSigned>(v, _mm512_maskz_loadu_epi8(m, rows[r] + x));
    _mm512_mask_storeu_epi8(padded + g.pl + x, m, v);
  }
  std::memset(padded + g.pl + g.w, lowest, length - g.pl - g.w);
  if (g.sw == 1) {
    for (size_t ox = 0; ox < g.ow; ox += 64) {
      __m512i v = _mm512_loadu_si512(padded + ox);
      for (size_t j = 1; j < g.kw; ++j)
        v = vmax<kSigned>(v, _mm512_loadu_si512(padded + ox + j * g.dw));
      _mm512_mask_storeu_epi8(out + ox, tail_mask(g.ow - ox), v);
    }
    return;
  }
  if (g.sw == 2) {
    // even[i] = padded[2i], odd[i] = padded[2i + 1]: the low and high bytes of 16-bit lanes.
    uint8_t* even = padded + (length + 63) / 64 * 64;
    uint8_t* odd = even + half + 64;
    for (size_t i = 0; i < half; i += 32) {
      const __m512i v = _mm512_loadu_si512(padded + 2 * i);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(even + i), _mm512_cvtepi16_epi8(v));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(odd + i),
                          _mm512_cvtepi16_epi8(_mm512_srli_epi16(v, 8)));
    }
    for (size_t ox = 0; ox < g.ow; ox += 64) {
      __m512i v = _mm512_loadu_si512(even + ox);  // tap 0
      for (size_t j = 1; j < g.kw; ++j) {
        const size_t off = j * g.dw;
        v = vmax<kSigned>(v, _mm512_loadu_si512((off % 2 ? odd : even) + ox + off / 2));
      }
      _mm512_mask_storeu_epi8(out + ox, tail_mask(g.ow - ox), v);
    }
    return;
  }
  for (size_t ox = 0; ox < g.ow; ++ox) {
    uint8_t v = padded[ox * g.sw];
    for (size_t j = 1; j < g.kw; ++j) {
      const uint8_t t = padded[ox * g.sw + j * g.dw];
      if (kSigned ? static_cast<int8_t>(t) > static_cast<int8_t>(v) : t > v) v = t;
    }
    out[ox] = v;
  }
}

}  // namespace

void q8_max_pool_row__avx512(const uint8_t* const* rows, size_t nrows, const Q8MaxPoolRow& g,
                             uint8_t* scratch, uint8_t* out) {
  if (g.is_signed)
    max_pool_row<true>(rows, nrows, g, scratch, out);
  else
    max_pool_row<false>(rows, nrows, g, scratch, out);
}

}  // namespace peregrine::cpu::avx512
