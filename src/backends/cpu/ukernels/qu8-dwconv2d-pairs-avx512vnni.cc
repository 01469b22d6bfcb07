// Depthwise 2-D convolution of one uint8 channel, AVX512-VNNI: vpdpwssd multiplies two int16
// pairs per 32-bit lane and adds both products to the lane's sum, so a pair of kernel rows
// costs one instruction per 16 outputs. The input is laid out for it as a pair plane (each
// int32 the values of rows R and R + dh of one column) with columns split into stride phases,
// so every tap's 16 outputs read 16 consecutive int32. Contract: q8_ukernels.h.
#include <immintrin.h>

#include <algorithm>
#include <numeric>

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backends/cpu/ukernels/avx512_lane_mask.h"
#include "backends/cpu/ukernels/q8_ukernels.h"

namespace peregrine::cpu::avx512vnni {

namespace {

// At most this many weight pairs stay in registers / on the stack.
constexpr size_t kMaxPairs = 28;  // 7x7

// Kh2, Kw > 0: the pair rows and kernel width as constants (the tap loops unroll); 0: from g.
// Two output rows at a time: two independent sums in flight.
template <int Kh2, int Kw>
void rows(const int32_t* pairs, const int32_t* wpairs, const Qu8DwconvGeometry& geometry,
          size_t pwp, int32_t bias, float scale, const Qu8Output& out, uint8_t* y) {
  const Qu8DwconvGeometry g = geometry;  // a local copy: stores to y cannot alias it
  const size_t kw = Kw > 0 ? static_cast<size_t>(Kw) : g.kw;
  const size_t kh2 = Kh2 > 0 ? static_cast<size_t>(Kh2) : (g.kh + 1) / 2;
  const size_t row_stride = g.sw * pwp, down = g.sh * row_stride;
  __m512i w[kMaxPairs];
  size_t offset[7];  // per tap column: its phase's start plus its index in the phase
  for (size_t t = 0; t < kh2 * kw; ++t) w[t] = _mm512_set1_epi32(wpairs[t]);
  // sw is 1 or 2 (qu8_dwconv2d_pairs_supported): shifts and masks, no divisions per channel.
  const size_t shift = g.sw - 1;
  for (size_t j = 0; j < kw; ++j) offset[j] = ((j * g.dw) & shift) * pwp + ((j * g.dw) >> shift);
  const __m512i vbias = _mm512_set1_epi32(bias), zp = _mm512_set1_epi32(out.zero_point);
  const __m512i lo = _mm512_set1_epi32(out.lo), hi = _mm512_set1_epi32(out.hi);
  const __m512 vscale = _mm512_set1_ps(scale);
  auto requantize = [&](__m512i acc) {
    const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), vscale);
    const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), zp);
    return _mm512_cvtepi32_epi8(_mm512_min_epi32(_mm512_max_epi32(q, lo), hi));
  };
  for (size_t oy = 0; oy < g.oh; oy += 2) {
    const bool two = oy + 1 < g.oh;
    const int32_t* top = pairs + oy * down;
    uint8_t* dst = y + oy * g.ow;
    for (size_t ox = 0; ox < g.ow; ox += 16) {
      const size_t n = g.ow - ox < 16 ? g.ow - ox : 16;
      const __mmask16 m = avx512::first_lanes(static_cast<int64_t>(n));
      const __mmask16 m1 = two ? m : 0;  // the second row's loads: none past the last row
      __m512i acc0 = vbias, acc1 = vbias;
      const int32_t* row = top + ox;
#pragma GCC unroll 4
      for (size_t i = 0; i < kh2; ++i, row += 2 * g.dh * row_stride) {
#pragma GCC unroll 7
        for (size_t j = 0; j < kw; ++j) {
          acc0 = _mm512_dpwssd_epi32(acc0, _mm512_maskz_loadu_epi32(m, row + offset[j]),
                                     w[i * kw + j]);
          acc1 = _mm512_dpwssd_epi32(acc1, _mm512_maskz_loadu_epi32(m1, row + down + offset[j]),
                                     w[i * kw + j]);
        }
      }
      _mm_mask_storeu_epi8(dst + ox, m, requantize(acc0));
      if (two) _mm_mask_storeu_epi8(dst + g.ow + ox, m, requantize(acc1));
    }
  }
}

}  // namespace

bool qu8_dwconv2d_pairs_supported(const Qu8DwconvGeometry& g) {
  return (g.sw == 1 || g.sw == 2) && g.kw <= 7 && (g.kh + 1) / 2 * g.kw <= kMaxPairs;
}

namespace {

// One pair row from image rows `low` and `high` (either absent: a padding row, zeros), less
// the zero point. Stride 1: column x to even[x]. Stride 2: the 32 bytes from x as 16-bit lanes
// hold (x even, x odd) pairs, split with shifts and a blend into even[x / 2] and odd[x / 2].
template <int Sw, bool Low, bool High>
void pair_row(const uint8_t* low, const uint8_t* high, size_t w, int32_t zero, int32_t* even,
              int32_t* odd) {
  constexpr __mmask32 kHighHalves = 0xAAAAAAAAu;
  if constexpr (Sw == 1) {
    const __m512i vzero = _mm512_set1_epi32(zero);
    auto widen = [&](const uint8_t* row, size_t x, __mmask16 m) {
      return _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, row + x)), vzero);
    };
    for (size_t x = 0; x < w; x += 16) {
      const __mmask16 m =
          w - x >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (w - x)) - 1u);
      const __m512i a = Low ? widen(low, x, m) : _mm512_setzero_si512();
      const __m512i b = High ? widen(high, x, m) : _mm512_setzero_si512();
      _mm512_mask_storeu_epi32(even + x, m,
                               _mm512_mask_blend_epi16(kHighHalves, a, _mm512_slli_epi32(b, 16)));
    }
  } else {
    const __m512i vzero = _mm512_set1_epi16(static_cast<int16_t>(zero));
    auto widen = [&](const uint8_t* row, size_t x, __mmask32 m) {
      return _mm512_sub_epi16(_mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m, row + x)), vzero);
    };
    for (size_t x = 0; x < w; x += 32) {
      const size_t bytes = w - x < 32 ? w - x : 32;
      const __mmask32 m =
          bytes == 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << bytes) - 1u);
      const __m512i a = Low ? widen(low, x, m) : _mm512_setzero_si512();
      const __m512i b = High ? widen(high, x, m) : _mm512_setzero_si512();
      const __m512i evens = _mm512_mask_blend_epi16(kHighHalves, a, _mm512_slli_epi32(b, 16));
      const __m512i odds = _mm512_mask_blend_epi16(kHighHalves, _mm512_srli_epi32(a, 16), b);
      _mm512_mask_storeu_epi32(even + x / 2, static_cast<__mmask16>((1u << (bytes + 1) / 2) - 1u),
                               evens);
      _mm512_mask_storeu_epi32(odd + x / 2, static_cast<__mmask16>((1u << bytes / 2) - 1u), odds);
    }
  }
}

template <int Sw>
void pair_row_any(const uint8_t* low, const uint8_t* high, size_t w, int32_t zero, int32_t* even,
                  int32_t* odd) {
  if (low && high) return pair_row<Sw, true, true>(low, high, w, zero, even, odd);
  if (low) return pair_row<Sw, true, false>(low, high, w, zero, even, odd);
  pair_row<Sw, false, true>(low, high, w, zero, even, odd);
}

// n zeros from p with vector stores: the pads are a few entries per row, where the memset
// call a compiler makes of a plain loop costs more than the stores.
inline void zero_ints(int32_t* p, size_t n) {
  for (; n >= 16; n -= 16, p += 16) _mm512_storeu_si512(p, _mm512_setzero_si512());
  if (n)
    _mm512_mask_storeu_epi32(p, avx512::first_lanes(static_cast<int64_t>(n)),
                             _mm512_setzero_si512());
}

}  // namespace

void qu8_pair_rows__avx512vnni(const uint8_t* src, size_t h, size_t w, int32_t zero, size_t pt,
                               size_t pl, size_t ph, const Qu8DwconvGeometry& g, size_t pwp,
                               int32_t* pairs) {
  const size_t dh = g.dh, sw = g.sw;
  // Image row of pair-plane row r, or nullptr in the padding.
  auto image_row = [&](size_t r) -> const uint8_t* {
    return r >= pt && r - pt < h ? src + (r - pt) * w : nullptr;
  };
  // Padded column c = pl + x goes to phase c % sw at index c / sw; the rest is zero. Per phase:
  // where its image columns start and how many it gets (the same on every row). At stride 2 the
  // even x go to phase pl % 2.
  // sw is 1 or 2: shifts and masks (this runs once per channel).
  const size_t shift = sw - 1;
  size_t begin[2], count[2];
  for (size_t p = 0; p < sw; ++p) {
    const size_t x0 = (p + sw - (pl & shift)) & shift;  // the phase's first x
    begin[p] = (pl + x0) >> shift;
    count[p] = x0 < w ? (w - x0 + shift) >> shift : 0;
  }
  const size_t even_phase = pl & shift;
  // The kernel reads pair rows oy * sh + 2 i dh: every multiple of gcd(sh, 2 dh) up to the last
  // covers them (at stride 2 down, the even rows only).
  const size_t step = g.sh <= 2 ? g.sh : std::gcd(g.sh, 2 * dh);
  const size_t last = std::min(ph - 1, (g.oh - 1) * g.sh + ((g.kh + 1) / 2 - 1) * 2 * dh);
  if (sw == 1 && dh == 1 && step == 1) {
    // Every row, each the high half of one pair row and the low half of the next: down the
    // rows a 16-column strip at a time, each image row widened once and carried.
    const __m512i vzero = _mm512_set1_epi32(zero);
    constexpr __mmask32 kHighHalves = 0xAAAAAAAAu;
    auto widen = [&](size_t r, size_t x, __mmask16 m) {
      const uint8_t* row = image_row(r);
      if (!row) return _mm512_setzero_si512();
      return _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, row + x)), vzero);
    };
    for (size_t r = 0; r <= last; ++r) {
      int32_t* dst = pairs + r * pwp;
      zero_ints(dst, begin[0]);
      zero_ints(dst + begin[0] + w, pwp - begin[0] - w);
    }
    for (size_t x = 0; x < w; x += 16) {
      const __mmask16 m = w - x >= 16 ? static_cast<__mmask16>(0xFFFF)
                                      : static_cast<__mmask16>((1u << (w - x)) - 1u);
      __m512i upper = widen(0, x, m);
      int32_t* dst = pairs + begin[0] + x;
      for (size_t r = 0; r <= last; ++r, dst += pwp) {
        const __m512i lower = widen(r + 1, x, m);
        _mm512_mask_storeu_epi32(
            dst, m, _mm512_mask_blend_epi16(kHighHalves, upper, _mm512_slli_epi32(lower, 16)));
        upper = lower;
      }
    }
    return;
  }
  for (size_t r = 0; r <= last; r += step) {
    const uint8_t* low = image_row(r);
    const uint8_t* high = image_row(r + dh);
    int32_t* dst = pairs + r * sw * pwp;
    if (!low && !high) {
      std::fill(dst, dst + sw * pwp, 0);
      continue;
    }
    // The pads: a few entries each side of each phase.
    for (size_t p = 0; p < sw; ++p) {
      int32_t* phase = dst + p * pwp;
      zero_ints(phase, begin[p]);
      zero_ints(phase + begin[p] + count[p], pwp - begin[p] - count[p]);
    }
    if (sw == 1) {
      pair_row_any<1>(low, high, w, zero, dst + begin[0], nullptr);
    } else {
      const size_t odd_phase = 1 - even_phase;
      pair_row_any<2>(low, high, w, zero, dst + even_phase * pwp + begin[even_phase],
                      dst + odd_phase * pwp + begin[odd_phase]);
    }
  }
}

void qu8_dwconv2d_pairs__avx512vnni(const int32_t* pairs, const int32_t* wpairs,
                                    const Qu8DwconvGeometry& g, size_t pwp, int32_t bias,
                                    float scale, const Qu8Output& out, uint8_t* y) {
  if (g.kh == 3 && g.kw == 3) return rows<2, 3>(pairs, wpairs, g, pwp, bias, scale, out, y);
  if (g.kh == 5 && g.kw == 5) return rows<3, 5>(pairs, wpairs, g, pwp, bias, scale, out, y);
  if (g.kh == 7 && g.kw == 7) return rows<4, 7>(pairs, wpairs, g, pwp, bias, scale, out, y);
  rows<0, 0>(pairs, wpairs, g, pwp, bias, scale, out, y);
}

}  // namespace peregrine::cpu::avx512vnni
