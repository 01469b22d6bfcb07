// Depthwise 2-D convolution of one uint8 channel straight from the image, AVX512-VNNI + VBMI:
// vpdpbusd adds four uint8 x int8 products per 32-bit lane, so four taps of a kernel row cost
// one instruction per 16 outputs once each lane holds the four input bytes those taps read;
// vpermb gathers them from one 64-byte load of the input row (output t, tap b: byte
// sw * t + dw * b of the load). Columns and rows outside the image read the zero point (a
// masked load's fill), which the bias has already subtracted. Contract: q8_ukernels.h.
#include <immintrin.h>

// GCC 12's AVX-512 intrinsics pass an _mm512_undefined_*() pass-through operand that
// -W(maybe-)uninitialized reports once inlined; it is never read (the mask is all ones).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backends/cpu/ukernels/avx512_lane_mask.h"
#include "backends/cpu/ukernels/q8_ukernels.h"

namespace peregrine::cpu::avx512vnni_vbmi {

namespace {

constexpr size_t kMaxRows = 8;  // kernel rows kept as weight registers / on the stack

// acc += dot4(x bytes unsigned, w bytes signed) per lane (inline assembly: GCC 12 copies the
// accumulator around the intrinsic, see the GEMM micro-kernel).
inline void dpbusd(__m512i& acc, __m512i x, __m512i w) {
  asm("vpdpbusd %[w], %[x], %[acc]" : [acc] "+v"(acc) : [x] "v"(x), [w] "v"(w));
}

// Bits [lo, hi) of a 64-bit mask (0 <= lo <= hi <= 64).
inline __mmask64 bit_range(int64_t lo, int64_t hi) {
  if (lo >= hi) return 0;
  const uint64_t upto = hi >= 64 ? ~uint64_t{0} : (uint64_t{1} << hi) - 1;
  return static_cast<__mmask64>(upto & ~((uint64_t{1} << lo) - 1));
}

// What every output row of a channel shares, held in registers.
struct Channel {
  __m512i index[2];                 // vpermb indices per tap group
  __m512i w[kMaxRows * 2];          // weight quads per kernel row and group
  __m512i vzero, bias, zp, lo, hi;  // the input's zero point (bytes); the requantization
  __m512 scale;
};

inline __m128i requantize(const Channel& ch, __m512i acc) {
  const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), ch.scale);
  const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), ch.zp);
  return _mm512_cvtepi32_epi8(_mm512_min_epi32(_mm512_max_epi32(q, ch.lo), ch.hi));
}

// Output rows oy (and oy + 1 when Two) at columns [ox, ox + 16): `rows` the input rows the
// kernel reads, each shifted so column ox's load starts at rows[ir] + ox * sw; with Two, input
// row ir serves output row oy with kernel row ir and row oy + 1 with kernel row ir - 1.
// Whole: the loads lie inside the image (no mask).
template <int Kh, int Groups, bool Two, bool Whole>
inline void output_vector(const Channel& ch, const uint8_t* const* rows, size_t kh, size_t sw,
                          size_t ox, __mmask64 inside, uint8_t* dst, size_t ow, size_t n) {
  __m512i acc0 = ch.bias, acc1 = ch.bias;
  const size_t inputs = (Kh > 0 ? static_cast<size_t>(Kh) : kh) + (Two ? 1 : 0);
#pragma GCC unroll 9
  for (size_t ir = 0; ir < inputs; ++ir) {
    const uint8_t* src = rows[ir] + ox * sw;
    const __m512i row =
        Whole ? _mm512_loadu_si512(src) : _mm512_mask_loadu_epi8(ch.vzero, inside, src);
#pragma GCC unroll 2
    for (int q = 0; q < Groups; ++q) {
      const __m512i taps = _mm512_permutexvar_epi8(ch.index[q], row);
      if (ir < inputs - (Two ? 1 : 0)) dpbusd(acc0, taps, ch.w[ir * Groups + q]);
      if (Two && ir > 0) dpbusd(acc1, taps, ch.w[(ir - 1) * Groups + q]);
    }
  }
  const __mmask16 m = avx512::first_lanes(static_cast<int64_t>(n));
  _mm_mask_storeu_epi8(dst + ox, m, requantize(ch, acc0));
  if (Two) _mm_mask_storeu_epi8(dst + ow + ox, m, requantize(ch, acc1));
}

// Kh > 0: the kernel height as a constant (the row loop unrolls); 0: g.kh. Pairs: two output
// rows at a time where the stride and dilation down are 1 (they share all input rows but one).
template <int Kh, int Groups, bool Pairs>
void dwconv(const uint8_t* image, size_t h, size_t w, uint8_t zero, size_t pt, size_t pl,
            uint8_t* zero_row, const uint8_t* index_bytes, const int32_t* wquads,
            const Qu8DwconvGeometry& geometry, int32_t bias, float scale, const Qu8Output& out,
            uint8_t* y) {
  const Qu8DwconvGeometry g = geometry;  // a local copy: stores to y cannot alias it
  const size_t kh = Kh > 0 ? static_cast<size_t>(Kh) : g.kh;
  Channel ch;
  for (int q = 0; q < Groups; ++q) ch.index[q] = _mm512_loadu_si512(index_bytes + 64 * q);
  for (size_t i = 0; i < kh * Groups; ++i) ch.w[i] = _mm512_set1_epi32(wquads[i]);
  ch.vzero = _mm512_set1_epi8(static_cast<char>(zero));
  ch.bias = _mm512_set1_epi32(bias);
  ch.zp = _mm512_set1_epi32(out.zero_point);
  ch.lo = _mm512_set1_epi32(out.lo);
  ch.hi = _mm512_set1_epi32(out.hi);
  ch.scale = _mm512_set1_ps(scale);
  // Rows above and below the image read a row of zero points.
  for (size_t x = 0; x < w + 128; x += 64)
    _mm512_mask_storeu_epi8(zero_row + x, bit_range(0, static_cast<int64_t>(w + 128 - x)),
                            ch.vzero);
  const int64_t iw = static_cast<int64_t>(w);
  // Output columns whose 64-byte load lies inside the image: [x0, x1) (load at ox * sw - pl).
  const size_t x0 = (pl + g.sw - 1) / g.sw;
  const size_t x1 = w + pl >= 64 ? (w + pl - 64) / g.sw + 1 : 0;
  const uint8_t* rows[kMaxRows + 1];
  auto set_rows = [&](size_t oy, size_t count) {
    for (size_t ir = 0; ir < count; ++ir) {
      const int64_t iy = static_cast<int64_t>(oy * g.sh + ir * g.dh) - static_cast<int64_t>(pt);
      rows[ir] = (iy >= 0 && iy < static_cast<int64_t>(h) ? image + iy * iw : zero_row + 64) -
                 static_cast<int64_t>(pl);
    }
  };
  auto mask_at = [&](size_t ox) {
    const int64_t base = static_cast<int64_t>(ox * g.sw) - static_cast<int64_t>(pl);
    return bit_range(base < 0 ? -base : 0, iw - base < 64 ? iw - base : 64);
  };
  // Output row oy (and oy + 1 when Two): every vector of 16 columns.
  auto output_row = [&]<bool Two>(size_t oy) {
    set_rows(oy, kh + (Two ? 1 : 0));
    uint8_t* dst = y + oy * g.ow;
    for (size_t ox = 0; ox < g.ow; ox += 16) {
      const size_t n = g.ow - ox < 16 ? g.ow - ox : 16;
      if (ox >= x0 && ox < x1)
        output_vector<Kh, Groups, Two, true>(ch, rows, kh, g.sw, ox, 0, dst, g.ow, n);
      else
        output_vector<Kh, Groups, Two, false>(ch, rows, kh, g.sw, ox, mask_at(ox), dst, g.ow, n);
    }
  };
  size_t oy = 0;
  if (Pairs && g.sh == 1 && g.dh == 1)
    for (; oy + 2 <= g.oh; oy += 2) output_row.template operator()<true>(oy);
  for (; oy < g.oh; ++oy) output_row.template operator()<false>(oy);
}

}  // namespace

void qu8_dwconv2d_bytes_index(const Qu8DwconvGeometry& g, uint8_t* index) {
  for (size_t q = 0; q < (g.kw + 3) / 4; ++q)
    for (size_t t = 0; t < 16; ++t)
      for (size_t b = 0; b < 4; ++b) {
        const size_t tap = 4 * q + b;
        index[64 * q + 4 * t + b] = static_cast<uint8_t>(tap < g.kw ? g.sw * t + g.dw * tap : 0);
      }
}

bool qu8_dwconv2d_bytes_supported(const Qu8DwconvGeometry& g) {
  return g.kw >= 1 && g.kw <= 8 && g.kh <= kMaxRows && 15 * g.sw + (g.kw - 1) * g.dw <= 63;
}

void qu8_dwconv2d_bytes__avx512vnni_vbmi(const uint8_t* image, size_t h, size_t w, uint8_t zero,
                                         size_t pt, size_t pl, uint8_t* zero_row,
                                         const uint8_t* index, const int32_t* wquads,
                                         const Qu8DwconvGeometry& g, int32_t bias, float scale,
                                         const Qu8Output& out, uint8_t* y) {
  const bool two = g.kw > 4;
  if (g.kh == 3 && !two)
    return dwconv<3, 1, true>(image, h, w, zero, pt, pl, zero_row, index, wquads, g, bias, scale,
                              out, y);
  if (g.kh == 5 && two)
    return dwconv<5, 2, true>(image, h, w, zero, pt, pl, zero_row, index, wquads, g, bias, scale,
                              out, y);
  if (g.kh == 7 && two)
    return dwconv<7, 2, true>(image, h, w, zero, pt, pl, zero_row, index, wquads, g, bias, scale,
                              out, y);
  if (!two)
    return dwconv<0, 1, false>(image, h, w, zero, pt, pl, zero_row, index, wquads, g, bias, scale,
                               out, y);
  dwconv<0, 2, false>(image, h, w, zero, pt, pl, zero_row, index, wquads, g, bias, scale, out, y);
}

}  // namespace peregrine::cpu::avx512vnni_vbmi
