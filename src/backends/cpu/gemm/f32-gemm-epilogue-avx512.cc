// The GEMM epilogue of the AVX-512 kernels: the transcendental activations (Sigmoid, SiLU, Tanh,
// GELU in both forms) as a second pass over each row with the 16-lane approximations
// (ukernels/f32-vunary-avx512.cc, the AVX2 build's algorithms), everything else through the
// AVX2 epilogue (gemm/f32-gemm-epilogue-avx2.cc).
#include "backends/cpu/gemm/epilogue_impl.h"

namespace peregrine::cpu {

namespace avx512 {

void f32_gemm_epilogue__avx512(float* c, size_t ldc, size_t rows, size_t cols, size_t row0,
                               size_t col0, const GemmEpilogue& ep) {
  UnaryOp op;
  if (!vector_activation(ep.activation, &op)) {
    avx2::f32_gemm_epilogue__avx2(c, ldc, rows, cols, row0, col0, ep);
    return;
  }
  GemmEpilogue linear = ep;  // bias and residual first, then the activation in place
  linear.activation = Activation::kNone;
  avx2::f32_gemm_epilogue__avx2(c, ldc, rows, cols, row0, col0, linear);
  if (ldc == cols) {  // contiguous rows (a GEMV's column, a squeeze-excite conv): one call
    f32_vunary__avx512(op, c, c, rows * cols);
    return;
  }
  for (size_t i = 0; i < rows; ++i) f32_vunary__avx512(op, c + i * ldc, c + i * ldc, cols);
}

}  // namespace avx512
}  // namespace peregrine::cpu
