// Winograd F(2x2, 3x3) tile transforms, AVX2: 8 tiles of a row at once, lane j = tile j0 + j.
//   input:  the parity-split rows make each of a tile's 4 columns one contiguous load (column c
//           of tiles j0.. is parity c % 2 at index j0 + c / 2); rows then columns of B^T d B in
//           registers (additions only); each of the 16 results is one contiguous store into the
//           GEMM's B panels (a partial group, or one across a panel edge, in narrow stores).
//   output: 16 contiguous loads, A^T M A in registers, then the two output columns of each tile
//           interleaved so the 8 tiles' 16 columns of a row go out as 2 stores (the last,
//           partial group via a buffer).
// Contract and matrices: ukernels/f32_winograd_ukernels.h.
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/ukernels/f32_winograd_ukernels.h"

namespace peregrine::cpu::avx2 {
namespace {

// o[k * os] = (B^T d)[k] for d[i * s], i < 4.
inline void input_1d(const __m256 *d, size_t s, __m256 *o, size_t os) {
  const __m256 d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s];
  o[0] = _mm256_sub_ps(d0, d2);
  o[os] = _mm256_add_ps(d1, d2);
  o[2 * os] = _mm256_sub_ps(d2, d1);
  o[3 * os] = _mm256_sub_ps(d1, d3);
}

// y[k * ys] = (A^T m)[k] for m[i * s], i < 4.
inline void output_1d(const __m256 *m, size_t s, __m256 *y, size_t ys) {
  y[0] = _mm256_add_ps(_mm256_add_ps(m[0], m[s]), m[2 * s]);
  y[ys] = _mm256_sub_ps(_mm256_sub_ps(m[s], m[2 * s]), m[3 * s]);
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

void f32_winograd_f2x3_input__avx2(const float *pq, size_t wq, size_t tiles, float *v,
                                   size_t v_stride, size_t col0, size_t nr, size_t panel_stride) {
  for (size_t j0 = 0; j0 < tiles; j0 += 8) {
    __m256 d[16], t[16];  // (4, 4): lanes are tiles j0 .. j0 + 7
    for (size_t r = 0; r < 4; ++r) {
      const float *row = pq + r * 2 * wq + j0;  // parity p at row + p * wq
      d[r * 4 + 0] = _mm256_loadu_ps(row);
      d[r * 4 + 1] = _mm256_loadu_ps(row + wq);
      d[r * 4 + 2] = _mm256_loadu_ps(row + 1);
      d[r * 4 + 3] = _mm256_loadu_ps(row + wq + 1);
      input_1d(d + r * 4, 1, t + r * 4, 1);  // rows: t = d B
    }
    for (size_t c = 0; c < 4; ++c) input_1d(t + c, 4, d + c, 4);  // columns: d = B^T (d B)
    // Lanes go to columns col0 + j0 .. of the panel layout: one store when all 8 land in one
    // panel, else lanes [0, in_panel) here and [in_panel, n) at the next panel's start.
    const size_t col = col0 + j0, n = std::min<size_t>(8, tiles - j0);
    const size_t in_panel = std::min(n, nr - col % nr);  // lanes before the panel edge
    float *out = v + col / nr * panel_stride + col % nr;
    if (in_panel == 8) {
      for (size_t xi = 0; xi < 16; ++xi) _mm256_storeu_ps(out + xi * v_stride, d[xi]);
    } else {
      for (size_t xi = 0; xi < 16; ++xi) store_lanes(out + xi * v_stride, d[xi], in_panel);
      if (n > in_panel) {
        float *next = v + (col / nr + 1) * panel_stride;  // the next panel's first column
        const __m256i down = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                              _mm256_set1_epi32(static_cast<int>(in_panel)));
        for (size_t xi = 0; xi < 16; ++xi)
          store_lanes(next + xi * v_stride, _mm256_permutevar8x32_ps(d[xi], down), n - in_panel);
      }
    }
  }
}

void f32_winograd_f2x3_output__avx2(const float *m, size_t m_stride, float bias, float *y,
                                    size_t ldy, size_t rows, size_t cols) {
  const size_t tiles = (cols + 1) / 2;
  const __m256 vbias = _mm256_set1_ps(bias);
  for (size_t j0 = 0; j0 < tiles; j0 += 8) {
    __m256 mt[16], t[8], o[2];
    for (size_t xi = 0; xi < 16; ++xi) mt[xi] = _mm256_loadu_ps(m + xi * m_stride + j0);
    for (size_t c = 0; c < 4; ++c) output_1d(mt + c, 4, t + c, 4);  // columns: (2, 4)
    const size_t x0 = 2 * j0;
    const bool full = cols - x0 >= 16;
    for (size_t r = 0; r < rows; ++r) {
      output_1d(t + r * 4, 1, o, 1);  // row r: o[b] lane j = column 2 (j0 + j) + b
      o[0] = _mm256_add_ps(o[0], vbias);
      o[1] = _mm256_add_ps(o[1], vbias);
      // Interleave: lo = tiles 0, 1 | 4, 5 and hi = tiles 2, 3 | 6, 7, two columns each.
      const __m256 lo = _mm256_unpacklo_ps(o[0], o[1]), hi = _mm256_unpackhi_ps(o[0], o[1]);
      float *dst = y + r * ldy + x0;
      float buf[16];
      float *out = full ? dst : buf;
      _mm256_storeu_ps(out, _mm256_permute2f128_ps(lo, hi, 0x20));
      _mm256_storeu_ps(out + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
      if (!full) std::copy(buf, buf + (cols - x0), dst);
    }
  }
}

}  // namespace peregrine::cpu::avx2
