// 8-bit MaxPool output row, portable: q8_ukernels.h.
#include <algorithm>

#include "backends/cpu/ukernels/q8_ukernels.h"

namespace peregrine::cpu {

namespace {

template <class T>
void max_pool_row(const uint8_t* const* rows, size_t nrows, const Q8MaxPoolRow& g, uint8_t* scratch,
                  uint8_t* out) {
  T* column = reinterpret_cast<T*>(scratch);  // the rows' maximum per input column
  for (size_t x = 0; x < g.w; ++x) {
    T v = reinterpret_cast<const T*>(rows[0])[x];
    for (size_t r = 1; r < nrows; ++r) v = std::max(v, reinterpret_cast<const T*>(rows[r])[x]);
    column[x] = v;
  }
  T* y = reinterpret_cast<T*>(out);
  for (size_t ox = 0; ox < g.ow; ++ox) {
    bool any = false;
    T v = 0;
    for (size_t j = 0; j < g.kw; ++j) {
      const size_t at = ox * g.sw + j * g.dw;  // the column plus pl
      if (at < g.pl || at - g.pl >= g.w) continue;
      v = any ? std::max(v, column[at - g.pl]) : column[at - g.pl];
      any = true;
    }
    y[ox] = v;
  }
}

}  // namespace

void q8_max_pool_row__scalar(const uint8_t* const* rows, size_t nrows, const Q8MaxPoolRow& g,
                             uint8_t* scratch, uint8_t* out) {
  if (g.is_signed)
    max_pool_row<int8_t>(rows, nrows, g, scratch, out);
  else
    max_pool_row<uint8_t>(rows, nrows, g, scratch, out);
}

}  // namespace peregrine::cpu
