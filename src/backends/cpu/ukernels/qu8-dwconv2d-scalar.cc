// Depthwise 2-D convolution of one uint8 channel with int8 taps, portable C++.
// Contract: q8_ukernels.h.
#include <algorithm>
#include <cmath>

#include "backends/cpu/ukernels/q8_ukernels.h"

namespace peregrine::cpu {

void qu8_dwconv2d__scalar(const int16_t* plane, const int8_t* w, const Qu8DwconvGeometry& g,
                          int32_t bias, float scale, const Qu8Output& out, uint8_t* y) {
  for (size_t oy = 0; oy < g.oh; ++oy)
    for (size_t ox = 0; ox < g.ow; ++ox) {
      int32_t acc = bias;
      for (size_t i = 0; i < g.kh; ++i) {
        const int16_t* row = plane + (oy * g.sh + i * g.dh) * g.pw + ox * g.sw;
        for (size_t j = 0; j < g.kw; ++j) acc += w[i * g.kw + j] * row[j * g.dw];
      }
      const float v = static_cast<float>(acc) * scale;
      const int32_t q = static_cast<int32_t>(std::nearbyint(v)) + out.zero_point;
      y[oy * g.ow + ox] = static_cast<uint8_t>(std::clamp(q, out.lo, out.hi));
    }
}

void qu8_widen__scalar(const uint8_t* src, size_t n, int32_t zero, int16_t* dst) {
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<int16_t>(src[i] - zero);
}

void u8_gather_stride2__scalar(const uint8_t* src, size_t n, uint8_t* dst) {
  for (size_t i = 0; i < n; ++i) dst[i] = src[2 * i];
}

}  // namespace peregrine::cpu
