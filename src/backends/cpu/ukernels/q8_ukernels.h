// Integer micro-kernels: uint8 x int8 GEMM with int32 accumulation and requantization to 8 bits,
// and the (de)quantization maps of QuantizeLinear / DequantizeLinear.
//
// GEMM operands are 8-bit in K quads: one uint32 holds four consecutive k of a row of A (int8)
// or of a column of B (uint8), k = 4q in its lowest byte; K is padded to a multiple of 4 with
// zeros (A's zeros make the padding's products zero whatever B holds there).
//   packed A micro-panel: (kq, MR) uint32: for each quad q, the MR rows' quads, contiguous.
//   packed B micro-panel: (kq, NR) uint32: for each quad q, the NR columns' quads, contiguous,
//     64-byte aligned.
// Contract: acc(rows, cols) = A(rows, 4 kq) * B(4 kq, cols) exactly in int32, rows <= MR,
// cols <= NR; then per row i of the tile, out = clamp(round((acc + bias[i]) * scale[i]) +
// zero_point, lo, hi), rounding half to even (as QuantizeLinear), stored as uint8 or int8 into
// rows x cols of C (row stride ldc bytes). The tile is computed whole (panels are zero-padded).
// Overflow: |acc| < K * 255 * 128, which stays inside int32 for K < 65794.
#pragma once

#include <cstddef>
#include <cstdint>

namespace peregrine::cpu {

struct Qu8Output {
  int32_t zero_point = 0;
  int32_t lo = 0, hi = 255;  // the output type's range, lo raised by a fused Relu
  bool is_signed = false;    // int8 output (else uint8)
};

using Qu8GemmUkernelFn = void (*)(size_t rows, size_t cols, size_t kq, const uint32_t* a,
                                  const uint32_t* b, uint8_t* c, size_t ldc,
                                  const int32_t* bias, const float* scale, const Qu8Output& out);
// B panel from row-major uint8: row p (p < k) at src + p * ld, its first `cols` (<= NR) bytes;
// rows past k and columns past cols are zero. dst: (ceil(k / 4), NR) uint32.
using Qu8PackBFn = void (*)(const uint8_t* src, size_t ld, size_t k, size_t cols, uint32_t* dst);

// B panels of a convolution's im2col matrix packed straight from the image: row r of B is
// (channel r / taps, tap r % taps), column t an output pixel (first + t). Two forms:
//
// Where output pixel p reads input pixel p + a per-tap offset (strides 1, output as wide as
// the input), one masked load per row:
struct Qu8ConvPanel {
  const uint8_t* image;     // channel 0's input pixel `first` (offsets are added to it)
  size_t plane;             // bytes between channels (h * w)
  size_t taps;              // kh * kw
  const ptrdiff_t* offset;  // per tap: (i * dh - pad_top) * w + j * dw - pad_left
  const uint32_t* inside;   // per tap: bit t set where column t reads inside the image
  uint8_t pad;              // the value outside (x's zero point)
};
// Otherwise (strides 1 and 2 across, any down), the panel's columns in `segments` runs of
// one output row each; per tap and segment a piece whose lanes (bit t) read
// image[channel * plane + offset + t * stride] (the lanes reading inside the image only):
struct Qu8ConvPiece {
  ptrdiff_t offset;
  uint64_t bytes;  // stride 2: the lanes' bytes of a 64-byte load at offset (bit 2t per lane t)
  uint32_t lanes;
};
struct Qu8ConvStridedPanel {
  const uint8_t* image;  // channel 0's plane
  size_t plane, taps, segments;
  size_t stride;               // 1 or 2
  const Qu8ConvPiece* pieces;  // [tap][segment]
  uint8_t pad;
};
// Rows past k are zero, as Qu8PackBFn's; columns outside the image hold `pad` (their input is
// never read). dst: (ceil(k / 4), NR) uint32.
using Qu8PackConvBFn = void (*)(const Qu8ConvPanel& panel, size_t k, uint32_t* dst);
using Qu8PackConvStridedBFn = void (*)(const Qu8ConvStridedPanel& panel, size_t k, uint32_t* dst);

// Portable kernel (any x86-64): MR = 4, NR = 8.
inline constexpr int kQu8ScalarMr = 4;
inline constexpr int kQu8ScalarNr = 8;
void qu8_gemm_ukernel_4x8__scalar(size_t rows, size_t cols, size_t kq, const uint32_t* a,
                                  const uint32_t* b, uint8_t* c, size_t ldc, const int32_t* bias,
                                  const float* scale, const Qu8Output& out);
// Any NR: the portable packer.
void qu8_pack_b__scalar(const uint8_t* src, size_t ld, size_t k, size_t cols, size_t nr,
                        uint32_t* dst);
void qu8_pack_b_8__scalar(const uint8_t* src, size_t ld, size_t k, size_t cols, uint32_t* dst);
void qu8_pack_conv_b__scalar(const Qu8ConvPanel& panel, size_t k, size_t nr, uint32_t* dst);
void qu8_pack_conv_b_8__scalar(const Qu8ConvPanel& panel, size_t k, uint32_t* dst);
void qu8_pack_conv_strided_b__scalar(const Qu8ConvStridedPanel& panel, size_t k, size_t nr,
                                     uint32_t* dst);
void qu8_pack_conv_strided_b_8__scalar(const Qu8ConvStridedPanel& panel, size_t k, uint32_t* dst);

namespace avx512vnni {
inline constexpr int kQu8GemmMr = 14;
inline constexpr int kQu8GemmNr = 32;
void qu8_gemm_ukernel_14x32__avx512vnni(size_t rows, size_t cols, size_t kq, const uint32_t* a,
                                        const uint32_t* b, uint8_t* c, size_t ldc,
                                        const int32_t* bias, const float* scale,
                                        const Qu8Output& out);
void qu8_pack_b_32__avx512vnni(const uint8_t* src, size_t ld, size_t k, size_t cols,
                               uint32_t* dst);
void qu8_pack_conv_b_32__avx512vnni(const Qu8ConvPanel& panel, size_t k, uint32_t* dst);
void qu8_pack_conv_strided_b_32__avx512vnni(const Qu8ConvStridedPanel& panel, size_t k,
                                            uint32_t* dst);
}  // namespace avx512vnni

// Depthwise 2-D convolution of one channel: `plane` is the channel's input less its zero point
// as int16, zero-padded (rows of `pw` values, the pads included, so tap (i, j) of output
// (oy, ox) reads plane[(oy * sh + i * dh) * pw + ox * sw + j * dw]); `w` its kh x kw int8 taps.
// y[oy * ow + ox] = clamp(round((sum + bias) * scale) + zero_point), the GEMM's rounding rule.
struct Qu8DwconvGeometry {
  size_t kh, kw, sh, sw, dh, dw, oh, ow, pw;
};
using Qu8DwconvFn = void (*)(const int16_t* plane, const int8_t* w, const Qu8DwconvGeometry& g,
                             int32_t bias, float scale, const Qu8Output& out, uint8_t* y);
void qu8_dwconv2d__scalar(const int16_t* plane, const int8_t* w, const Qu8DwconvGeometry& g,
                          int32_t bias, float scale, const Qu8Output& out, uint8_t* y);
// The same on a pair plane, for int16 pair products (AVX512-VNNI vpdpwssd). The plane of
// qu8_dwconv2d__scalar (ph x pw, the image at rows pt.., columns pl.., less its zero point,
// zero elsewhere) as pair rows: row R (R < ph) holds for each column c the int32 whose low half
// is plane[R][c] and high half plane[R + dh][c] (zero past ph), its columns split into g.sw
// phases (phase p: columns p, p + sw, ...; each pwp = ceil(pw / sw) wide; rows sw * pwp apart).
// `wpairs`: ceil(kh / 2) x kw int32, pair (i, j) = w[2i][j] low, w[2i + 1][j] high (zero past
// kh). Supported: strides 1 and 2 across, any down, kw <= 7, ceil(kh / 2) * kw <= 28.
namespace avx512vnni {
bool qu8_dwconv2d_pairs_supported(const Qu8DwconvGeometry& g);
// The pair rows of geometry g (its pw, dh, sw) straight from the uint8 image (h x w); only the
// rows the kernel reads are written.
void qu8_pair_rows__avx512vnni(const uint8_t* src, size_t h, size_t w, int32_t zero, size_t pt,
                               size_t pl, size_t ph, const Qu8DwconvGeometry& g, size_t pwp,
                               int32_t* pairs);
void qu8_dwconv2d_pairs__avx512vnni(const int32_t* pairs, const int32_t* wpairs,
                                    const Qu8DwconvGeometry& g, size_t pwp, int32_t bias,
                                    float scale, const Qu8Output& out, uint8_t* y);
}  // namespace avx512vnni
// The same straight from the uint8 image (h x w, no plane; outside it the zero point): each
// kernel row's taps in groups of four as one vpdpbusd (image bytes unsigned, taps signed), the
// four bytes of each of 16 outputs gathered with vpermb from one 64-byte load of the row.
// `wquads`: kh x ceil(kw / 4) int32, quad (i, q) = taps w[i][4q..4q+3] (zero past kw); `bias`
// here already less zero * sum(w) (the pads and the image both count the zero point in).
// `index`: what qu8_dwconv2d_bytes_index writes for g (the vpermb indices: byte 4t + b of
// group q is output t's tap 4q + b, zero past kw). `zero_row`: w + 128 bytes of scratch.
// g.pw is unused. Supported: kh <= 8, kw <= 8 and
// 15 * sw + (kw - 1) * dw <= 63 (one load covers the 16 outputs' taps).
namespace avx512vnni_vbmi {
bool qu8_dwconv2d_bytes_supported(const Qu8DwconvGeometry& g);
// ceil(kw / 4) x 64 bytes; depends on g's kw, sw and dw only.
void qu8_dwconv2d_bytes_index(const Qu8DwconvGeometry& g, uint8_t* index);
void qu8_dwconv2d_bytes__avx512vnni_vbmi(const uint8_t* image, size_t h, size_t w, uint8_t zero,
                                         size_t pt, size_t pl, uint8_t* zero_row,
                                         const uint8_t* index, const int32_t* wquads,
                                         const Qu8DwconvGeometry& g, int32_t bias, float scale,
                                         const Qu8Output& out, uint8_t* y);
}  // namespace avx512vnni_vbmi
// dst[i] = src[i] - zero as int16: a row of the depthwise kernels' plane.
using Qu8WidenFn = void (*)(const uint8_t* src, size_t n, int32_t zero, int16_t* dst);
void qu8_widen__scalar(const uint8_t* src, size_t n, int32_t zero, int16_t* dst);
// dst[i] = src[2 * i], i < n: an im2col row of a stride-2 convolution.
using U8GatherStride2Fn = void (*)(const uint8_t* src, size_t n, uint8_t* dst);
void u8_gather_stride2__scalar(const uint8_t* src, size_t n, uint8_t* dst);
// y[i] = table[x[i]], i < n: peregrine.TableLookup with its 256-byte table.
using U8LookupFn = void (*)(const uint8_t* x, size_t n, const uint8_t* table, uint8_t* y);
void u8_lookup__scalar(const uint8_t* x, size_t n, const uint8_t* table, uint8_t* y);
namespace avx512vbmi {
void u8_lookup__avx512vbmi(const uint8_t* x, size_t n, const uint8_t* table, uint8_t* y);
}  // namespace avx512vbmi
namespace avx512 {
void u8_gather_stride2__avx512(const uint8_t* src, size_t n, uint8_t* dst);
void qu8_widen__avx512(const uint8_t* src, size_t n, int32_t zero, int16_t* dst);
// 16 outputs of a row at a time; strides 1 and 2 (others: the scalar kernel).
void qu8_dwconv2d__avx512(const int16_t* plane, const int8_t* w, const Qu8DwconvGeometry& g,
                          int32_t bias, float scale, const Qu8Output& out, uint8_t* y);
}  // namespace avx512

// QuantizeLinear of float32 with one scale and zero point: y = clamp(round(x / scale) + zp)
// (half to even; NaN becomes zp, as the reference). DequantizeLinear: y = (x - zp) * scale.
// `is_signed` selects int8 (else uint8) for the 8-bit side.
using Q8QuantizeFn = void (*)(const float* x, size_t n, float scale, int32_t zp, bool is_signed,
                              uint8_t* y);
using Q8DequantizeFn = void (*)(const uint8_t* x, size_t n, float scale, int32_t zp,
                                bool is_signed, float* y);
// y = DequantizeLinear(QuantizeLinear(x)) with one scale and zero point, without the 8-bit
// values in between: x rounded to the grid (the same float32 results as the two maps).
using Q8FakeQuantizeFn = void (*)(const float* x, size_t n, float scale, int32_t zp, bool is_signed,
                                  float* y);
void q8_fake_quantize__scalar(const float* x, size_t n, float scale, int32_t zp, bool is_signed,
                              float* y);
namespace avx512 {
void q8_fake_quantize__avx512(const float* x, size_t n, float scale, int32_t zp, bool is_signed,
                              float* y);
}  // namespace avx512
void q8_quantize__scalar(const float* x, size_t n, float scale, int32_t zp, bool is_signed,
                         uint8_t* y);
void q8_dequantize__scalar(const uint8_t* x, size_t n, float scale, int32_t zp, bool is_signed,
                           float* y);
namespace avx512 {
void q8_quantize__avx512(const float* x, size_t n, float scale, int32_t zp, bool is_signed,
                         uint8_t* y);
void q8_dequantize__avx512(const uint8_t* x, size_t n, float scale, int32_t zp, bool is_signed,
                           float* y);
}  // namespace avx512

// peregrine.QLinearAdd of n elements: c = clamp(round(((a - za) * sa + (b - zb) * sb) / sc) + zc,
// lo, hi), each product and the sum in float32 as the reference; lo is raised by a fused Relu.
struct Q8AddParams {
  float a_scale, a_zero, b_scale, b_zero, c_scale;
  int32_t c_zero, lo, hi;
  bool a_signed, b_signed;
};
using Q8AddFn = void (*)(const uint8_t* a, const uint8_t* b, size_t n, const Q8AddParams& p,
                         uint8_t* c);
void q8_add__scalar(const uint8_t* a, const uint8_t* b, size_t n, const Q8AddParams& p,
                    uint8_t* c);
namespace avx512 {
void q8_add__avx512(const uint8_t* a, const uint8_t* b, size_t n, const Q8AddParams& p,
                    uint8_t* c);
}  // namespace avx512

// One output row of an 8-bit MaxPool: `rows` the window's input rows inside the image (nrows
// >= 1, each w bytes); out[ox] = max over those rows and over taps j whose column
// ox * sw - pl + j * dw lies in [0, w). Every window has a tap inside (the caller checks).
// `scratch`: q8_max_pool_scratch_bytes(g) bytes.
struct Q8MaxPoolRow {
  size_t w, ow, kw, sw, dw, pl;
  bool is_signed;  // int8 (else uint8)
};
// The padded row's length: every column a tap of any output reads, plus a vector of slack.
inline size_t q8_max_pool_padded_bytes(const Q8MaxPoolRow& g) {
  return g.pl + g.w + (g.ow + 1) * g.sw + g.kw * g.dw + 64;
}
inline size_t q8_max_pool_scratch_bytes(const Q8MaxPoolRow& g) {
  return 2 * q8_max_pool_padded_bytes(g) + 512;  // the padded row, its even / odd halves
}
using Q8MaxPoolRowFn = void (*)(const uint8_t* const* rows, size_t nrows, const Q8MaxPoolRow& g,
                                uint8_t* scratch, uint8_t* out);
void q8_max_pool_row__scalar(const uint8_t* const* rows, size_t nrows, const Q8MaxPoolRow& g,
                             uint8_t* scratch, uint8_t* out);
namespace avx512 {
void q8_max_pool_row__avx512(const uint8_t* const* rows, size_t nrows, const Q8MaxPoolRow& g,
                             uint8_t* scratch, uint8_t* out);
}  // namespace avx512

}  // namespace peregrine::cpu
