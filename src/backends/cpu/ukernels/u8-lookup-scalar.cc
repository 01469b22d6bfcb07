// Byte table lookup, portable. Contract: q8_ukernels.h.
#include "backends/cpu/ukernels/q8_ukernels.h"

namespace peregrine::cpu {

void u8_lookup__scalar(const uint8_t* x, size_t n, const uint8_t* table, uint8_t* y) {
  for (size_t i = 0; i < n; ++i) y[i] = table[x[i]];
}

}  // namespace peregrine::cpu
