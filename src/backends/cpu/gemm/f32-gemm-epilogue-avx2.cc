// The GEMM epilogue compiled with avx2 flags (see gemm/epilogue_impl.h). The transcendental
// activations (Sigmoid, SiLU, Tanh, GELU in both forms) run as a second pass over each row of
// the hot tile with the vectorized approximations of ukernels/f32_vmath_avx2.h (errors stated
// there) instead of element-by-element std:: calls.
#include "backends/cpu/gemm/epilogue_impl.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"

namespace peregrine::cpu::avx2 {

namespace {

// The vector map for `act`; false for activations the plain epilogue handles.
bool vector_activation(Activation act, UnaryOp* op) {
  switch (act) {
    case Activation::kSigmoid:
      *op = UnaryOp::kSigmoid;
      return true;
    case Activation::kSilu:
      *op = UnaryOp::kSilu;
      return true;
    case Activation::kTanh:
      *op = UnaryOp::kTanh;
      return true;
    case Activation::kGelu:
      *op = UnaryOp::kGelu;
      return true;
    case Activation::kGeluTanh:
      *op = UnaryOp::kGeluTanh;
      return true;
    default:
      return false;
  }
}

}  // namespace

void f32_gemm_epilogue__avx2(float* c, size_t ldc, size_t rows, size_t cols, size_t row0,
                             size_t col0, const GemmEpilogue& ep) {
  UnaryOp op;
  if (!vector_activation(ep.activation, &op)) {
    apply_epilogue(c, ldc, rows, cols, row0, col0, ep);
    return;
  }
  GemmEpilogue linear = ep;  // bias and residual first, then the activation in place
  linear.activation = Activation::kNone;
  apply_epilogue(c, ldc, rows, cols, row0, col0, linear);
  for (size_t i = 0; i < rows; ++i) f32_vunary__avx2(op, c + i * ldc, c + i * ldc, cols);
}

}  // namespace peregrine::cpu::avx2
