// f32 reductions compiled for AVX2 (f32_reduce_impl.h; contract: f32_reduce_ukernels.h).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/ukernels/f32_reduce_ukernels.h"

namespace peregrine::cpu::avx2 {
#include "backends/cpu/ukernels/f32_reduce_impl.h"
PG_REDUCE_DEFINE(avx2)
}  // namespace peregrine::cpu::avx2
