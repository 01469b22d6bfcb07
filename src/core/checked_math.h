// Overflow-checked arithmetic for every size or offset computed from model data.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace peregrine {

inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// Product of dims; nullopt on overflow or a negative dim.
inline std::optional<int64_t> checked_product(std::span<const int64_t> dims) {
  int64_t r = 1;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    if (__builtin_mul_overflow(r, d, &r)) return std::nullopt;
  }
  return r;
}

}  // namespace peregrine
