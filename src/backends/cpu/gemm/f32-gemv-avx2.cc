// Small-M panel kernel, AVX2 + FMA, NR = 16 (gemm/gemv_panel_impl.h).
#include <immintrin.h>

#include "backends/cpu/gemm/f32_gemv.h"
#include "backends/cpu/gemm/gemv_panel_impl.h"

namespace peregrine::cpu::avx2 {

namespace {

struct Ymm {
  using Reg = __m256;
  static constexpr size_t kWidth = 8;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(const float *p) { return _mm256_load_ps(p); }
  static Reg broadcast(const float *p) { return _mm256_broadcast_ss(p); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static void store(float *p, Reg v) { _mm256_storeu_ps(p, v); }
};

}  // namespace

void f32_gemv_panel_16__avx2(size_t m, size_t k, const float *a, size_t lda, const float *packed_b,
                             size_t panels, size_t panel, size_t kc, float *tile) {
  gemv_panel<Ymm>(m, k, a, lda, packed_b, panels, panel, kc, tile);
}

}  // namespace peregrine::cpu::avx2
