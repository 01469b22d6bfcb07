// The Winograd F(m x m, 3x3) driver shared by F(4x4) and F(2x2) (algorithm: kernels/
// conv_winograd_f4x3.h): U = G g G^T packed once as (m + 2)^2 GEMM A operands; per block of tile
// rows the input transform into the GEMMs' packed-B panels, (m + 2)^2 GEMMs, the output
// transform with bias and then the epilogue.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/gemm/bf16_gemm.h"
#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/ukernels/f32_winograd_ukernels.h"

namespace peregrine::cpu {

// The geometry the Winograd path sees (pads beyond the input read zeros).
struct WinogradConvShape {
  int64_t batch = 0, in_c = 0, in_h = 0, in_w = 0;
  int64_t out_c = 0, out_h = 0, out_w = 0;
  int64_t pad_t = 0, pad_l = 0;
};

// The GEMM kernel for the layer's (tile + 2)^2 products of (Cout, Cin) x (Cin, tiles of a
// block): f32_gemm_kernel_for_shape's rule, with the columns each kernel's NR gives the block.
const GemmKernelInfo &winograd_gemm_kernel(int64_t tile, const WinogradConvShape &s);

// One layer's Winograd F(tile x tile, 3x3) convolution: its transformed weights and the driver.
class WinogradConv {
 public:
  // w: (Cout, Cin, 3, 3) row-major; g: G, (tile + 2) x 3. The GEMM and transform tables (that
  // algorithm's, for `tile`) must outlive this object. With `bf16` (a node at bf16 precision)
  // the (tile + 2)^2 products run on the bf16 GEMM, U packed in bf16 and V converted from the
  // float32 panels the input transform writes for `gemm`, whose NR and KC must be bf16's.
  WinogradConv(const GemmKernelInfo &gemm, const WinogradUkernels &transforms, int64_t tile,
               const double (*g)[3], const float *w, int64_t out_c, int64_t in_c,
               const Bf16GemmKernelInfo *bf16 = nullptr);
  // The name of the products' GEMM micro-kernel.
  const char *gemm_name() const { return bf16_ ? bf16_->name : gemm_.name; }

  const GemmKernelInfo &gemm() const { return gemm_; }
  int64_t out_c() const { return out_c_; }
  int64_t in_c() const { return in_c_; }

  // y(N, Cout, OH, OW) = act(conv(x) + bias + residual): x (N, Cin, H, W); bias (Cout) or
  // nullptr; ep: the activation and residual (ep.residual of y's layout, or nullptr; its bias
  // fields are ignored). Runs on up to `threads` threads of cpu_thread_pool().
  void run(const float *x, const WinogradConvShape &s, const float *bias, const GemmEpilogue &ep,
           float *y, int threads) const;

 private:
  const GemmKernelInfo &gemm_;
  const WinogradUkernels &transforms_;
  int64_t tile_, out_c_, in_c_;
  const Bf16GemmKernelInfo *bf16_;
  std::vector<PackedMatrix> u_;  // (tile + 2)^2 packed (Cout, Cin) A operands, xi = row-major
  std::vector<Bf16PackedMatrix> u_bf16_;  // the same in bf16, instead of u_, with bf16_
};

}  // namespace peregrine::cpu
