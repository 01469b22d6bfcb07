// Winograd F(4x4, 3x3) tile transforms, AVX2: 8 tiles of a row at once, lane j
// = tile j0 + j.
//   input:  the phase-split rows make each of a tile's 6 columns one contiguous
//   load (column c
//           of tiles j0.. is phase c % 4 at index j0 + c / 4); rows then
//           columns of B^T d B in registers; each of the 36 results is one
//           contiguous store (the partial group via a buffer).
//   output: 36 contiguous loads, A^T M A in registers, then a 4x8 transpose per
//   output row so
//           the 8 tiles' 32 columns go out as 4 stores (the last, partial group
//           via a buffer).
// Contract and matrices: ukernels/f32_winograd_ukernels.h.
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/ukernels/f32_winograd_ukernels.h"

namespace peregrine::cpu::avx2 {
namespace {

// o[k * os] = (B^T d)[k] for d[i * s], i < 6.
inline void input_1d(const __m256 *d, size_t s, __m256 *o, size_t os) {
  const __m256 four = _mm256_set1_ps(4.0f), five = _mm256_set1_ps(5.0f), two = _mm256_set1_ps(2.0f);
  const __m256 d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s], d4 = d[4 * s], d5 = d[5 * s];
  o[0] = _mm256_fnmadd_ps(five, d2, _mm256_fmadd_ps(four, d0, d4));
  o[os] = _mm256_fnmadd_ps(four, _mm256_add_ps(d1, d2), _mm256_add_ps(d4, d3));
  o[2 * os] = _mm256_fmadd_ps(four, _mm256_sub_ps(d1, d2), _mm256_sub_ps(d4, d3));
  const __m256 d42 = _mm256_sub_ps(d4, d2), d31 = _mm256_sub_ps(d3, d1);
  o[3 * os] = _mm256_fmadd_ps(two, d31, d42);
  o[4 * os] = _mm256_fnmadd_ps(two, d31, d42);
  o[5 * os] = _mm256_fnmadd_ps(five, d3, _mm256_fmadd_ps(four, d1, d5));
}

// y[k * ys] = (A^T m)[k] for m[i * s], i < 6.
inline void output_1d(const __m256 *m, size_t s, __m256 *y, size_t ys) {
  const __m256 a = _mm256_add_ps(m[s], m[2 * s]), b = _mm256_sub_ps(m[s], m[2 * s]);
  const __m256 c = _mm256_add_ps(m[3 * s], m[4 * s]), d = _mm256_sub_ps(m[3 * s], m[4 * s]);
  y[0] = _mm256_add_ps(_mm256_add_ps(m[0], a), c);
  y[ys] = _mm256_fmadd_ps(_mm256_set1_ps(2.0f), d, b);
  y[2 * ys] = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), c, a);
  y[3 * ys] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.0f), d, b), m[5 * s]);
}

// dst[0 .. count) = lanes [0, count) of v, count < 8.
inline void store_lanes(float *dst, __m256 v, size_t count) {
  __m128 part = _mm256_castps256_ps128(v);
  if (count >= 4) {
    _mm_storeu_ps(dst, part);
    part = _mm256_extractf128_ps(v, 1);
    dst += 4;
    count -= 4;
  }
  if (count >= 2) {
    _mm_storel_pi(reinterpret_cast<__m64 *>(dst), part);
    part = _mm_movehl_ps(part, part);
    dst += 2;
    count -= 2;
  }
  if (count >= 1) _mm_store_ss(dst, part);
}

}  // namespace

void f32_winograd_f4x3_input__avx2(const float *pq, size_t wq, size_t tiles, float *v,
                                   size_t v_stride, size_t col0, size_t nr, size_t panel_stride) {
  for (size_t j0 = 0; j0 < tiles; j0 += 8) {
    __m256 d[36], t[36];  // (6, 6): lanes are tiles j0 .. j0 + 7
    for (size_t r = 0; r < 6; ++r) {
      const float *row = pq + r * 4 * wq + j0;  // phase p at row + p * wq
      d[r * 6 + 0] = _mm256_loadu_ps(row);
      d[r * 6 + 1] = _mm256_loadu_ps(row + wq);
      d[r * 6 + 2] = _mm256_loadu_ps(row + 2 * wq);
      d[r * 6 + 3] = _mm256_loadu_ps(row + 3 * wq);
      d[r * 6 + 4] = _mm256_loadu_ps(row + 1);
      d[r * 6 + 5] = _mm256_loadu_ps(row + wq + 1);
      input_1d(d + r * 6, 1, t + r * 6, 1);  // rows: t = d B
    }
    for (size_t c = 0; c < 6; ++c) input_1d(t + c, 6, d + c, 6);  // columns: d = B^T (d B)
    // Lanes go to columns col0 + j0 .. of the panel layout: one store when all 8 land in one
    // panel, else (a partial group, or one across a panel edge) lanes [0, in_panel) here and
    // [in_panel, n) at the next panel's start, each in <= 3 narrow stores (Zen 3, ResNet-50
    // layer1 in peregrine_conv_bench: masked stores, and a lane buffer + memmove, made the
    // transform slower).
    const size_t col = col0 + j0, n = std::min<size_t>(8, tiles - j0);
    const size_t in_panel = std::min(n, nr - col % nr);  // lanes before the panel edge
    float *out = v + col / nr * panel_stride + col % nr;
    if (in_panel == 8) {
      for (size_t xi = 0; xi < 36; ++xi) _mm256_storeu_ps(out + xi * v_stride, d[xi]);
    } else {
      for (size_t xi = 0; xi < 36; ++xi) store_lanes(out + xi * v_stride, d[xi], in_panel);
      if (n > in_panel) {
        float *next = v + (col / nr + 1) * panel_stride;  // the next panel's first column
        const __m256i down = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                              _mm256_set1_epi32(static_cast<int>(in_panel)));
        for (size_t xi = 0; xi < 36; ++xi)
          store_lanes(next + xi * v_stride, _mm256_permutevar8x32_ps(d[xi], down), n - in_panel);
      }
    }
  }
}

void f32_winograd_f4x3_output__avx2(const float *m, size_t m_stride, float bias, float *y,
                                    size_t ldy, size_t rows, size_t cols) {
  const size_t tiles = (cols + 3) / 4;
  const __m256 vbias = _mm256_set1_ps(bias);
  for (size_t j0 = 0; j0 < tiles; j0 += 8) {
    __m256 mt[36], t[24], o[4];
    for (size_t xi = 0; xi < 36; ++xi) mt[xi] = _mm256_loadu_ps(m + xi * m_stride + j0);
    for (size_t c = 0; c < 6; ++c) output_1d(mt + c, 6, t + c, 6);  // columns: (4, 6)
    const size_t x0 = 4 * j0;
    const bool full = cols - x0 >= 32;
    for (size_t r = 0; r < rows; ++r) {
      output_1d(t + r * 6, 1, o,
                1);  // row r: o[b] lane j = column 4 (j0 + j) + b
      for (__m256 &ob : o) ob = _mm256_add_ps(ob, vbias);
      // 4x8 -> 8x4: u_k holds tiles k and k + 4, 4 columns each.
      const __m256 t0 = _mm256_unpacklo_ps(o[0], o[1]), t1 = _mm256_unpackhi_ps(o[0], o[1]);
      const __m256 t2 = _mm256_unpacklo_ps(o[2], o[3]), t3 = _mm256_unpackhi_ps(o[2], o[3]);
      const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
      const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
      float *dst = y + r * ldy + x0;
      float buf[32];
      float *out = full ? dst : buf;
      _mm256_storeu_ps(out, _mm256_permute2f128_ps(u0, u1, 0x20));
      _mm256_storeu_ps(out + 8, _mm256_permute2f128_ps(u2, u3, 0x20));
      _mm256_storeu_ps(out + 16, _mm256_permute2f128_ps(u0, u1, 0x31));
      _mm256_storeu_ps(out + 24, _mm256_permute2f128_ps(u2, u3, 0x31));
      if (!full) std::copy(buf, buf + (cols - x0), dst);
    }
  }
}

}  // namespace peregrine::cpu::avx2
