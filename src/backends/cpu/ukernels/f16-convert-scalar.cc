// float16 <-> float32 one element at a time (peregrine/float_types.h): the reference's rounding.
#include "backends/cpu/ukernels/f16_convert_ukernels.h"
#include "peregrine/float_types.h"

namespace peregrine::cpu::scalar {

void f16_to_f32(const uint16_t* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = Float16::to_float(x[i]);
}

void f32_to_f16(const float* x, uint16_t* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = Float16::from_float(x[i]);
}

}  // namespace peregrine::cpu::scalar
