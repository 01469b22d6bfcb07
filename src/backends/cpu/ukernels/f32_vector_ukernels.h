// f32 vector micro-kernels for the memory-bound ops (elementwise maps, row normalizations,
// pooling rows), one table per ISA level:
//   scalar (ukernels/f32-vector-scalar.cc): plain loops, std:: math functions.
//   avx2   (ukernels/f32-v*-avx2.cc): 8-wide AVX2 + FMA, own exp / erf / tanh / sigmoid
//          approximations (ukernels/f32_vmath_avx2.h, errors stated there).
// Contract for every kernel: any length n >= 0 (tails past the last full vector are done
// element by element, never reading or writing past n); no alignment required; y may equal
// an input pointer exactly (in-place: element i is read before y[i] is written), but must not
// partially overlap one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/cpu_features.h"

namespace peregrine::cpu {

// Elementwise unary maps y[i] = f(x[i]).
enum class UnaryOp {
  kRelu,
  kSigmoid,
  kSilu,  // x * sigmoid(x)
  kTanh,
  kErf,
  kExp,
  kGelu,      // 0.5 x (1 + erf(x / sqrt 2))
  kGeluTanh,  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv };

// y[i] = f(x[i]) for i in [0, n).
using F32UnaryFn = void (*)(UnaryOp op, const float* x, float* y, size_t n);
// y[i] = a[i * a_step] op b[i * b_step], steps 0 (a broadcast scalar) or 1.
using F32BinaryFn = void (*)(BinaryOp op, const float* a, size_t a_step, const float* b,
                             size_t b_step, float* y, size_t n);
// Softmax of one contiguous row: y = exp(x - max x) / sum. n >= 1.
using F32SoftmaxRowFn = void (*)(const float* x, float* y, size_t n);
// Softmax down the columns of a (len, width) block with row stride `stride` (>= width): for
// each column j < width, the len values x[k * stride + j]. len >= 1; y may equal x (same
// layout). Vectorized across columns.
using F32SoftmaxColumnsFn = void (*)(const float* x, float* y, size_t len, size_t stride,
                                     size_t width);
// LayerNorm of one contiguous row: y = (x - mean) / sqrt(var + eps) * gamma (+ beta when
// non-null); two passes for the moments (mean, then the centred sum of squares). n >= 1.
using F32LayerNormRowFn = void (*)(const float* x, const float* gamma, const float* beta, float eps,
                                   float* y, size_t n);
// RMS norm of one contiguous row: y = x / sqrt(mean(x^2) + eps) * gamma. n >= 1.
using F32RmsNormRowFn = void (*)(const float* x, const float* gamma, float eps, float* y, size_t n);
// Rotary embedding of one head: the pairs (x1, x2) = (x[i], x[i + half]), or (x[2i], x[2i + 1])
// when interleaved, rotated by the angle of cosine c[i] and sine s[i], i in [0, half):
//   y1 = c x1 - s x2;  y2 = s x1 + c x2.
// Writes y[0 .. 2 * half) only; x and y do not overlap.
using F32RotaryFn = void (*)(const float* x, const float* c, const float* s, float* y, size_t half,
                             bool interleaved);
// Pooling rows: acc[j] = max(acc[j], x[j * stride]) or acc[j] += x[j * stride], j in [0, n).
// Reads x[0 .. (n - 1) * stride] only.
using F32PoolRowFn = void (*)(const float* x, size_t stride, float* acc, size_t n);
// 3x3 max pooling with stride 2 of one (in_h, in_w) plane into (out_h, out_w), top / left pads
// 0 or 1 (the rest implied by out_h / out_w; every window has an in-bounds tap): per output row,
// the vertical max of its (up to) three input rows, then the max of three neighbours at every
// other column. `row`: max_pool_3x3s2_scratch_floats(in_w, out_h) floats, private to the
// caller.
using F32MaxPool3x3s2Fn = void (*)(const float* x, size_t in_h, size_t in_w, size_t pad_t,
                                   size_t pad_l, float* y, size_t out_h, size_t out_w, float* row);
inline size_t max_pool_3x3s2_scratch_floats(size_t in_w, size_t out_h) {
  return (in_w + 40) * out_h;
}
// 2x2 pooling with stride 2 of one plane, every window inside it (2 out_h <= in_h, 2 out_w <=
// in_w, no pads): y = the max of each window, or its mean (max false).
using F32Pool2x2s2Fn = void (*)(const float* x, size_t in_w, float* y, size_t out_h, size_t out_w,
                                bool max);
// Stride-1, dilation-1 pooling of one plane (in_h, in_w) into (out_h, out_w), any KH x KW with
// pads < the kernel (the end pads implied by out_h / out_w; every window has an in-bounds tap):
// per output row, the max (or sum) of its in-bounds input rows into a padded row, then of KW
// neighbours at every column. Sums are not scaled (the caller divides). `row`:
// pool_s1_scratch_floats(out_w, kw) floats, private to the caller.
using F32PoolStride1Fn = void (*)(const float* x, size_t in_h, size_t in_w, size_t kh, size_t kw,
                                  size_t pad_t, size_t pad_l, float* y, size_t out_h, size_t out_w,
                                  bool max, float* row);
inline size_t pool_s1_scratch_floats(size_t out_w, size_t kw) { return out_w + kw + 16; }
// The max (or sum) of the window at every position of `planes` consecutive (in_h, in_w) planes:
// s[p, r, c] = max / sum over ki < kh, kj < kw of x[p, r - pad_t + ki * dh, c - pad_l + kj * dw],
// taps outside the plane skipped (-inf / 0 where none is inside). s has x's layout; a pool of
// stride 1 whose output is the input's size is s, a strided one samples it. Sums are not scaled
// (the caller divides). `scratch`: planes * in_h * in_w floats, private to the caller.
using F32WindowPlanesFn = void (*)(const float* x, size_t planes, size_t in_h, size_t in_w,
                                   size_t kh, size_t kw, size_t dh, size_t dw, size_t pad_t,
                                   size_t pad_l, float* s, bool max, float* scratch);
// Strided row copy: y[j] = x[j * stride], j in [0, n) (im2col rows of strided convs). Reads
// x[0 .. (n - 1) * stride] only.
using F32CopyRowFn = void (*)(const float* x, size_t stride, float* y, size_t n);
// Reductions over x[0, n): max (-inf for n == 0) and sum (0 for n == 0).
using F32ReduceFn = float (*)(const float* x, size_t n);
// Block transpose of 4-byte elements (any dtype of that size: bits are moved, not values):
// dst[j * dst_stride + i] = src[i * src_stride + j] for i < rows, j < cols. Touches nothing
// else; src and dst do not overlap.
using X32TransposeFn = void (*)(const uint32_t* src, size_t src_stride, uint32_t* dst,
                                size_t dst_stride, size_t rows, size_t cols);

struct VectorUkernels {
  Isa isa;
  F32UnaryFn unary;
  F32BinaryFn binary;
  F32SoftmaxRowFn softmax_row;
  F32SoftmaxColumnsFn softmax_columns;
  F32LayerNormRowFn layer_norm_row;
  F32RmsNormRowFn rms_norm_row;
  F32RotaryFn rotary;
  F32PoolRowFn max_row;
  F32PoolRowFn add_row;
  F32CopyRowFn copy_row;
  F32MaxPool3x3s2Fn max_pool_3x3s2;  // nullptr: none at this level (the generic rows)
  F32Pool2x2s2Fn pool_2x2s2;         // nullptr: none at this level (the generic rows)
  F32PoolStride1Fn pool_s1;          // nullptr: none at this level (the generic rows)
  F32WindowPlanesFn window_planes;   // nullptr: none at this level (the kernels above)
  F32ReduceFn reduce_max;
  F32ReduceFn reduce_sum;
  X32TransposeFn transpose_x32;
};

// The table for `isa` (AVX-512 machines use the AVX2 table), or nullptr when this CPU cannot
// run it.
const VectorUkernels* vector_ukernels_for(Isa isa);
// The table for selected_isa() (the best level when PEREGRINE_ISA is invalid).
const VectorUkernels& vector_ukernels();

namespace scalar {
void f32_vunary__scalar(UnaryOp op, const float* x, float* y, size_t n);
void f32_vbinary__scalar(BinaryOp op, const float* a, size_t a_step, const float* b, size_t b_step,
                         float* y, size_t n);
void f32_softmax_row__scalar(const float* x, float* y, size_t n);
void f32_softmax_columns__scalar(const float* x, float* y, size_t len, size_t stride, size_t width);
void f32_layer_norm_row__scalar(const float* x, const float* gamma, const float* beta, float eps,
                                float* y, size_t n);
void f32_rms_norm_row__scalar(const float* x, const float* gamma, float eps, float* y, size_t n);
void f32_rotary__scalar(const float* x, const float* c, const float* s, float* y, size_t half,
                        bool interleaved);
void f32_max_row__scalar(const float* x, size_t stride, float* acc, size_t n);
void f32_add_row__scalar(const float* x, size_t stride, float* acc, size_t n);
void f32_copy_row__scalar(const float* x, size_t stride, float* y, size_t n);
float f32_reduce_max__scalar(const float* x, size_t n);
float f32_reduce_sum__scalar(const float* x, size_t n);
void x32_transpose__scalar(const uint32_t* src, size_t src_stride, uint32_t* dst, size_t dst_stride,
                           size_t rows, size_t cols);
}  // namespace scalar

namespace avx512 {
void f32_vunary__avx512(UnaryOp op, const float* x, float* y, size_t n);
void f32_max_pool_3x3s2__avx512(const float* x, size_t in_h, size_t in_w, size_t pad_t,
                                size_t pad_l, float* y, size_t out_h, size_t out_w, float* row);
void f32_window_planes__avx512(const float* x, size_t planes, size_t in_h, size_t in_w, size_t kh,
                               size_t kw, size_t dh, size_t dw, size_t pad_t, size_t pad_l,
                               float* s, bool max, float* scratch);
void x32_transpose__avx512(const uint32_t* src, size_t src_stride, uint32_t* dst, size_t dst_stride,
                           size_t rows, size_t cols);
}  // namespace avx512

namespace avx2 {
void f32_vunary__avx2(UnaryOp op, const float* x, float* y, size_t n);
void f32_vbinary__avx2(BinaryOp op, const float* a, size_t a_step, const float* b, size_t b_step,
                       float* y, size_t n);
void f32_softmax_row__avx2(const float* x, float* y, size_t n);
void f32_softmax_columns__avx2(const float* x, float* y, size_t len, size_t stride, size_t width);
void f32_layer_norm_row__avx2(const float* x, const float* gamma, const float* beta, float eps,
                              float* y, size_t n);
void f32_rms_norm_row__avx2(const float* x, const float* gamma, float eps, float* y, size_t n);
void f32_rotary__avx2(const float* x, const float* c, const float* s, float* y, size_t half,
                      bool interleaved);
void f32_max_row__avx2(const float* x, size_t stride, float* acc, size_t n);
void f32_add_row__avx2(const float* x, size_t stride, float* acc, size_t n);
void f32_copy_row__avx2(const float* x, size_t stride, float* y, size_t n);
void f32_max_pool_3x3s2__avx2(const float* x, size_t in_h, size_t in_w, size_t pad_t, size_t pad_l,
                              float* y, size_t out_h, size_t out_w, float* row);
void f32_pool_2x2s2__avx2(const float* x, size_t in_w, float* y, size_t out_h, size_t out_w,
                          bool max);
void f32_pool_s1__avx2(const float* x, size_t in_h, size_t in_w, size_t kh, size_t kw,
                       size_t pad_t, size_t pad_l, float* y, size_t out_h, size_t out_w, bool max,
                       float* row);
float f32_reduce_max__avx2(const float* x, size_t n);
float f32_reduce_sum__avx2(const float* x, size_t n);
void x32_transpose__avx2(const uint32_t* src, size_t src_stride, uint32_t* dst, size_t dst_stride,
                         size_t rows, size_t cols);
}  // namespace avx2

}  // namespace peregrine::cpu
