// Integer helpers for tile counts and padded sizes. Operands are non-negative and b > 0; sizes
// that come from model data are checked for overflow first (core/checked_math.h).
#pragma once

#include <cstdint>

namespace peregrine {

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

}  // namespace peregrine
