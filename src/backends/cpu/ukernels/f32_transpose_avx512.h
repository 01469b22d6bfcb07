// In-register 16x16 transpose of floats, AVX-512F. Inline, in namespace avx512, for files
// compiled with AVX-512 flags only.
#pragma once

#include <immintrin.h>

namespace peregrine::cpu::avx512 {

// In-register transpose of the 16x16 block r (r[i] = row i): afterwards r[j] holds column j.
inline void transpose16x16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {  // per 128-bit lane: rows i, i+1 interleaved
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  // u[4j + c], lane l: column 4l + c of rows 4j .. 4j + 3.
  for (int j = 0; j < 16; j += 4) {
    u[j] = _mm512_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[j + 1] = _mm512_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[j + 2] = _mm512_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[j + 3] = _mm512_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // Column 4l + c = lane l of u[c], u[4 + c], u[8 + c], u[12 + c]: a 4x4 transpose of lanes.
  for (int c = 0; c < 4; ++c) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44);
    const __m512 v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE);
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44);
    const __m512 v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xEE);
    r[c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    r[4 + c] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
    r[8 + c] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
  }
}

}  // namespace peregrine::cpu::avx512
