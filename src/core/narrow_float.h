// Conversions between float and the narrow formats ONNX carries: the four 8-bit float
// formats (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ), the exponent-only E8M0, the 4-bit float E2M1,
// and unpacked 4-bit and 2-bit integers. Rounding is round-to-nearest-even unless said;
// `saturate` follows Cast-19.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "peregrine/dtype.h"

namespace peregrine {

// The parameters that tell the four float8 formats apart.
struct Float8Format {
  int mantissa_bits;
  int exponent_bias;
  bool has_infinity;   // E5M2 only; the others spend that code on finite values or NaN
  bool unsigned_zero;  // the *FNUZ formats: no -0, and 0x80 is the only NaN
  float max_value;     // largest finite magnitude
  uint8_t max_code;    // its code (without sign)
};

inline constexpr Float8Format kE4M3FN{3, 7, false, false, 448.0f, 0x7E};
inline constexpr Float8Format kE4M3FNUZ{3, 8, false, true, 240.0f, 0x7F};
inline constexpr Float8Format kE5M2{2, 15, true, false, 57344.0f, 0x7B};
inline constexpr Float8Format kE5M2FNUZ{2, 16, false, true, 57344.0f, 0x7F};

inline const Float8Format& float8_format(DType t) {
  switch (t) {
    case DType::kFloat8E4M3FNUZ:
      return kE4M3FNUZ;
    case DType::kFloat8E5M2:
      return kE5M2;
    case DType::kFloat8E5M2FNUZ:
      return kE5M2FNUZ;
    default:
      return kE4M3FN;
  }
}

inline uint8_t float8_nan_code(const Float8Format& f, bool negative) {
  if (f.unsigned_zero) return 0x80;
  return static_cast<uint8_t>((negative ? 0x80 : 0) | 0x7F);
}

// Rounds x to the format. With saturate, out-of-range values and infinities become
// +-max (as onnx's reference does for every format); without it they become
// infinity (E5M2) or NaN.
inline uint8_t float_to_float8(float x, const Float8Format& f, bool saturate) {
  bool negative = std::signbit(x);
  uint8_t sign = negative ? 0x80 : 0;
  if (std::isnan(x)) return float8_nan_code(f, negative);
  auto overflow = [&]() -> uint8_t {
    if (saturate) return sign | f.max_code;
    if (f.has_infinity) return sign | 0x7C;
    return float8_nan_code(f, negative);
  };
  if (std::isinf(x)) return overflow();
  double a = std::fabs(static_cast<double>(x));
  if (a == 0.0) return f.unsigned_zero ? 0 : sign;
  int exponent;  // a = m * 2^exponent with m in [0.5, 1)
  std::frexp(a, &exponent);
  int unbiased = exponent - 1;  // a in [2^unbiased, 2^(unbiased+1))
  int min_normal = 1 - f.exponent_bias;
  // Quantum of the target grid at this magnitude (subnormals share the smallest).
  int quantum_exp = (unbiased < min_normal ? min_normal : unbiased) - f.mantissa_bits;
  double steps = std::nearbyint(std::ldexp(a, -quantum_exp));  // ties to even
  double rounded = std::ldexp(steps, quantum_exp);
  if (rounded > f.max_value) return overflow();
  if (steps == 0) return f.unsigned_zero ? 0 : sign;
  int code;
  if (unbiased < min_normal) {
    code = static_cast<int>(steps);  // subnormal; steps == 2^M is the smallest normal's code
  } else {
    // steps in [2^M, 2^(M+1)]: a carry into the exponent lands on the right code too.
    code = ((unbiased + f.exponent_bias) << f.mantissa_bits) +
           (static_cast<int>(steps) - (1 << f.mantissa_bits));
  }
  return static_cast<uint8_t>(sign | code);
}

inline float float8_to_float(uint8_t code, const Float8Format& f) {
  bool negative = (code & 0x80) != 0;
  int magnitude = code & 0x7F;
  if (f.unsigned_zero) {
    if (code == 0x80) return std::nanf("");
  } else if (f.has_infinity) {
    if ((magnitude >> f.mantissa_bits) == (1 << (7 - f.mantissa_bits)) - 1) {
      if ((magnitude & ((1 << f.mantissa_bits) - 1)) != 0) return std::nanf("");
      return negative ? -INFINITY : INFINITY;
    }
  } else if (magnitude == 0x7F) {
    return std::nanf("");
  }
  int exponent_field = magnitude >> f.mantissa_bits;
  int mantissa = magnitude & ((1 << f.mantissa_bits) - 1);
  double value;
  if (exponent_field == 0) {
    value = std::ldexp(static_cast<double>(mantissa), 1 - f.exponent_bias - f.mantissa_bits);
  } else {
    value = std::ldexp(static_cast<double>(mantissa + (1 << f.mantissa_bits)),
                       exponent_field - f.exponent_bias - f.mantissa_bits);
  }
  return static_cast<float>(negative ? -value : value);
}

// 4-bit integers: round half to even, then clip (onnx's float32_to_4bit_unpacked).
inline int8_t double_to_int4(double x) {
  if (std::isnan(x)) return 0;
  double r = std::nearbyint(std::fmin(std::fmax(x, -8.0), 7.0));
  return static_cast<int8_t>(r);
}
inline uint8_t double_to_uint4(double x) {
  if (std::isnan(x)) return 0;
  double r = std::nearbyint(std::fmin(std::fmax(x, 0.0), 15.0));
  return static_cast<uint8_t>(r);
}

// E2M1 (float4e2m1): sign, 2 exponent bits (bias 1), 1 mantissa bit; magnitudes 0, 0.5, 1,
// 1.5, 2, 3, 4, 6; no infinity or NaN.
inline float float4e2m1_to_float(uint8_t code) {
  static constexpr float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMagnitude[code & 0x7];
  return (code & 0x8) ? -m : m;
}

// Rounds to the nearest E2M1 value (ties to the even code); out-of-range values and
// infinities saturate to +-6. The format has no NaN: NaN becomes a zero of the opposite
// sign, as onnx's reference (ml_dtypes) gives.
inline uint8_t float_to_float4e2m1(float x) {
  if (std::isnan(x)) return std::signbit(x) ? 0x0 : 0x8;
  const uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
  const float a = std::fabs(x);
  if (a >= 6.0f) return static_cast<uint8_t>(sign | 0x7);
  uint8_t best = 0;
  for (uint8_t c = 1; c < 8; ++c) {
    const float d_best = std::fabs(a - float4e2m1_to_float(best));
    const float d = std::fabs(a - float4e2m1_to_float(c));
    if (d < d_best || (d == d_best && (c & 1) == 0)) best = c;
  }
  return static_cast<uint8_t>(sign | best);
}

// E8M0 (float8e8m0): 2^(code - 127); 0xFF is NaN; no sign, no zero.
inline float float8e8m0_to_float(uint8_t code) {
  if (code == 0xFF) return std::nanf("");
  return std::ldexp(1.0f, static_cast<int>(code) - 127);
}

// The exponent of float x as an E8M0 code, as Cast-24 defines it: the float's sign is ignored;
// `round_mode` "up" rounds any fraction up, "down" drops it, "nearest" rounds half up on the
// mantissa; with saturate an increment past the largest code is dropped; NaN and infinity give
// 0xFF.
enum class E8M0Rounding { kUp, kDown, kNearest };
inline uint8_t float_to_float8e8m0(float x, bool saturate, E8M0Rounding rounding) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  uint32_t exponent = (bits >> 23) & 0xFF;
  if (exponent == 0xFF) return 0xFF;
  bool round_up = false;
  if (rounding == E8M0Rounding::kUp) {
    round_up = (bits & 0x7FFFFF) != 0;
  } else if (rounding == E8M0Rounding::kNearest) {
    const bool guard = bits & 0x400000, rest = bits & 0x3FFFFF;
    round_up = guard && (rest || exponent > 0);
  }
  if (round_up && !(saturate && exponent == 0xFE)) ++exponent;
  return static_cast<uint8_t>(exponent);
}

// Float to a 4-bit or 2-bit integer by Cast's rule for integer targets: truncation toward
// zero. An out-of-range result is undefined in ONNX; it gives 0 here, as onnx's reference
// (ml_dtypes) does.
inline int8_t float_to_small_int(double x, int bits, bool is_signed) {
  if (std::isnan(x)) return 0;
  const double t = std::trunc(x);
  const double lo = is_signed ? -std::ldexp(1.0, bits - 1) : 0.0;
  const double hi = is_signed ? std::ldexp(1.0, bits - 1) - 1 : std::ldexp(1.0, bits) - 1;
  return t < lo || t > hi ? 0 : static_cast<int8_t>(t);
}

// An integer to a 4-bit or 2-bit integer: the low bits kept (two's complement for signed).
inline int8_t wrap_small_int(int64_t v, int bits, bool is_signed) {
  const int64_t mask = (int64_t{1} << bits) - 1;
  int64_t low = v & mask;
  if (is_signed && (low >> (bits - 1))) low -= int64_t{1} << bits;
  return static_cast<int8_t>(low);
}

}  // namespace peregrine
