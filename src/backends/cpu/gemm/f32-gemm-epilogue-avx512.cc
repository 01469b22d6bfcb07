// The GEMM epilogue compiled with avx512 flags (see gemm/epilogue_impl.h).
#include "backends/cpu/gemm/epilogue_impl.h"

namespace peregrine::cpu::avx512 {

void f32_gemm_epilogue__avx512(float* c, size_t ldc, size_t rows, size_t cols, size_t row0,
                               size_t col0, const GemmEpilogue& ep) {
  apply_epilogue(c, ldc, rows, cols, row0, col0, ep);
}

}  // namespace peregrine::cpu::avx512
