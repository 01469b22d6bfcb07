// f32 reductions for the baseline ISA (f32_reduce_impl.h), the identities and the per-ISA table.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backends/cpu/ukernels/f32_reduce_ukernels.h"

namespace peregrine::cpu {

float reduce_identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax: return -std::numeric_limits<float>::infinity();
    case ReduceOp::kMin: return std::numeric_limits<float>::infinity();
    case ReduceOp::kProd: return 1.0f;
    default: return 0.0f;
  }
}

namespace scalar {
#include "backends/cpu/ukernels/f32_reduce_impl.h"
PG_REDUCE_DEFINE(scalar)
}  // namespace scalar

namespace {
const ReduceUkernels kScalar{Isa::kScalar, scalar::f32_reduce_row__scalar,
                             scalar::f32_reduce_accumulate__scalar};
const ReduceUkernels kAvx2{Isa::kAvx2, avx2::f32_reduce_row__avx2,
                           avx2::f32_reduce_accumulate__avx2};
const ReduceUkernels kAvx512{Isa::kAvx512, avx512::f32_reduce_row__avx512,
                             avx512::f32_reduce_accumulate__avx512};
}  // namespace

const ReduceUkernels* reduce_ukernels_for(Isa isa) {
  if (!isa_supported(isa)) return nullptr;
  return isa == Isa::kScalar ? &kScalar : isa == Isa::kAvx2 ? &kAvx2 : &kAvx512;
}

const ReduceUkernels& reduce_ukernels() {
  const Expected<Isa>& isa = selected_isa();
  return *reduce_ukernels_for(isa.is_ok() ? isa.value() : cpu_features().best_isa());
}

}  // namespace peregrine::cpu
