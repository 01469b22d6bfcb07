// Depthwise 2-D conv, channel-blocked: 8 channels of one image per call, AVX2 + FMA (contract:
// ukernels/f32_dwconv2d_ukernels.h).
//
// Why: the per-plane kernel (f32-dwconv2d-chw-avx2.cc) vectorizes along W, so a 7- or 14-wide row
// is one or two vectors with masked edges, a stride-2 row needs even / odd shuffles, and every row
// of every plane pays its own fill and bookkeeping. Here one vector holds one pixel of 8 channels
// (NCHWc8, inside the kernel only), so the work per vector does not depend on the width or stride.
//
// Algorithm, for output rows [oh_begin, oh_end) of the 8 planes:
//   1. Weights -> tap-major (KH * KW, 8), bias -> (8), once per call.
//   2. Tile: padded input row r (input row r - pad_t) lives in ring slot r % tile_rows as tile_w
//      pixels of 8 floats: zeros for the left padding, the row transposed 8 columns at a time (8
//      row loads, an 8x8 register transpose, 8 aligned stores; the last partial block by masked
//      loads, whose zero lanes become zero pixels right of the row), then zeros. Rows above / below
//      the input are one shared zero row. Output rows walk down, so each input row a call needs is
//      transposed once (tile_rows = the rows one output row reads).
//   3. Output row oh, pixel ow = bias + sum over taps (ki, kj) of w(ki, kj) * tile[oh * sh + ki *
//      dh][ow * sw + kj * dw]: one aligned load and one FMA per tap, no edge test, any stride or
//      dilation. 4 pixels per step (4 independent FMA chains); 3x3 is unrolled with the 9 weight
//      vectors in registers, other sizes loop over the taps. The pixels go to a pixel-major buffer
//      after the (< 8) pixels left over from the previous row.
//   4. Each complete block of 8 buffered pixels is transposed back into 8 channel vectors of 8
//      consecutive pixels of the flattened output planes (a block may span two rows, so a 7-wide
//      plane still stores whole vectors), the residual added, clamped, stored unmasked; the
//      leftover pixels move to the buffer's front. Only a call's last block is partial (4 / 2 / 1
//      float stores: masked stores are slow on AMD). The epilogue (activations that are not a
//      clamp) then runs over the (8, n) pixels just stored, while they are in L1.
#include <immintrin.h>

#include "backends/cpu/ukernels/f32_dwconv2d_cblock_impl.h"
#include "backends/cpu/ukernels/f32_dwconv2d_ukernels.h"
#include "backends/cpu/ukernels/f32_vmask_avx2.h"

namespace peregrine::cpu::avx2 {

namespace {

// In-register transpose of the 8x8 block r (r[i] = row i): afterwards r[j] holds column j.
inline void transpose8x8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  // Per 128-bit lane, u0 = rows 0..3 of columns 0 | 4, u1 = 1 | 5, u2 = 2 | 6, u3 = 3 | 7; u4..u7
  // the same for rows 4..7.
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// Tile row (tile_w pixels of 8 floats, 32-byte aligned) of the input row `in` of plane 0 (plane c
// at in + c * in_plane); layout in the file comment.
void fill_tile_row(const float *in, int64_t in_plane, int64_t in_w, int64_t pad_l, int64_t tile_w,
                   float *dst) {
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t x = 0; x < pad_l; ++x) _mm256_store_ps(dst + x * 8, zero);
  float *d = dst + pad_l * 8;
  __m256 r[8];
  int64_t iw = 0;
  for (; iw + 8 <= in_w; iw += 8, d += 64) {
    for (int c = 0; c < 8; ++c) r[c] = _mm256_loadu_ps(in + c * in_plane + iw);
    transpose8x8(r);
    for (int j = 0; j < 8; ++j) _mm256_store_ps(d + j * 8, r[j]);
  }
  if (iw < in_w) {  // masked loads read nothing past the row; their zero lanes pad it
    const __m256i mask = tail_mask(in_w - iw);
    for (int c = 0; c < 8; ++c) r[c] = _mm256_maskload_ps(in + c * in_plane + iw, mask);
    transpose8x8(r);
    for (int j = 0; j < 8; ++j) _mm256_store_ps(d + j * 8, r[j]);
    d += 64;
  }
  for (float *end = dst + tile_w * 8; d < end; d += 8) _mm256_store_ps(d, zero);
}

// The first n (< 8) floats of v to p: 4 / 2 / 1 float stores.
inline void store_partial(float *p, __m256 v, int64_t n) {
  __m128 lo = _mm256_castps256_ps128(v);
  if (n & 4) {
    _mm_storeu_ps(p, lo);
    lo = _mm256_extractf128_ps(v, 1);
    p += 4;
  }
  if (n & 2) {
    _mm_storel_pi(reinterpret_cast<__m64 *>(p), lo);
    lo = _mm_movehl_ps(lo, lo);
    p += 2;
  }
  if (n & 1) _mm_store_ss(p, lo);
}

// The 8 buffered pixels at `buf` (pixel-major, 8 x 8) back to the 8 planes at out (plane c at out
// + c * plane), residual (same layout) added, clamped; only the first n pixels are stored (n <= 8).
inline void store_block(const float *buf, const float *res, float *out, int64_t plane, int64_t n,
                        __m256 vmin, __m256 vmax) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_load_ps(buf + i * 8);
  transpose8x8(r);  // r[c]: channel c, 8 consecutive pixels
  if (n == 8) {
    for (int c = 0; c < 8; ++c) {
      __m256 v = r[c];
      if (res) v = _mm256_add_ps(v, _mm256_loadu_ps(res + c * plane));
      _mm256_storeu_ps(out + c * plane, clamp(v, vmin, vmax));
    }
    return;
  }
  const __m256i mask = tail_mask(n);
  for (int c = 0; c < 8; ++c) {
    __m256 v = r[c];
    if (res) v = _mm256_add_ps(v, _mm256_maskload_ps(res + c * plane, mask));
    store_partial(out + c * plane, clamp(v, vmin, vmax), n);
  }
}

struct Ymm {
  using Reg = __m256;
  static constexpr int64_t kLanes = 8;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg set1(float x) { return _mm256_set1_ps(x); }
  static Reg loadu(const float *p) { return _mm256_loadu_ps(p); }
  static void storeu(float *p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  // Whole blocks only (partial_blocks is false for this kernel): `channels` is always 8.
  static void fill_tile_row(const float *in, int64_t in_plane, int64_t in_w, int64_t pad_l,
                            int64_t tile_w, int64_t /*channels*/, float *dst) {
    avx2::fill_tile_row(in, in_plane, in_w, pad_l, tile_w, dst);
  }
  static void store_block(const float *buf, const float *res, float *out, int64_t plane, int64_t n,
                          int64_t /*channels*/, Reg vmin, Reg vmax) {
    avx2::store_block(buf, res, out, plane, n, vmin, vmax);
  }
};

}  // namespace

void f32_dwconv2d_c8__avx2(const DwConv2dGeometry &g, const DwConv2dC8Block &b, float *scratch) {
  dwconv2d_channel_block<Ymm>(g, b, scratch);
}

}  // namespace peregrine::cpu::avx2
