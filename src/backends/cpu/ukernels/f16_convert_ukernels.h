// float16 <-> float32 conversion maps (Cast). Rounding to float16 is to nearest, ties to even,
// overflow to infinity, as IEEE conversion; NaN stays NaN. n elements, any alignment.
#pragma once

#include <cstddef>
#include <cstdint>

namespace peregrine::cpu {

using F16ToF32Fn = void (*)(const uint16_t* x, float* y, size_t n);
using F32ToF16Fn = void (*)(const float* x, uint16_t* y, size_t n);

namespace scalar {
void f16_to_f32(const uint16_t* x, float* y, size_t n);
void f32_to_f16(const float* x, uint16_t* y, size_t n);
}  // namespace scalar
namespace avx512 {
void f16_to_f32(const uint16_t* x, float* y, size_t n);
void f32_to_f16(const float* x, uint16_t* y, size_t n);
}  // namespace avx512

}  // namespace peregrine::cpu
