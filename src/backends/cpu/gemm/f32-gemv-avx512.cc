// Small-M panel kernel, AVX-512F, NR = 32 (gemm/gemv_panel_impl.h).
#include <immintrin.h>

#include "backends/cpu/gemm/f32_gemv.h"
#include "backends/cpu/gemm/gemv_panel_impl.h"

namespace peregrine::cpu::avx512 {

namespace {

struct Zmm {
  using Reg = __m512;
  static constexpr size_t kWidth = 16;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load(const float *p) { return _mm512_load_ps(p); }
  static Reg broadcast(const float *p) { return _mm512_set1_ps(*p); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static void store(float *p, Reg v) { _mm512_storeu_ps(p, v); }
};

}  // namespace

void f32_gemv_panel_32__avx512(size_t m, size_t k, const float *a, size_t lda,
                               const float *packed_b, size_t panels, size_t panel, size_t kc,
                               float *tile) {
  gemv_panel<Zmm>(m, k, a, lda, packed_b, panels, panel, kc, tile);
}

}  // namespace peregrine::cpu::avx512
