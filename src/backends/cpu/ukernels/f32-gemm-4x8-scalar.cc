// f32 GEMM micro-kernel, portable C++: MR = 4, NR = 8 (32 accumulators the compiler may keep
// in SSE registers). Packing and edge contract: ukernels/f32_gemm_ukernels.h.
#include <algorithm>
#include "backends/cpu/ukernels/f32_gemm_ukernels.h"

namespace peregrine::cpu::scalar {

namespace {

constexpr int kMr = 4, kNr = 8;

// acc = A * B over kc steps.
void accumulate(size_t kc, const float* a, const float* b, float (&acc)[kMr][kNr]) {
  for (size_t p = 0; p < kc; ++p, a += kMr, b += kNr) {  // a: (kc, MR), b: (kc, NR)
    for (int i = 0; i < kMr; ++i)
      for (int j = 0; j < kNr; ++j) acc[i][j] += a[i] * b[j];
  }
}

}  // namespace

void f32_gemm_ukernel_4x8__scalar(size_t kc, const float* a, const float* b, float* c, size_t ldc,
                                  float alpha, float beta) {
  float acc[kMr][kNr] = {};
  accumulate(kc, a, b, acc);
  for (int i = 0; i < kMr; ++i) {
    float* row = c + i * ldc;
    if (beta == 0.0f) {
      for (int j = 0; j < kNr; ++j) row[j] = alpha * acc[i][j];
    } else {
      for (int j = 0; j < kNr; ++j) row[j] = alpha * acc[i][j] + beta * row[j];
    }
  }
}

void f32_gemm_fused_ukernel_4x8__scalar(size_t kc, const float* a, const float* b, float* c,
                                        size_t ldc, float alpha, float beta,
                                        const F32GemmTileEpilogue& ep) {
  float acc[kMr][kNr] = {};
  accumulate(kc, a, b, acc);
  for (int i = 0; i < kMr; ++i) {
    float* row = c + i * ldc;
    for (int j = 0; j < kNr; ++j) {
      float v = alpha * acc[i][j];
      if (beta != 0.0f) v += beta * row[j];
      if (ep.bias_row) v += ep.bias_row[i];
      if (ep.bias_col) v += ep.bias_col[j];
      if (ep.residual) v += ep.residual[i * ep.ldr + j];
      v = v < ep.lo ? ep.lo : v;  // NaN compares false: stays NaN
      v = v > ep.hi ? ep.hi : v;
      if (ep.hardswish) v *= std::min(std::max(v * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
      row[j] = v;
    }
  }
}

}  // namespace peregrine::cpu::scalar
