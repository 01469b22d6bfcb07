// Depthwise 2-D conv on one NCHW plane, AVX2 + FMA (contract and algorithm:
// ukernels/f32_dwconv2d_ukernels.h).
//   Output row: 8 columns per vector; every tap is one unaligned load from a scratch row (the
//     scratch rows are sized for whole vectors, so the last vector reads no further than its
//     slack) and one FMA. The last out_w % 8 columns use masked residual loads and stores.
//   3x3: the 9 weights live in registers, one accumulator per kernel row (short FMA chains).
//   Other KH x KW: a tap loop with broadcast weights, two accumulators.
//   Stride-2 scratch rows: 16 input floats per step split into even / odd by shuffle + permute.
#include <immintrin.h>

#include "backends/cpu/ukernels/f32_dwconv2d_chw_impl.h"
#include "backends/cpu/ukernels/f32_vmask_avx2.h"

namespace peregrine::cpu::avx2 {

namespace {

// The even elements of the 16 floats lo, hi.
inline __m256 even_of(__m256 lo, __m256 hi) {
  // Per 128-bit lane: lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6; then 64-bit pairs 0 2 1 3.
  const __m256 t = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

// x[0], x[2], ..., x[14] of 16 contiguous floats.
inline __m256 load_even(const float *x) {
  return even_of(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8));
}

// Residual add, clamp and store of the vector of columns [ow, ow + n), n <= 8.
inline void finish(__m256 acc, const float *res, float *out, int64_t ow, int64_t n, __m256 vmin,
                   __m256 vmax) {
  if (n == 8) {
    if (res) acc = _mm256_add_ps(acc, _mm256_loadu_ps(res + ow));
    _mm256_storeu_ps(out + ow, clamp(acc, vmin, vmax));
  } else {
    const __m256i mask = tail_mask(n);
    if (res) acc = _mm256_add_ps(acc, _mm256_maskload_ps(res + ow, mask));
    _mm256_maskstore_ps(out + ow, mask, clamp(acc, vmin, vmax));
  }
}

// The scratch row of input row `in_row` (layout: dwconv2d_fill_row_scalar), in whole vectors: the
// zero head, the input part (the last partial vector by masked loads, which read nothing outside
// the row, and whose masked lanes store the first zeros of the tail), the zero tail. Stores stay
// below valid + 8 (the phase's slack).
void fill_row(const DwConv2dRowLayout &l, int64_t stride_w, int64_t pad_l, const float *in_row,
              float *dst) {
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t p = 0; p < stride_w; ++p, dst += l.pf) {
    const int64_t t_lo = l.t_lo[p];
    for (int64_t t = 0; t < t_lo; t += 8) _mm256_storeu_ps(dst + t, zero);
    const int64_t n = l.t_hi[p] - t_lo;
    const float *src = in_row + t_lo * stride_w + p - pad_l;
    float *d = dst + t_lo;
    int64_t t = 0;
    if (stride_w == 1) {
      for (; t + 8 <= n; t += 8) _mm256_storeu_ps(d + t, _mm256_loadu_ps(src + t));
      if (t < n) {
        _mm256_storeu_ps(d + t, _mm256_maskload_ps(src + t, tail_mask(n - t)));
        t += 8;
      }
    } else {  // stride 2: src[2 t] for t < n; src[0 .. 2 n - 2] may be read
      for (; t + 9 <= n; t += 8) _mm256_storeu_ps(d + t, load_even(src + 2 * t));
      if (t < n) {
        const int64_t m = 2 * (n - t) - 1;  // readable floats from src + 2 t, 1..15
        const __m256 lo = _mm256_maskload_ps(src + 2 * t, tail_mask(std::min<int64_t>(m, 8)));
        const __m256 hi =
            _mm256_maskload_ps(src + 2 * t + 8, tail_mask(std::max<int64_t>(m - 8, 0)));
        _mm256_storeu_ps(d + t, even_of(lo, hi));
        t += 8;
      }
    }
    for (int64_t u = t_lo + t; u < l.valid; u += 8) _mm256_storeu_ps(dst + u, zero);
  }
}

}  // namespace

void f32_dwconv2d_chw__avx2(const DwConv2dGeometry &g, const DwConv2dPlane &p, float *scratch) {
  const int64_t ow_n = g.out_w;
  const __m256 vbias = _mm256_set1_ps(p.bias);
  const __m256 vmin = _mm256_set1_ps(p.out_min), vmax = _mm256_set1_ps(p.out_max);
  auto fill = [&](const DwConv2dRowLayout &l, const float *in_row, float *dst) {
    fill_row(l, g.stride_w, g.pad_l, in_row, dst);
  };
  if (g.kh == 3 && g.kw == 3) {
    const float *w = p.weights;
    const __m256 w00 = _mm256_set1_ps(w[0]), w01 = _mm256_set1_ps(w[1]), w02 = _mm256_set1_ps(w[2]);
    const __m256 w10 = _mm256_set1_ps(w[3]), w11 = _mm256_set1_ps(w[4]), w12 = _mm256_set1_ps(w[5]);
    const __m256 w20 = _mm256_set1_ps(w[6]), w21 = _mm256_set1_ps(w[7]), w22 = _mm256_set1_ps(w[8]);
    auto row3x3 = [&](const float *const *rows, const int64_t *col_off, const float *res,
                      float *out) {
      const int64_t o0 = col_off[0], o1 = col_off[1], o2 = col_off[2];
      const float *r0 = rows[0];
      const float *r1 = rows[1];
      const float *r2 = rows[2];
      for (int64_t ow = 0; ow < ow_n; ow += 8) {
        __m256 a0 = _mm256_fmadd_ps(w00, _mm256_loadu_ps(r0 + o0 + ow), vbias);
        __m256 a1 = _mm256_mul_ps(w10, _mm256_loadu_ps(r1 + o0 + ow));
        __m256 a2 = _mm256_mul_ps(w20, _mm256_loadu_ps(r2 + o0 + ow));
        a0 = _mm256_fmadd_ps(w01, _mm256_loadu_ps(r0 + o1 + ow), a0);
        a1 = _mm256_fmadd_ps(w11, _mm256_loadu_ps(r1 + o1 + ow), a1);
        a2 = _mm256_fmadd_ps(w21, _mm256_loadu_ps(r2 + o1 + ow), a2);
        a0 = _mm256_fmadd_ps(w02, _mm256_loadu_ps(r0 + o2 + ow), a0);
        a1 = _mm256_fmadd_ps(w12, _mm256_loadu_ps(r1 + o2 + ow), a1);
        a2 = _mm256_fmadd_ps(w22, _mm256_loadu_ps(r2 + o2 + ow), a2);
        finish(_mm256_add_ps(a0, _mm256_add_ps(a1, a2)), res, out, ow,
               std::min<int64_t>(8, ow_n - ow), vmin, vmax);
      }
    };
    dwconv2d_chw_plane(g, p, scratch, fill, row3x3);
    return;
  }
  auto row_any = [&](const float *const *rows, const int64_t *col_off, const float *res,
                     float *out) {
    for (int64_t ow = 0; ow < ow_n; ow += 8) {
      __m256 acc[2] = {vbias, _mm256_setzero_ps()};
      const float *w = p.weights;
      for (int64_t ki = 0; ki < g.kh; ++ki) {
        const float *r = rows[ki] + ow;
        __m256 a = acc[ki & 1];
        for (int64_t kj = 0; kj < g.kw; ++kj)
          a = _mm256_fmadd_ps(_mm256_broadcast_ss(w + kj), _mm256_loadu_ps(r + col_off[kj]), a);
        acc[ki & 1] = a;
        w += g.kw;
      }
      finish(_mm256_add_ps(acc[0], acc[1]), res, out, ow, std::min<int64_t>(8, ow_n - ow), vmin,
             vmax);
    }
  };
  dwconv2d_chw_plane(g, p, scratch, fill, row_any);
}

}  // namespace peregrine::cpu::avx2
