// Winograd F(4x4, 3x3) tile transforms (Lavin & Gray's points 0, +-1, +-2 and
// infinity), one table per ISA level:
//   scalar (ukernels/f32-winograd-f4x3-scalar.cc): plain loops over the tiles
//   of a row. avx2   (ukernels/f32-winograd-f4x3-avx2.cc): 8 tiles per vector
//   lane group.
//
//   input:  V = B^T d B   (d: a 6x6 input tile; 36 values, index xi = 6 * row +
//   column) output: Y = A^T M A   (M: the 36 products of one tile; Y: the 4x4
//   output tile) with  B^T = [4  0 -5  0 1 0]     A^T = [1 1  1 1  1 0]
//               [0 -4 -4  1 1 0]           [0 1 -1 2 -2 0]
//               [0  4 -4 -1 1 0]           [0 1  1 4  4 0]
//               [0 -2 -1  2 1 0]           [0 1 -1 8 -8 1]
//               [0  2 -1 -2 1 0]
//               [0  4  0 -5 0 1]
// (the weight side, U = G g G^T, is done once in double at prepare time; see
// kernels/conv_winograd_f4x3.h).
#pragma once

#include <cstddef>

#include "backends/cpu/cpu_features.h"

namespace peregrine::cpu {

// Input transform of one row of `tiles` 6x6 tiles of one channel (tile j starts
// at column 4 j).
//   pq: the row's 6 input rows, split by column phase: pq[(r * 4 + p) * wq + i]
//   is input
//       (row r, column 4 i + p), zeros in the padding; wq >= round_up(tiles, 8)
//       + 1, and every value there is finite (kernels may read whole vectors
//       past `tiles`).
//   v:  written straight in the GEMM's packed-B panel layout (f32_gemm.h
//   packed_b_offset), so
//       the GEMM reads V without packing it again: tile j is column c = col0 +
//       j, and its element xi goes to v[xi * v_stride + (c / nr) * panel_stride
//       + c % nr], for j < tiles only (nr >= 8; nr >= col0 + tiles with any
//       panel_stride gives a plain row).
using F32WinogradInputFn = void (*)(const float *pq, size_t wq, size_t tiles, float *v,
                                    size_t v_stride, size_t col0, size_t nr, size_t panel_stride);
// Output transform of one row of tiles of one output channel: Y = A^T M A +
// bias.
//   m: element xi of tile j is m[xi * m_stride + j], j < tiles = ceil(cols /
//   4); kernels may
//      read (and ignore) m[xi * m_stride + j] up to j < round_up(tiles, 8), so
//      the caller leaves that much readable memory after the last row.
//   y: output rows [0, rows) (rows <= 4) and columns [0, cols), row stride ldy;
//   tile j covers
//      columns 4 j .. 4 j + 3; nothing outside that rectangle is written.
using F32WinogradOutputFn = void (*)(const float *m, size_t m_stride, float bias, float *y,
                                     size_t ldy, size_t rows, size_t cols);

struct WinogradUkernels {
  Isa isa;
  const char *name;  // "f32_winograd_f4x3__avx2", "f32_winograd_f2x3__scalar"
  F32WinogradInputFn input;
  F32WinogradOutputFn output;
};

namespace scalar {
void f32_winograd_f4x3_input__scalar(const float *pq, size_t wq, size_t tiles, float *v,
                                     size_t v_stride, size_t col0, size_t nr, size_t panel_stride);
void f32_winograd_f4x3_output__scalar(const float *m, size_t m_stride, float bias, float *y,
                                      size_t ldy, size_t rows, size_t cols);
}  // namespace scalar
namespace avx2 {
void f32_winograd_f4x3_input__avx2(const float *pq, size_t wq, size_t tiles, float *v,
                                   size_t v_stride, size_t col0, size_t nr, size_t panel_stride);
void f32_winograd_f4x3_output__avx2(const float *m, size_t m_stride, float bias, float *y,
                                    size_t ldy, size_t rows, size_t cols);
}  // namespace avx2

// The table for `isa` (AVX-512 machines use the AVX2 one), or nullptr when this
// CPU cannot run it.
const WinogradUkernels *winograd_f4x3_ukernels_for(Isa isa);
// The table for selected_isa() (the best level when PEREGRINE_ISA is invalid).
const WinogradUkernels &winograd_f4x3_ukernels();

// Winograd F(2x2, 3x3) tile transforms (points 0, +-1 and infinity; kernels/conv_winograd_f2x3.h),
// same function types and table as F(4x4) with 4x4 input tiles, 2x2 output tiles:
//   scalar (ukernels/f32-winograd-f2x3-scalar.cc), avx2 (ukernels/f32-winograd-f2x3-avx2.cc:
//   8 tiles per vector lane group).
//
//   input:  V = B^T d B  (d: a 4x4 input tile; 16 values, xi = 4 * row + column)
//   output: Y = A^T M A  (M: the 16 products of one tile; Y: the 2x2 output tile)
//   with    B^T = [1  0 -1  0]     A^T = [1 1  1  0]
//                 [0  1  1  0]           [0 1 -1 -1]
//                 [0 -1  1  0]
//                 [0  1  0 -1]
// The contract is F(4x4)'s above with these changes:
//   input:  tile j starts at column 2 j; pq holds the tile row's 4 input rows split by column
//           parity: pq[(r * 2 + p) * wq + i] is input (row r, column 2 i + p), zeros in the
//           padding; wq >= round_up(tiles, 8) + 1, all finite. Tile j's 16 values go to column
//           col0 + j of the 16 V_xi (same panel addressing).
//   output: xi < 16; rows <= 2; tile j covers columns 2 j, 2 j + 1 (j < tiles = ceil(cols / 2));
//           kernels may read m up to j < round_up(tiles, 8).
namespace scalar {
void f32_winograd_f2x3_input__scalar(const float *pq, size_t wq, size_t tiles, float *v,
                                     size_t v_stride, size_t col0, size_t nr, size_t panel_stride);
void f32_winograd_f2x3_output__scalar(const float *m, size_t m_stride, float bias, float *y,
                                      size_t ldy, size_t rows, size_t cols);
}  // namespace scalar
namespace avx2 {
void f32_winograd_f2x3_input__avx2(const float *pq, size_t wq, size_t tiles, float *v,
                                   size_t v_stride, size_t col0, size_t nr, size_t panel_stride);
void f32_winograd_f2x3_output__avx2(const float *m, size_t m_stride, float bias, float *y,
                                    size_t ldy, size_t rows, size_t cols);
}  // namespace avx2

// The F(2x2) table for `isa` (AVX-512 machines use the AVX2 one), or nullptr when this CPU
// cannot run it.
const WinogradUkernels *winograd_f2x3_ukernels_for(Isa isa);
// The F(2x2) table for selected_isa() (the best level when PEREGRINE_ISA is invalid).
const WinogradUkernels &winograd_f2x3_ukernels();

}  // namespace peregrine::cpu
