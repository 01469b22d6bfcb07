// The mask of the first n of 16 lanes (none for n <= 0, all for n >= 16): the tails and edge
// blocks of AVX-512 loops. Inline, in namespace avx512, for files compiled with AVX-512 flags
// only.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace peregrine::cpu::avx512 {

inline __mmask16 first_lanes(int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xFFFFu : n <= 0 ? 0u : (1u << n) - 1u);
}

}  // namespace peregrine::cpu::avx512
