// uint8 x int8 GEMM with requantization: C(m, n) = requant(A(m, k) * B(k, n) + bias) as uint8 or
// int8, A int8 (weights, packed once), B uint8 (activations, packed per call), int32
// accumulation (exact). The kernel of the int8 convolutions and matrix products
// (kernels/qlinear_conv.cc, kernels/qlinear_matmul.cc).
//
// Loops: tasks over (M part) x (N block); per task the B block (all of K, ncur columns) is packed
// once into quad panels, then each MR-row A panel runs against every NR-column B panel over the
// whole K in registers and is requantized there: K is not blocked, so no int32 partial sums go
// through memory. The N block is sized so its packed panels stay in L2.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/ukernels/q8_ukernels.h"

namespace peregrine::cpu {

struct Qu8GemmKernelInfo {
  const char* name;  // "qu8_gemm_ukernel_14x32__avx512vnni"
  Qu8GemmUkernelFn ukernel;
  Qu8PackBFn pack_b_panel;
  Qu8PackConvBFn pack_conv_panel;
  Qu8PackConvStridedBFn pack_conv_strided_panel;
  int mr, nr;
};

// The best kernel selected_isa() and the CPU allow: AVX-512 VNNI at the avx512 level on a CPU
// with it, else the portable one.
const Qu8GemmKernelInfo& qu8_gemm_kernel();
// Every kernel this CPU can run, portable first (for tests at each level).
std::vector<const Qu8GemmKernelInfo*> qu8_gemm_kernels_runnable();

// The deepest K whose int32 sums stay exact (|acc| < K * 255 * 128 < 2^31): deeper products run
// the reference kernel.
inline constexpr int64_t kQu8MaxDepth = 65793;

// An int8 weight matrix A(m, k) in the kernel's panel layout, with each row's sum (for the
// activation zero point's correction, folded into the bias by the caller).
class Qu8PackedA {
 public:
  // Row i of A at w + i * ldw, k contiguous values.
  static Qu8PackedA pack(const Qu8GemmKernelInfo& kernel, const int8_t* w, int64_t ldw,
                         int64_t m, int64_t k);
  int64_t rows() const { return rows_; }
  int64_t depth() const { return depth_; }
  const uint32_t* panel(int64_t index) const { return data_.get() + index * panel_stride(); }
  int64_t panel_stride() const { return (depth_ + 3) / 4 * width_; }
  const int32_t* row_sums() const { return row_sums_.get(); }
  const Qu8GemmKernelInfo* kernel() const { return kernel_; }

 private:
  struct Free {
    void operator()(uint32_t* p) const;
  };
  int64_t rows_ = 0, depth_ = 0;
  int width_ = 0;
  const Qu8GemmKernelInfo* kernel_ = nullptr;
  std::unique_ptr<uint32_t[], Free> data_;
  std::unique_ptr<int32_t[]> row_sums_;
};

// Per-row requantization of C: bias[i] (int32, the zero-point correction included) and
// scale[i] (x_scale * w_scale[i] / y_scale), then out's zero point and clamp.
struct Qu8Requant {
  const int32_t* bias;
  const float* scale;
  Qu8Output out;
};

// B: row-major uint8, row p at b + p * ldb. C: row i at c + i * ldc. a.kernel() runs it.
void qu8_gemm(int64_t m, int64_t n, const Qu8PackedA& a, const uint8_t* b, int64_t ldb,
              uint8_t* c, int64_t ldc, const Qu8Requant& rq, int num_threads);
// The same with B given transposed: column j of B (its k values) at bt + j * ldbt, as the
// activations of a matrix product are stored ([tokens, K]).
void qu8_gemm_bt(int64_t m, int64_t n, const Qu8PackedA& a, const uint8_t* bt, int64_t ldbt,
                 uint8_t* c, int64_t ldc, const Qu8Requant& rq, int num_threads);

// A 2-D convolution's input as the B operand, its im2col matrix (K = channels * kh * kw rows,
// N = oh * ow columns) packed from the image block by block and never formed whole. Strides
// across of 1 and 2 (qu8_conv_packs_directly); any stride down, dilation and padding.
struct Qu8ConvImage {
  const uint8_t* image;  // channels x h x w
  int64_t channels, h, w, oh, ow;
  int64_t kh, kw, sh, sw, dh, dw, pad_top, pad_left;
  uint8_t pad;  // the input's zero point
};
bool qu8_conv_packs_directly(int64_t stride_w);
void qu8_gemm_conv(int64_t m, const Qu8PackedA& a, const Qu8ConvImage& x, uint8_t* c, int64_t ldc,
                   const Qu8Requant& rq, int num_threads);

}  // namespace peregrine::cpu
