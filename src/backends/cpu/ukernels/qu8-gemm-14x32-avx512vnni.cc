// uint8 x int8 GEMM micro-kernel, AVX-512 VNNI: MR = 14, NR = 32, int32 accumulators.
// Registers: 28 zmm accumulators (14 rows x 2 vectors of 16 columns), 2 for the B quad row,
// 1 broadcast of an A quad. Each quad step (four k): 2 loads of B, 14 broadcasts, 28 vpdpbusd
// (B's bytes are the unsigned operand, A's the signed one). The requantization runs on the
// tile in registers. Packing and edge contract: q8_ukernels.h.
#include <immintrin.h>

// GCC 12's AVX-512 intrinsics pass an _mm512_undefined_*() pass-through operand that
// -W(maybe-)uninitialized reports once inlined; it is never read (the mask is all ones).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backends/cpu/ukernels/avx512_lane_mask.h"
#include "backends/cpu/ukernels/q8_ukernels.h"

namespace peregrine::cpu::avx512vnni {

namespace {

constexpr int kMr = kQu8GemmMr;
// B quad rows requested this many steps ahead (the B block streams from L2). A, a layer's
// packed weights, is read once per run from memory, so it is requested a memory latency ahead
// (bench/qdq QDQ ResNet-50 and MobileNetV2).
constexpr size_t kPrefetchQuads = 4;
constexpr size_t kPrefetchAQuads = 96;

// acc += dot4(x bytes unsigned, w bytes signed) per 32-bit lane. Inline assembly because GCC 12
// copies the accumulator around every _mm512_dpbusd_epi32 in this loop (it ties the
// intrinsic's output to a fresh register), spilling most of the 28 accumulators.
inline void dpbusd(__m512i& acc, __m512i x, __m512i w) {
  asm("vpdpbusd %[w], %[x], %[acc]" : [acc] "+v"(acc) : [x] "v"(x), [w] "v"(w));
}

// acc already holds the bias.
inline __m128i requantize(__m512i acc, __m512 scale, __m512i zp, __m512i lo, __m512i hi) {
  const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), scale);
  // vcvtps2dq rounds by MXCSR: half to even unless a caller changed the mode.
  __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), zp);
  q = _mm512_min_epi32(_mm512_max_epi32(q, lo), hi);
  return _mm512_cvtepi32_epi8(q);  // in range, so the truncation is exact for both signs
}

template <int R>
void tile(size_t cols, size_t kq, const uint32_t* a, const uint32_t* b, uint8_t* c, size_t ldc,
          const int32_t* bias, const float* scale, const Qu8Output& out) {
  // The sums start at the bias (an exact integer add either way), which saves the epilogue
  // an add per vector.
  __m512i acc0[R], acc1[R];
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i) acc0[i] = acc1[i] = _mm512_set1_epi32(bias[i]);
  for (size_t q = 0; q < kq; ++q, a += kMr, b += 32) {
    _mm_prefetch(reinterpret_cast<const char*>(a + kPrefetchAQuads * kMr), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(b + kPrefetchQuads * 32), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(b + kPrefetchQuads * 32 + 16), _MM_HINT_T0);
    const __m512i b0 = _mm512_load_si512(b);
    const __m512i b1 = _mm512_load_si512(b + 16);
#pragma GCC unroll 14
    for (int i = 0; i < R; ++i) {
      const __m512i av = _mm512_set1_epi32(static_cast<int>(a[i]));
      dpbusd(acc0[i], b0, av);
      dpbusd(acc1[i], b1, av);
    }
  }
  const __mmask16 m0 = avx512::first_lanes(cols),
                  m1 = avx512::first_lanes(cols > 16 ? cols - 16 : 0);
  const __m512i zp = _mm512_set1_epi32(out.zero_point);
  const __m512i lo = _mm512_set1_epi32(out.lo), hi = _mm512_set1_epi32(out.hi);
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i) {
    const __m512 vs = _mm512_set1_ps(scale[i]);
    uint8_t* row = c + i * ldc;
    _mm_mask_storeu_epi8(row, m0, requantize(acc0[i], vs, zp, lo, hi));
    _mm_mask_storeu_epi8(row + 16, m1, requantize(acc1[i], vs, zp, lo, hi));
  }
}

using TileFn = void (*)(size_t, size_t, const uint32_t*, const uint32_t*, uint8_t*, size_t,
                        const int32_t*, const float*, const Qu8Output&);
constexpr TileFn kTiles[kMr] = {tile<1>, tile<2>,  tile<3>,  tile<4>,  tile<5>,
                                tile<6>, tile<7>,  tile<8>,  tile<9>,  tile<10>,
                                tile<11>, tile<12>, tile<13>, tile<14>};

}  // namespace

void qu8_gemm_ukernel_14x32__avx512vnni(size_t rows, size_t cols, size_t kq, const uint32_t* a,
                                        const uint32_t* b, uint8_t* c, size_t ldc,
                                        const int32_t* bias, const float* scale,
                                        const Qu8Output& out) {
  kTiles[rows - 1](cols, kq, a, b, c, ldc, bias, scale, out);
}

namespace {

// Four rows of 32 bytes into 32 quads at dst: byte interleave of row pairs, then 16-bit
// interleave of those, then the 128-bit lanes put back in column order.
inline void store_quads(const __m256i (&r)[4], uint32_t* dst) {
  const __m256i t0 = _mm256_unpacklo_epi8(r[0], r[1]), t1 = _mm256_unpackhi_epi8(r[0], r[1]);
  const __m256i t2 = _mm256_unpacklo_epi8(r[2], r[3]), t3 = _mm256_unpackhi_epi8(r[2], r[3]);
  const __m256i u0 = _mm256_unpacklo_epi16(t0, t2);  // columns 0-3 | 16-19
  const __m256i u1 = _mm256_unpackhi_epi16(t0, t2);  // 4-7 | 20-23
  const __m256i u2 = _mm256_unpacklo_epi16(t1, t3);  // 8-11 | 24-27
  const __m256i u3 = _mm256_unpackhi_epi16(t1, t3);  // 12-15 | 28-31
  __m256i* out = reinterpret_cast<__m256i*>(dst);
  _mm256_store_si256(out + 0, _mm256_permute2x128_si256(u0, u1, 0x20));
  _mm256_store_si256(out + 1, _mm256_permute2x128_si256(u2, u3, 0x20));
  _mm256_store_si256(out + 2, _mm256_permute2x128_si256(u0, u1, 0x31));
  _mm256_store_si256(out + 3, _mm256_permute2x128_si256(u2, u3, 0x31));
}

}  // namespace

void qu8_pack_b_32__avx512vnni(const uint8_t* src, size_t ld, size_t k, size_t cols,
                               uint32_t* dst) {
  const __mmask32 m = cols >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << cols) - 1u);
  for (size_t p = 0; p < k; p += 4, dst += 32) {
    __m256i r[4];
    for (size_t t = 0; t < 4; ++t)
      r[t] = p + t < k ? _mm256_maskz_loadu_epi8(m, src + (p + t) * ld) : _mm256_setzero_si256();
    store_quads(r, dst);
  }
}

namespace {

// The panel of a convolution's B rows (channel, tap), four at a time into quads; rows past k
// are zero. row(c, tap) gives the 32 bytes of one row.
template <typename RowFn>
inline void pack_conv_rows(size_t k, size_t taps, uint32_t* dst, RowFn row) {
  size_t c = 0, tap = 0;  // of row p + t, advanced row by row
  for (size_t p = 0; p < k; p += 4, dst += 32) {
    __m256i r[4];
    for (size_t t = 0; t < 4; ++t) {
      if (p + t >= k) {
        r[t] = _mm256_setzero_si256();
        continue;
      }
      r[t] = row(c, tap);
      if (++tap == taps) tap = 0, ++c;
    }
    store_quads(r, dst);
  }
}

// Each row one masked load per piece; at stride 2 the load takes 64 bytes and its even bytes
// are the lanes.
template <int Stride>
void pack_conv_strided(const Qu8ConvStridedPanel& panel, size_t k, uint32_t* dst) {
  const __m256i pad = _mm256_set1_epi8(static_cast<char>(panel.pad));
  const size_t segments = panel.segments;
  pack_conv_rows(k, panel.taps, dst, [&](size_t c, size_t tap) {
    const uint8_t* plane = panel.image + c * panel.plane;
    const Qu8ConvPiece* piece = panel.pieces + tap * segments;
    __m256i v = pad;
    for (size_t s = 0; s < segments; ++s, ++piece) {
      const __mmask32 lanes = static_cast<__mmask32>(piece->lanes);
      if (Stride == 1) {
        v = _mm256_mask_loadu_epi8(v, lanes, plane + piece->offset);
      } else {
        const __m512i bytes =
            _mm512_maskz_loadu_epi8(static_cast<__mmask64>(piece->bytes), plane + piece->offset);
        v = _mm256_mask_mov_epi8(v, lanes, _mm512_cvtepi16_epi8(bytes));
      }
    }
    return v;
  });
}

}  // namespace

// Each row one masked load (lanes outside the image are neither read nor faulted on: they get
// the pad byte).
void qu8_pack_conv_b_32__avx512vnni(const Qu8ConvPanel& panel, size_t k, uint32_t* dst) {
  const __m256i pad = _mm256_set1_epi8(static_cast<char>(panel.pad));
  pack_conv_rows(k, panel.taps, dst, [&](size_t c, size_t tap) {
    return _mm256_mask_loadu_epi8(pad, static_cast<__mmask32>(panel.inside[tap]),
                                  panel.image + c * panel.plane + panel.offset[tap]);
  });
}

void qu8_pack_conv_strided_b_32__avx512vnni(const Qu8ConvStridedPanel& panel, size_t k,
                                            uint32_t* dst) {
  if (panel.stride == 1) return pack_conv_strided<1>(panel, k, dst);
  pack_conv_strided<2>(panel, k, dst);
}

}  // namespace peregrine::cpu::avx512vnni
