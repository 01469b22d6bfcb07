// Conversions between float and the four 8-bit float formats ONNX carries
// (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ), and between float and unpacked 4-bit
// integers. Rounding is round-to-nearest-even; `saturate` follows Cast-19.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"

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
    case DType::kFloat8E4M3FNUZ: return kE4M3FNUZ;
    case DType::kFloat8E5M2: return kE5M2;
    case DType::kFloat8E5M2FNUZ: return kE5M2FNUZ;
    default: return kE4M3FN;
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

}  // namespace peregrine
