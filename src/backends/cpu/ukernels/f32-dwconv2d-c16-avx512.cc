// Depthwise 2-D conv, channel-blocked: up to 16 channels of one image per call, AVX-512 (contract:
// ukernels/f32_dwconv2d_ukernels.h). The algorithm of f32-dwconv2d-c8-avx2.cc with one vector =
// one pixel of 16 channels: each call's fixed work (weights to tap-major, the zero row, the
// ring's first rows) and each tap's load and FMA cover twice the channels, the transposes are
// 16x16, and row ends and a last block of fewer than 16 channels are masked (cheap with AVX-512
// masks, unlike AVX2's masked moves on AMD), so every channel count takes this kernel.
#include <immintrin.h>

#include "backends/cpu/ukernels/avx512_lane_mask.h"
#include "backends/cpu/ukernels/f32_dwconv2d_cblock_impl.h"
#include "backends/cpu/ukernels/f32_dwconv2d_ukernels.h"
#include "backends/cpu/ukernels/f32_transpose_avx512.h"

// GCC 12's _mm512_max_ps / _mm512_min_ps pass an _mm512_undefined_ps() pass-through operand
// that -Wmaybe-uninitialized reports once inlined; it is never read (the mask is all ones).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace peregrine::cpu::avx512 {

namespace {

constexpr int64_t kLanes = 16;

// Tile row (tile_w pixels of 16 floats) of the input row `in` of plane 0 (plane c at in + c *
// in_plane, c < channels; the other lanes are zero).
void fill_tile_row(const float *in, int64_t in_plane, int64_t in_w, int64_t pad_l, int64_t tile_w,
                   int64_t channels, float *dst) {
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t x = 0; x < pad_l; ++x) _mm512_storeu_ps(dst + x * kLanes, zero);
  float *d = dst + pad_l * kLanes;
  __m512 r[16];
  for (int64_t iw = 0; iw < in_w; iw += kLanes, d += kLanes * kLanes) {
    const __mmask16 m = first_lanes(in_w - iw);  // the last block: nothing read past the row
    for (int64_t c = 0; c < kLanes; ++c)
      r[c] = c < channels ? _mm512_maskz_loadu_ps(m, in + c * in_plane + iw) : zero;
    transpose16x16(r);
    for (int j = 0; j < 16; ++j) _mm512_storeu_ps(d + j * kLanes, r[j]);
  }
  for (float *end = dst + tile_w * kLanes; d < end; d += kLanes) _mm512_storeu_ps(d, zero);
}

// The 16 buffered pixels at `buf` (pixel-major, 16 x 16) back to the planes at out (plane c at
// out + c * plane, c < channels), residual (same layout) added, clamped; only the first n pixels
// are stored (n <= 16).
inline void store_block(const float *buf, const float *res, float *out, int64_t plane, int64_t n,
                        int64_t channels, __m512 vmin, __m512 vmax) {
  __m512 r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(buf + i * kLanes);
  transpose16x16(r);  // r[c]: channel c, 16 consecutive pixels
  const __mmask16 m = first_lanes(n);
  for (int64_t c = 0; c < channels; ++c) {
    __m512 v = r[c];
    if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, res + c * plane));
    // max / min return their second operand when either is NaN: NaN stays NaN.
    _mm512_mask_storeu_ps(out + c * plane, m, _mm512_min_ps(vmax, _mm512_max_ps(vmin, v)));
  }
}

struct Zmm {
  using Reg = __m512;
  static constexpr int64_t kLanes = 16;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg set1(float x) { return _mm512_set1_ps(x); }
  static Reg loadu(const float *p) { return _mm512_loadu_ps(p); }
  static void storeu(float *p, Reg v) { _mm512_storeu_ps(p, v); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static void fill_tile_row(const float *in, int64_t in_plane, int64_t in_w, int64_t pad_l,
                            int64_t tile_w, int64_t channels, float *dst) {
    avx512::fill_tile_row(in, in_plane, in_w, pad_l, tile_w, channels, dst);
  }
  static void store_block(const float *buf, const float *res, float *out, int64_t plane, int64_t n,
                          int64_t channels, Reg vmin, Reg vmax) {
    avx512::store_block(buf, res, out, plane, n, channels, vmin, vmax);
  }
};

}  // namespace

void f32_dwconv2d_c16__avx512(const DwConv2dGeometry &g, const DwConv2dC8Block &b, float *scratch) {
  dwconv2d_channel_block<Zmm>(g, b, scratch);
}

}  // namespace peregrine::cpu::avx512
