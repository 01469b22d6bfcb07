// Winograd F(2x2, 3x3) tile transforms, scalar: one tile at a time, columns then rows. The
// matrices and the contract are in f32_winograd_ukernels.h; the table of both ISA levels is at
// the end.
#include "backends/cpu/ukernels/f32_winograd_ukernels.h"

namespace peregrine::cpu {
namespace scalar {
namespace {

// o = B^T d for four values d[0 .. 3] at stride `s`, written to o[0 .. 3] at stride `os`.
inline void input_1d(const float *d, size_t s, float *o, size_t os) {
  const float d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s];
  o[0] = d0 - d2;
  o[os] = d1 + d2;
  o[2 * os] = d2 - d1;
  o[3 * os] = d1 - d3;
}

// y = A^T m for four values m[0 .. 3] at stride `s`, written to y[0 .. 1] at stride `ys`.
inline void output_1d(const float *m, size_t s, float *y, size_t ys) {
  const float m0 = m[0], m1 = m[s], m2 = m[2 * s], m3 = m[3 * s];
  y[0] = m0 + m1 + m2;
  y[ys] = m1 - m2 - m3;
}

}  // namespace

void f32_winograd_f2x3_input__scalar(const float *pq, size_t wq, size_t tiles, float *v,
                                     size_t v_stride, size_t col0, size_t nr, size_t panel_stride) {
  for (size_t j = 0; j < tiles; ++j) {
    float *out = v + (col0 + j) / nr * panel_stride + (col0 + j) % nr;  // tile j's column
    float d[16], t[16];                                                 // (4, 4) row-major
    for (size_t r = 0; r < 4; ++r)
      for (size_t c = 0; c < 4; ++c) d[r * 4 + c] = pq[(r * 2 + c % 2) * wq + j + c / 2];
    for (size_t c = 0; c < 4; ++c) input_1d(d + c, 4, t + c, 4);          // columns: t = B^T d
    for (size_t r = 0; r < 4; ++r) input_1d(t + r * 4, 1, d + r * 4, 1);  // rows: (B^T d) B
    for (size_t xi = 0; xi < 16; ++xi) out[xi * v_stride] = d[xi];
  }
}

void f32_winograd_f2x3_output__scalar(const float *m, size_t m_stride, float bias, float *y,
                                      size_t ldy, size_t rows, size_t cols) {
  const size_t tiles = (cols + 1) / 2;
  for (size_t j = 0; j < tiles; ++j) {
    float mt[16], t[8], o[4];
    for (size_t xi = 0; xi < 16; ++xi) mt[xi] = m[xi * m_stride + j];
    for (size_t c = 0; c < 4; ++c) output_1d(mt + c, 4, t + c, 4);         // columns: (2, 4)
    for (size_t r = 0; r < 2; ++r) output_1d(t + r * 4, 1, o + r * 2, 1);  // rows: (2, 2)
    const size_t w = cols - 2 * j < 2 ? cols - 2 * j : 2;
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < w; ++c) y[r * ldy + 2 * j + c] = o[r * 2 + c] + bias;
  }
}

}  // namespace scalar

namespace {
const WinogradUkernels kWinogradF2x3Ukernels[] = {
    {Isa::kScalar, "f32_winograd_f2x3__scalar", scalar::f32_winograd_f2x3_input__scalar,
     scalar::f32_winograd_f2x3_output__scalar},
    {Isa::kAvx2, "f32_winograd_f2x3__avx2", avx2::f32_winograd_f2x3_input__avx2,
     avx2::f32_winograd_f2x3_output__avx2},
};
}  // namespace

const WinogradUkernels *winograd_f2x3_ukernels_for(Isa isa) {
  if (!isa_supported(isa)) return nullptr;
  if (isa == Isa::kAvx512) isa = Isa::kAvx2;
  for (const auto &k : kWinogradF2x3Ukernels)
    if (k.isa == isa) return &k;
  return nullptr;
}

const WinogradUkernels &winograd_f2x3_ukernels() {
  const Expected<Isa> &isa = selected_isa();
  const WinogradUkernels *k =
      winograd_f2x3_ukernels_for(isa.is_ok() ? isa.value() : cpu_features().best_isa());
  return k ? *k : kWinogradF2x3Ukernels[0];
}

}  // namespace peregrine::cpu
