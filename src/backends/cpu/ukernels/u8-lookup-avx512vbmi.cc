// Byte table lookup, AVX-512 VBMI: the 256-byte table lives in four registers; vpermi2b looks 64
// bytes up in each 128-byte half (it reads an index's low seven bits) and the index's top bit
// picks the half. The tail runs under a mask. Contract: q8_ukernels.h.
#include <immintrin.h>

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backends/cpu/ukernels/q8_ukernels.h"

namespace peregrine::cpu::avx512vbmi {

void u8_lookup__avx512vbmi(const uint8_t* x, size_t n, const uint8_t* table, uint8_t* y) {
  const __m512i t0 = _mm512_loadu_si512(table);
  const __m512i t1 = _mm512_loadu_si512(table + 64);
  const __m512i t2 = _mm512_loadu_si512(table + 128);
  const __m512i t3 = _mm512_loadu_si512(table + 192);
  auto lookup = [&](__m512i idx) {
    const __m512i lo = _mm512_permutex2var_epi8(t0, idx, t1);
    const __m512i hi = _mm512_permutex2var_epi8(t2, idx, t3);
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi);
  };
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    const __m512i a = _mm512_loadu_si512(x + i);
    const __m512i b = _mm512_loadu_si512(x + i + 64);
    _mm512_storeu_si512(y + i, lookup(a));
    _mm512_storeu_si512(y + i + 64, lookup(b));
  }
  for (; i < n; i += 64) {
    const size_t left = n - i;
    const __mmask64 m = left >= 64 ? ~__mmask64{0} : ((__mmask64{1} << left) - 1);
    _mm512_mask_storeu_epi8(y + i, m, lookup(_mm512_maskz_loadu_epi8(m, x + i)));
  }
}

}  // namespace peregrine::cpu::avx512vbmi
