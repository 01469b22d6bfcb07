// Depthwise 2-D convolution of one uint8 channel with int8 taps, AVX-512: 16 outputs of a row
// in one int32 register across all taps, then requantized there. Stride 2 loads 32 int16 and
// keeps the even ones (the low halves of its 32-bit lanes). Contract: q8_ukernels.h.
#include <immintrin.h>

// GCC 12's AVX-512 intrinsics pass an _mm512_undefined_*() pass-through operand that
// -W(maybe-)uninitialized reports once inlined; it is never read (the mask is all ones).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backends/cpu/ukernels/avx512_lane_mask.h"
#include "backends/cpu/ukernels/q8_ukernels.h"

namespace peregrine::cpu::avx512 {

namespace {

// At most this many taps keep their broadcast weights in registers / on the stack.
constexpr size_t kMaxTaps = 49;

// Kw > 0: the kernel width as a constant (the tap loop unrolls); 0: g.kw.
template <int Stride, int Kw>
void rows(const int16_t* plane, const int8_t* w, const Qu8DwconvGeometry& geometry, int32_t bias,
          float scale, const Qu8Output& out, uint8_t* y) {
  const Qu8DwconvGeometry g = geometry;  // a local copy: stores to y cannot alias it
  const size_t kw = Kw > 0 ? static_cast<size_t>(Kw) : g.kw;
  __m512i taps[kMaxTaps];
  for (size_t t = 0; t < g.kh * kw; ++t) taps[t] = _mm512_set1_epi32(w[t]);
  const __m512i vbias = _mm512_set1_epi32(bias), zp = _mm512_set1_epi32(out.zero_point);
  const __m512i lo = _mm512_set1_epi32(out.lo), hi = _mm512_set1_epi32(out.hi);
  const __m512 vscale = _mm512_set1_ps(scale);
  for (size_t oy = 0; oy < g.oh; ++oy) {
    const int16_t* top = plane + oy * g.sh * g.pw;
    uint8_t* dst = y + oy * g.ow;
    for (size_t ox = 0; ox < g.ow; ox += 16) {
      const size_t n = g.ow - ox < 16 ? g.ow - ox : 16;
      const __mmask16 m16 = first_lanes(static_cast<int64_t>(n));
      // 2n - 1 values cover n outputs at stride 2; the even ones are kept.
      const __mmask32 m32 = static_cast<__mmask32>((uint64_t{1} << (2 * n - 1)) - 1u);
      __m512i acc = vbias;
      const int16_t* row = top + ox * Stride;
      for (size_t i = 0; i < g.kh; ++i, row += g.dh * g.pw) {
#pragma GCC unroll 7
        for (size_t j = 0; j < kw; ++j) {
          const int16_t* src = row + j * g.dw;
          __m512i x;
          if constexpr (Stride == 1) {
            x = _mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(m16, src));
          } else {
            x = _mm512_cvtepi16_epi32(_mm512_cvtepi32_epi16(_mm512_maskz_loadu_epi16(m32, src)));
          }
          acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(x, taps[i * kw + j]));
        }
      }
      const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), vscale);
      __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), zp);
      q = _mm512_min_epi32(_mm512_max_epi32(q, lo), hi);
      _mm_mask_storeu_epi8(dst + ox, m16, _mm512_cvtepi32_epi8(q));
    }
  }
}

template <int Stride>
void rows_any_width(const int16_t* plane, const int8_t* w, const Qu8DwconvGeometry& g,
                    int32_t bias, float scale, const Qu8Output& out, uint8_t* y) {
  if (g.kw == 3) return rows<Stride, 3>(plane, w, g, bias, scale, out, y);
  if (g.kw == 5) return rows<Stride, 5>(plane, w, g, bias, scale, out, y);
  if (g.kw == 7) return rows<Stride, 7>(plane, w, g, bias, scale, out, y);
  rows<Stride, 0>(plane, w, g, bias, scale, out, y);
}

}  // namespace

void qu8_dwconv2d__avx512(const int16_t* plane, const int8_t* w, const Qu8DwconvGeometry& g,
                          int32_t bias, float scale, const Qu8Output& out, uint8_t* y) {
  if (g.kh * g.kw <= kMaxTaps && g.sw == 1) return rows_any_width<1>(plane, w, g, bias, scale, out, y);
  if (g.kh * g.kw <= kMaxTaps && g.sw == 2) return rows_any_width<2>(plane, w, g, bias, scale, out, y);
  qu8_dwconv2d__scalar(plane, w, g, bias, scale, out, y);
}

void qu8_widen__avx512(const uint8_t* src, size_t n, int32_t zero, int16_t* dst) {
  const __m512i vzero = _mm512_set1_epi16(static_cast<int16_t>(zero));
  for (size_t i = 0; i < n; i += 32) {
    const __mmask32 m =
        n - i >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((uint64_t{1} << (n - i)) - 1u);
    const __m512i x = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m, src + i));
    _mm512_mask_storeu_epi16(dst + i, m, _mm512_sub_epi16(x, vzero));
  }
}

// 32 source bytes as 16-bit lanes, truncated to their low (even) bytes. The last pair is loaded
// under a mask, so nothing past src[2 * (n - 1)] is read.
void u8_gather_stride2__avx512(const uint8_t* src, size_t n, uint8_t* dst) {
  for (size_t i = 0; i < n; i += 32) {
    const size_t left = n - i < 32 ? n - i : 32;
    const __mmask64 in = (left == 32 ? ~__mmask64{0} >> 1 : (__mmask64{1} << (2 * left - 1)) - 1);
    const __mmask32 out = left == 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << left) - 1u);
    const __m512i pairs = _mm512_maskz_loadu_epi8(in, src + 2 * i);
    _mm256_mask_storeu_epi8(dst + i, out, _mm512_cvtepi16_epi8(pairs));
  }
}

}  // namespace peregrine::cpu::avx512
