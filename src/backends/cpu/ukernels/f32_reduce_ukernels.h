// f32 reduction micro-kernels (kernels/reduce.cc), one table per ISA level. Each level is the
// same vector code of f32_reduce_impl.h compiled with that level's flags: a row folds into
// 16-lane accumulators, whose lanes are folded by halving at the end.
// Contract: any n >= 0, no alignment; NaN propagates through Max / Min (as numpy's max / min);
// the row functions return the op's identity for n == 0.
#pragma once

#include <cstddef>

#include "backends/cpu/cpu_features.h"

namespace peregrine::cpu {

// What is folded: sum of x, |x| or x^2; max; min; product.
enum class ReduceOp { kSum, kSumAbs, kSumSquare, kMax, kMin, kProd };

// The fold of x[0, n) starting from the op's identity (0, -inf, +inf or 1).
using F32ReduceRowFn = float (*)(ReduceOp op, const float* x, size_t n);
// acc[j] = acc[j] (op) x[j] for j in [0, n); acc must not overlap x.
using F32ReduceAccumulateFn = void (*)(ReduceOp op, const float* x, float* acc, size_t n);

struct ReduceUkernels {
  Isa isa;
  F32ReduceRowFn row;
  F32ReduceAccumulateFn accumulate;
};

// The table for `isa`, or nullptr when this CPU cannot run it.
const ReduceUkernels* reduce_ukernels_for(Isa isa);
// The table for selected_isa() (the best level when PEREGRINE_ISA is invalid).
const ReduceUkernels& reduce_ukernels();
// The op's identity: the value of an empty fold.
float reduce_identity(ReduceOp op);

namespace scalar {
float f32_reduce_row__scalar(ReduceOp op, const float* x, size_t n);
void f32_reduce_accumulate__scalar(ReduceOp op, const float* x, float* acc, size_t n);
}  // namespace scalar
namespace avx2 {
float f32_reduce_row__avx2(ReduceOp op, const float* x, size_t n);
void f32_reduce_accumulate__avx2(ReduceOp op, const float* x, float* acc, size_t n);
}  // namespace avx2
namespace avx512 {
float f32_reduce_row__avx512(ReduceOp op, const float* x, size_t n);
void f32_reduce_accumulate__avx512(ReduceOp op, const float* x, float* acc, size_t n);
}  // namespace avx512

}  // namespace peregrine::cpu
