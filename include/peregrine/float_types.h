// Storage types for the narrow floating formats ONNX carries. Each converts to
// and from float, so reference kernels compute in float and round on store.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace peregrine {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE 754 binary16, round-to-nearest-even.
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  Float16(float f) : bits(from_float(f)) {}          // NOLINT: implicit like a builtin float
  operator float() const { return to_float(bits); }  // NOLINT

  static uint16_t from_float(float f) {
    uint32_t x = float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) return sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u);
    if (absx >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: infinity
    if (absx < 0x38800000u) {                        // subnormal half or zero
      float a = bits_float(absx) * 16777216.0f;      // scale by 2^24: the integer mantissa
      return sign | static_cast<uint16_t>(std::nearbyint(a));
    }
    uint32_t mant = absx & 0x7fffffu;
    uint32_t exp = (absx >> 23) - 112;
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  static float to_float(uint16_t h) {
    uint32_t sign = (h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
      float v = static_cast<float>(mant) / 16777216.0f;
      return sign ? -v : v;
    }
    if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
    return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
  }
};

// bfloat16: the top half of a float, round-to-nearest-even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(from_float(f)) {}                                        // NOLINT
  operator float() const { return bits_float(static_cast<uint32_t>(bits) << 16); }  // NOLINT

  static uint16_t from_float(float f) {
    uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
    uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>((x + rounding) >> 16);
  }
};

// The four 8-bit float formats (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ) are stored as
// raw bytes; conversions live in float8.h and take a saturate flag as Cast does.

}  // namespace peregrine
