// The GEMM epilogue, written once and compiled per ISA: each including file
// (gemm/f32-gemm-epilogue-<isa>.cc, built with its ISA's flags) gets its own internal-linkage
// copy, so a wider-ISA instantiation can never be merged into generic code.
#pragma once

#include <algorithm>
#include <cmath>

#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"

namespace peregrine::cpu {

// The per-ISA epilogues (gemm/f32-gemm-epilogue-<isa>.cc).
namespace avx2 {
void f32_gemm_epilogue__avx2(float* c, size_t ldc, size_t rows, size_t cols, size_t row0,
                             size_t col0, const GemmEpilogue& ep);
}  // namespace avx2
namespace avx512 {
void f32_gemm_epilogue__avx512(float* c, size_t ldc, size_t rows, size_t cols, size_t row0,
                               size_t col0, const GemmEpilogue& ep);
}  // namespace avx512

namespace {

template <Activation kAct>
inline float activate(float v, float p0, float p1) {
  if constexpr (kAct == Activation::kRelu) return v > 0.0f ? v : 0.0f;
  if constexpr (kAct == Activation::kClip) return std::min(std::max(v, p0), p1);
  if constexpr (kAct == Activation::kLeakyRelu) return v >= 0.0f ? v : v * p0;
  if constexpr (kAct == Activation::kSigmoid) return 1.0f / (1.0f + std::exp(-v));
  if constexpr (kAct == Activation::kSilu) return v / (1.0f + std::exp(-v));
  if constexpr (kAct == Activation::kHardSwish)
    return v * std::min(std::max(v * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
  if constexpr (kAct == Activation::kGelu) return 0.5f * v * (1.0f + std::erf(v * 0.70710678f));
  if constexpr (kAct == Activation::kGeluTanh)
    return 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
  if constexpr (kAct == Activation::kTanh) return std::tanh(v);
  return v;
}

// One row of the tile: bias, residual, activation. Inner loops are plain so they vectorize.
template <Activation kAct>
inline void epilogue_rows(float* c, size_t ldc, size_t rows, size_t cols, size_t row0, size_t col0,
                          const GemmEpilogue& ep) {
  const float p0 = ep.act_alpha, p1 = ep.act_beta;
  for (size_t i = 0; i < rows; ++i) {
    float* __restrict row = c + i * ldc;
    if (ep.bias_kind == GemmEpilogue::Bias::kPerRow) {
      const float b = ep.bias[row0 + i];
      for (size_t j = 0; j < cols; ++j) row[j] += b;
    } else if (ep.bias_kind == GemmEpilogue::Bias::kPerColumn) {
      const float* __restrict b = ep.bias + col0;
      for (size_t j = 0; j < cols; ++j) row[j] += b[j];
    }
    if (ep.residual != nullptr) {
      const float* __restrict r = ep.residual + (row0 + i) * ep.ldr + col0;
      for (size_t j = 0; j < cols; ++j) row[j] += r[j];
    }
    if constexpr (kAct != Activation::kNone)
      for (size_t j = 0; j < cols; ++j) row[j] = activate<kAct>(row[j], p0, p1);
  }
}

inline void apply_epilogue(float* c, size_t ldc, size_t rows, size_t cols, size_t row0, size_t col0,
                           const GemmEpilogue& ep) {
  switch (ep.activation) {
    case Activation::kNone:
      return epilogue_rows<Activation::kNone>(c, ldc, rows, cols, row0, col0, ep);
    case Activation::kRelu:
      return epilogue_rows<Activation::kRelu>(c, ldc, rows, cols, row0, col0, ep);
    case Activation::kClip:
      return epilogue_rows<Activation::kClip>(c, ldc, rows, cols, row0, col0, ep);
    case Activation::kLeakyRelu:
      return epilogue_rows<Activation::kLeakyRelu>(c, ldc, rows, cols, row0, col0, ep);
    case Activation::kSigmoid:
      return epilogue_rows<Activation::kSigmoid>(c, ldc, rows, cols, row0, col0, ep);
    case Activation::kSilu:
      return epilogue_rows<Activation::kSilu>(c, ldc, rows, cols, row0, col0, ep);
    case Activation::kHardSwish:
      return epilogue_rows<Activation::kHardSwish>(c, ldc, rows, cols, row0, col0, ep);
    case Activation::kGelu:
      return epilogue_rows<Activation::kGelu>(c, ldc, rows, cols, row0, col0, ep);
    case Activation::kGeluTanh:
      return epilogue_rows<Activation::kGeluTanh>(c, ldc, rows, cols, row0, col0, ep);
    case Activation::kTanh:
      return epilogue_rows<Activation::kTanh>(c, ldc, rows, cols, row0, col0, ep);
  }
}

// The vector map of a transcendental activation (Sigmoid, SiLU, Tanh, GELU in both forms), which
// an ISA's epilogue runs as a second pass with its vectorized approximation; false for the ones
// the plain epilogue computes.
inline bool vector_activation(Activation act, UnaryOp* op) {
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
}  // namespace peregrine::cpu
