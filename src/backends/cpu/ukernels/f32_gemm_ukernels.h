// f32 GEMM micro-kernels, one per file (ukernels/f32-gemm-<MR>x<NR>-<isa>.cc), each in the
// namespace of its ISA so instantiations compiled with wider ISA flags never merge into
// generic code.
//
// Contract (BLIS): C[MR, NR] = alpha * A[MR, kc] * B[kc, NR] + beta * C[MR, NR]
//   a: packed A micro-panel, (kc, MR): for each k, the MR values of column k, contiguous.
//   b: packed B micro-panel, (kc, NR): for each k, the NR values of row k, contiguous,
//      64-byte aligned.
//   c: row-major with row stride ldc (elements); the full MR x NR tile is written.
//   beta == 0 never reads C (NaN/Inf there do not propagate). kc may be 0 (C = beta * C).
// Edge tiles are the driver's job: it runs the kernel on a temporary MR x NR tile.
#pragma once

#include <cstddef>

namespace peregrine::cpu {

using F32GemmUkernelFn = void (*)(size_t kc, const float* a, const float* b, float* c, size_t ldc,
                                  float alpha, float beta);

namespace scalar {
void f32_gemm_ukernel_4x8__scalar(size_t kc, const float* a, const float* b, float* c, size_t ldc,
                                  float alpha, float beta);
}  // namespace scalar

namespace avx2 {
void f32_gemm_ukernel_6x16__avx2(size_t kc, const float* a, const float* b, float* c, size_t ldc,
                                 float alpha, float beta);
}  // namespace avx2

namespace avx512 {
void f32_gemm_ukernel_14x32__avx512(size_t kc, const float* a, const float* b, float* c, size_t ldc,
                                    float alpha, float beta);
}  // namespace avx512

}  // namespace peregrine::cpu
