// uint8 x int8 GEMM micro-kernel, portable C++: MR = 4, NR = 8, int32 accumulators.
// The path for CPUs (or PEREGRINE_ISA levels) without AVX-512 VNNI. Contract: q8_ukernels.h.
#include <algorithm>
#include <cmath>

#include "backends/cpu/ukernels/q8_ukernels.h"

namespace peregrine::cpu {

namespace {
constexpr int kMr = kQu8ScalarMr, kNr = kQu8ScalarNr;
}  // namespace

void qu8_gemm_ukernel_4x8__scalar(size_t rows, size_t cols, size_t kq, const uint32_t* a,
                                  const uint32_t* b, uint8_t* c, size_t ldc, const int32_t* bias,
                                  const float* scale, const Qu8Output& out) {
  int32_t acc[kMr][kNr] = {};
  for (size_t q = 0; q < kq; ++q, a += kMr, b += kNr)
    for (int i = 0; i < kMr; ++i)
      for (int j = 0; j < kNr; ++j)
        for (int byte = 0; byte < 4; ++byte) {
          const int32_t w = static_cast<int8_t>(a[i] >> (8 * byte));
          const int32_t x = static_cast<uint8_t>(b[j] >> (8 * byte));
          acc[i][j] += w * x;
        }
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) {
      const float v = static_cast<float>(acc[i][j] + bias[i]) * scale[i];
      const int32_t q = static_cast<int32_t>(std::nearbyint(v)) + out.zero_point;
      const int32_t clamped = std::clamp(q, out.lo, out.hi);
      c[i * ldc + j] = static_cast<uint8_t>(clamped);  // two's complement byte for int8
    }
}

void qu8_pack_b__scalar(const uint8_t* src, size_t ld, size_t k, size_t cols, size_t nr,
                        uint32_t* dst) {
  for (size_t p = 0; p < k; p += 4, dst += nr)
    for (size_t j = 0; j < nr; ++j) {
      uint32_t quad = 0;
      for (size_t byte = 0; byte < 4 && p + byte < k; ++byte)
        if (j < cols) quad |= static_cast<uint32_t>(src[(p + byte) * ld + j]) << (8 * byte);
      dst[j] = quad;
    }
}

void qu8_pack_b_8__scalar(const uint8_t* src, size_t ld, size_t k, size_t cols, uint32_t* dst) {
  qu8_pack_b__scalar(src, ld, k, cols, kNr, dst);
}

namespace {

// The panel of a convolution's B rows (channel, tap) in quads; rows past k are zero.
// byte(c, tap, j) gives column j of row (c, tap).
template <typename ByteFn>
void pack_conv_quads(size_t k, size_t taps, size_t nr, uint32_t* dst, ByteFn byte_at) {
  for (size_t p = 0; p < k; p += 4, dst += nr)
    for (size_t j = 0; j < nr; ++j) {
      uint32_t quad = 0;
      for (size_t byte = 0; byte < 4 && p + byte < k; ++byte)
        quad |= static_cast<uint32_t>(byte_at((p + byte) / taps, (p + byte) % taps, j))
                << (8 * byte);
      dst[j] = quad;
    }
}

}  // namespace

void qu8_pack_conv_b__scalar(const Qu8ConvPanel& panel, size_t k, size_t nr, uint32_t* dst) {
  pack_conv_quads(k, panel.taps, nr, dst, [&](size_t c, size_t tap, size_t j) -> uint8_t {
    return panel.inside[tap] >> j & 1u
               ? panel.image[static_cast<ptrdiff_t>(c * panel.plane + j) + panel.offset[tap]]
               : panel.pad;
  });
}

void qu8_pack_conv_b_8__scalar(const Qu8ConvPanel& panel, size_t k, uint32_t* dst) {
  qu8_pack_conv_b__scalar(panel, k, kNr, dst);
}

void qu8_pack_conv_strided_b__scalar(const Qu8ConvStridedPanel& panel, size_t k, size_t nr,
                                     uint32_t* dst) {
  pack_conv_quads(k, panel.taps, nr, dst, [&](size_t c, size_t tap, size_t j) -> uint8_t {
    const uint8_t* plane = panel.image + c * panel.plane;
    for (size_t s = 0; s < panel.segments; ++s) {
      const Qu8ConvPiece& piece = panel.pieces[tap * panel.segments + s];
      if (piece.lanes >> j & 1u)
        return plane[static_cast<ptrdiff_t>(j * panel.stride) + piece.offset];
    }
    return panel.pad;
  });
}

void qu8_pack_conv_strided_b_8__scalar(const Qu8ConvStridedPanel& panel, size_t k, uint32_t* dst) {
  qu8_pack_conv_strided_b__scalar(panel, k, kNr, dst);
}

}  // namespace peregrine::cpu
