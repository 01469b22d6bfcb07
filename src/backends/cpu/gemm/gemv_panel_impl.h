// The small-M panel kernel (contract: gemm/f32_gemv.h), written once over a vector type: each
// including file (gemm/f32-gemv-<isa>.cc, built with its ISA's flags) supplies `V` with
//   Reg, kWidth (floats per Reg), zero(), load(p) (aligned), broadcast(p), fmadd(a, b, c),
//   add(a, b), store(p, v) (unaligned)
// and gets its own internal-linkage copy. NR = 2 * kWidth: each K step loads the panel's NR floats
// once (two vectors) and does one broadcast + two FMAs per row of A; m <= 2 alternates two
// accumulator sets so the FMA chains do not serialize on their latency.
#pragma once

#include <algorithm>
#include <cstddef>

namespace peregrine::cpu {
namespace {

template <typename V, int M, int kSets>
void gemv_panel_rows(size_t k, const float *a, size_t lda, const float *packed_b, size_t panels,
                     size_t panel, size_t kc, float *tile) {
  constexpr size_t kNr = 2 * V::kWidth;
  using Reg = typename V::Reg;
  Reg acc[kSets][M][2];
  for (int s = 0; s < kSets; ++s)
    for (int i = 0; i < M; ++i) acc[s][i][0] = acc[s][i][1] = V::zero();
  for (size_t p0 = 0; p0 < k; p0 += kc) {
    const size_t kcur = std::min(kc, k - p0);
    const float *b = packed_b + p0 * panels * kNr + panel * kcur * kNr;  // (kcur, NR)
    const float *ap = a + p0;
    size_t p = 0;
    for (; p + kSets <= kcur; p += kSets) {
      for (int s = 0; s < kSets; ++s) {
        const Reg b0 = V::load(b + (p + s) * kNr), b1 = V::load(b + (p + s) * kNr + V::kWidth);
        for (int i = 0; i < M; ++i) {
          const Reg av = V::broadcast(ap + i * lda + p + s);
          acc[s][i][0] = V::fmadd(av, b0, acc[s][i][0]);
          acc[s][i][1] = V::fmadd(av, b1, acc[s][i][1]);
        }
      }
    }
    for (; p < kcur; ++p) {
      const Reg b0 = V::load(b + p * kNr), b1 = V::load(b + p * kNr + V::kWidth);
      for (int i = 0; i < M; ++i) {
        const Reg av = V::broadcast(ap + i * lda + p);
        acc[0][i][0] = V::fmadd(av, b0, acc[0][i][0]);
        acc[0][i][1] = V::fmadd(av, b1, acc[0][i][1]);
      }
    }
  }
  for (int i = 0; i < M; ++i) {
    Reg lo = acc[0][i][0], hi = acc[0][i][1];
    for (int s = 1; s < kSets; ++s) {
      lo = V::add(lo, acc[s][i][0]);
      hi = V::add(hi, acc[s][i][1]);
    }
    V::store(tile + i * kNr, lo);
    V::store(tile + i * kNr + V::kWidth, hi);
  }
}

// m rows of A (1 <= m <= kGemvMaxM = 3) against one panel.
template <typename V>
void gemv_panel(size_t m, size_t k, const float *a, size_t lda, const float *packed_b,
                size_t panels, size_t panel, size_t kc, float *tile) {
  switch (m) {
    case 1:
      return gemv_panel_rows<V, 1, 2>(k, a, lda, packed_b, panels, panel, kc, tile);
    case 2:
      return gemv_panel_rows<V, 2, 2>(k, a, lda, packed_b, panels, panel, kc, tile);
    default:  // m == 3 (kGemvMaxM)
      return gemv_panel_rows<V, 3, 1>(k, a, lda, packed_b, panels, panel, kc, tile);
  }
}

}  // namespace
}  // namespace peregrine::cpu
