// QuantizeLinear / DequantizeLinear maps with one scale and zero point, portable C++.
// Contract: q8_ukernels.h.
#include <algorithm>
#include <cmath>

#include "backends/cpu/ukernels/q8_ukernels.h"

namespace peregrine::cpu {

void q8_quantize__scalar(const float* x, size_t n, float scale, int32_t zp, bool is_signed,
                         uint8_t* y) {
  const float lo = is_signed ? -128.0f : 0.0f, hi = is_signed ? 127.0f : 255.0f;
  const float zero = static_cast<float>(zp);
  const float tiny = 0.25f * scale;  // below it: the zero point, without a denormal quotient
  for (size_t i = 0; i < n; ++i) {
    const float v = std::fabs(x[i]) < tiny ? 0.0f : x[i] / scale;
    // Rounded, then shifted by the (integer) zero point and clamped: exact in float.
    const float q = std::isnan(v) ? std::clamp(zero, lo, hi)
                                  : std::clamp(std::nearbyint(v) + zero, lo, hi);
    y[i] = static_cast<uint8_t>(static_cast<int32_t>(q));
  }
}

void q8_fake_quantize__scalar(const float* x, size_t n, float scale, int32_t zp, bool is_signed,
                              float* y) {
  // q - zp = clamp(round(x / scale), lo - zp, hi - zp): the bounds are integers, so clamping
  // before rounding is the same; then DequantizeLinear's float32 product.
  const float lo = (is_signed ? -128.0f : 0.0f) - static_cast<float>(zp);
  const float hi = (is_signed ? 127.0f : 255.0f) - static_cast<float>(zp);
  const float tiny = 0.25f * scale;
  for (size_t i = 0; i < n; ++i) {
    const float v = std::fabs(x[i]) < tiny ? 0.0f : x[i] / scale;
    // + 0.0f: a negative value rounded to zero is -0.0, where (q - zp) * scale gives +0.0.
    y[i] = ((std::isnan(v) ? 0.0f : std::nearbyint(std::clamp(v, lo, hi))) + 0.0f) * scale;
  }
}

void q8_dequantize__scalar(const uint8_t* x, size_t n, float scale, int32_t zp, bool is_signed,
                           float* y) {
  const float zero = static_cast<float>(zp);
  if (is_signed) {
    const int8_t* s = reinterpret_cast<const int8_t*>(x);
    for (size_t i = 0; i < n; ++i) y[i] = (static_cast<float>(s[i]) - zero) * scale;
  } else {
    for (size_t i = 0; i < n; ++i) y[i] = (static_cast<float>(x[i]) - zero) * scale;
  }
}

void q8_add__scalar(const uint8_t* a, const uint8_t* b, size_t n, const Q8AddParams& p,
                    uint8_t* c) {
  auto value = [](const uint8_t* x, size_t i, bool is_signed) {
    return is_signed ? static_cast<float>(static_cast<int8_t>(x[i])) : static_cast<float>(x[i]);
  };
  for (size_t i = 0; i < n; ++i) {
    const float fa = (value(a, i, p.a_signed) - p.a_zero) * p.a_scale;
    const float fb = (value(b, i, p.b_signed) - p.b_zero) * p.b_scale;
    const float q = std::nearbyint((fa + fb) / p.c_scale) + static_cast<float>(p.c_zero);
    c[i] = static_cast<uint8_t>(static_cast<int32_t>(
        std::clamp(q, static_cast<float>(p.lo), static_cast<float>(p.hi))));
  }
}

}  // namespace peregrine::cpu
