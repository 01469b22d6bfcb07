// Winograd F(4x4, 3x3) tile transforms, scalar: one tile at a time, columns
// then rows, with the 1-D transforms written out (shared terms computed once).
// The matrices are in f32_winograd_ukernels.h; the table of both ISA levels is
// at the end.
#include "backends/cpu/ukernels/f32_winograd_ukernels.h"

namespace peregrine::cpu {
namespace scalar {
namespace {

// o = B^T d for six values d[0 .. 5] at stride `s`, written to o[0 .. 5] at
// stride `os`.
inline void input_1d(const float *d, size_t s, float *o, size_t os) {
  const float d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s], d4 = d[4 * s], d5 = d[5 * s];
  o[0] = 4.0f * d0 - 5.0f * d2 + d4;
  o[os] = (d4 + d3) - 4.0f * (d1 + d2);
  o[2 * os] = (d4 - d3) + 4.0f * (d1 - d2);
  o[3 * os] = (d4 - d2) + 2.0f * (d3 - d1);
  o[4 * os] = (d4 - d2) - 2.0f * (d3 - d1);
  o[5 * os] = 4.0f * d1 - 5.0f * d3 + d5;
}

// y = A^T m for six values m[0 .. 5] at stride `s`, written to y[0 .. 3] at
// stride `ys`.
inline void output_1d(const float *m, size_t s, float *y, size_t ys) {
  const float m0 = m[0], m1 = m[s], m2 = m[2 * s], m3 = m[3 * s], m4 = m[4 * s], m5 = m[5 * s];
  const float a = m1 + m2, b = m1 - m2, c = m3 + m4, d = m3 - m4;
  y[0] = m0 + a + c;
  y[ys] = b + 2.0f * d;
  y[2 * ys] = a + 4.0f * c;
  y[3 * ys] = b + 8.0f * d + m5;
}

}  // namespace

void f32_winograd_f4x3_input__scalar(const float *pq, size_t wq, size_t tiles, float *v,
                                     size_t v_stride, size_t col0, size_t nr, size_t panel_stride) {
  for (size_t j = 0; j < tiles; ++j) {
    float *out = v + (col0 + j) / nr * panel_stride + (col0 + j) % nr;  // tile j's column
    float d[36], t[36];                                                 // (6, 6) row-major
    for (size_t r = 0; r < 6; ++r)
      for (size_t c = 0; c < 6; ++c) d[r * 6 + c] = pq[(r * 4 + c % 4) * wq + j + c / 4];
    for (size_t c = 0; c < 6; ++c) input_1d(d + c, 6, t + c, 6);          // columns: t = B^T d
    for (size_t r = 0; r < 6; ++r) input_1d(t + r * 6, 1, d + r * 6, 1);  // rows: (B^T d) B
    for (size_t xi = 0; xi < 36; ++xi) out[xi * v_stride] = d[xi];
  }
}

void f32_winograd_f4x3_output__scalar(const float *m, size_t m_stride, float bias, float *y,
                                      size_t ldy, size_t rows, size_t cols) {
  const size_t tiles = (cols + 3) / 4;
  for (size_t j = 0; j < tiles; ++j) {
    float mt[36], t[24], o[16];
    for (size_t xi = 0; xi < 36; ++xi) mt[xi] = m[xi * m_stride + j];
    for (size_t c = 0; c < 6; ++c) output_1d(mt + c, 6, t + c, 6);         // columns: (4, 6)
    for (size_t r = 0; r < 4; ++r) output_1d(t + r * 6, 1, o + r * 4, 1);  // rows: (4, 4)
    const size_t w = cols - 4 * j < 4 ? cols - 4 * j : 4;
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < w; ++c) y[r * ldy + 4 * j + c] = o[r * 4 + c] + bias;
  }
}

}  // namespace scalar

namespace {
const WinogradUkernels kWinogradUkernels[] = {
    {Isa::kScalar, "f32_winograd_f4x3__scalar", scalar::f32_winograd_f4x3_input__scalar,
     scalar::f32_winograd_f4x3_output__scalar},
    {Isa::kAvx2, "f32_winograd_f4x3__avx2", avx2::f32_winograd_f4x3_input__avx2,
     avx2::f32_winograd_f4x3_output__avx2},
};
}  // namespace

const WinogradUkernels *winograd_f4x3_ukernels_for(Isa isa) {
  if (!isa_supported(isa)) return nullptr;
  if (isa == Isa::kAvx512) isa = Isa::kAvx2;
  for (const auto &k : kWinogradUkernels)
    if (k.isa == isa) return &k;
  return nullptr;
}

const WinogradUkernels &winograd_f4x3_ukernels() {
  const Expected<Isa> &isa = selected_isa();
  const WinogradUkernels *k =
      winograd_f4x3_ukernels_for(isa.is_ok() ? isa.value() : cpu_features().best_isa());
  return k ? *k : kWinogradUkernels[0];
}

}  // namespace peregrine::cpu
