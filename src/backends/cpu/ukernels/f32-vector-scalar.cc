// f32 vector micro-kernels, scalar: plain loops with std:: math (correctly rounded or nearly),
// the fallback for CPUs without AVX2 and PEREGRINE_ISA=scalar; plus the per-ISA table.
// Contract: ukernels/f32_vector_ukernels.h.
#include <algorithm>
#include <cmath>

#include "backends/cpu/ukernels/f32_vector_ukernels.h"

namespace peregrine::cpu {

namespace scalar {

namespace {

template <typename F>
inline void map_unary(const float* x, float* y, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

template <typename F>
inline void map_binary(const float* a, size_t a_step, const float* b, size_t b_step, float* y,
                       size_t n, F f) {
  for (size_t i = 0; i < n; ++i) y[i] = f(a[i * a_step], b[i * b_step]);
}

inline float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

}  // namespace

void f32_vunary__scalar(UnaryOp op, const float* x, float* y, size_t n) {
  switch (op) {
    case UnaryOp::kRelu:
      return map_unary(x, y, n, [](float v) { return v > 0.0f ? v : 0.0f; });
    case UnaryOp::kSigmoid:
      return map_unary(x, y, n, sigmoid);
    case UnaryOp::kSilu:
      return map_unary(x, y, n, [](float v) { return v * sigmoid(v); });
    case UnaryOp::kTanh:
      return map_unary(x, y, n, [](float v) { return std::tanh(v); });
    case UnaryOp::kErf:
      return map_unary(x, y, n, [](float v) { return std::erf(v); });
    case UnaryOp::kExp:
      return map_unary(x, y, n, [](float v) { return std::exp(v); });
    case UnaryOp::kGelu:
      return map_unary(x, y, n, [](float v) {
        return 0.5f * v * std::erfc(-v * 0.70710678118654752f);  // = 1 + erf(v / sqrt 2)
      });
    case UnaryOp::kGeluTanh:
      return map_unary(x, y, n, [](float v) {
        return 0.5f * v * (1.0f + std::tanh(0.79788456080286536f * (v + 0.044715f * v * v * v)));
      });
  }
}

void f32_vbinary__scalar(BinaryOp op, const float* a, size_t a_step, const float* b, size_t b_step,
                         float* y, size_t n) {
  switch (op) {
    case BinaryOp::kAdd:
      return map_binary(a, a_step, b, b_step, y, n, [](float p, float q) { return p + q; });
    case BinaryOp::kSub:
      return map_binary(a, a_step, b, b_step, y, n, [](float p, float q) { return p - q; });
    case BinaryOp::kMul:
      return map_binary(a, a_step, b, b_step, y, n, [](float p, float q) { return p * q; });
    case BinaryOp::kDiv:
      return map_binary(a, a_step, b, b_step, y, n, [](float p, float q) { return p / q; });
  }
}

float f32_reduce_max__scalar(const float* x, size_t n) {
  float m = -INFINITY;
  for (size_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

float f32_reduce_sum__scalar(const float* x, size_t n) {
  // 4 partial sums: fewer rounding steps in a row, and vectorizable.
  float s[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) s[k] += x[i + k];
  for (; i < n; ++i) s[0] += x[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

void f32_softmax_row__scalar(const float* x, float* y, size_t n) {
  const float m = f32_reduce_max__scalar(x, n);
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    y[i] = std::exp(x[i] - m);
    sum += y[i];
  }
  const float scale = 1.0f / sum;
  for (size_t i = 0; i < n; ++i) y[i] *= scale;
}

void f32_softmax_columns__scalar(const float* x, float* y, size_t len, size_t stride,
                                 size_t width) {
  for (size_t j = 0; j < width; ++j) {
    float m = -INFINITY;
    for (size_t k = 0; k < len; ++k) m = std::max(m, x[k * stride + j]);
    float sum = 0.0f;
    for (size_t k = 0; k < len; ++k) {
      y[k * stride + j] = std::exp(x[k * stride + j] - m);
      sum += y[k * stride + j];
    }
    const float scale = 1.0f / sum;
    for (size_t k = 0; k < len; ++k) y[k * stride + j] *= scale;
  }
}

void f32_layer_norm_row__scalar(const float* x, const float* gamma, const float* beta, float eps,
                                float* y, size_t n) {
  const float mean = f32_reduce_sum__scalar(x, n) / static_cast<float>(n);
  float sq = 0.0f;
  for (size_t i = 0; i < n; ++i) sq += (x[i] - mean) * (x[i] - mean);
  const float inv_std = 1.0f / std::sqrt(sq / static_cast<float>(n) + eps);
  for (size_t i = 0; i < n; ++i)
    y[i] = (x[i] - mean) * (gamma[i] * inv_std) + (beta ? beta[i] : 0.0f);
}

// Sum of squares in 4 partial sums (as f32_reduce_sum__scalar), then one scale per element.
void f32_rms_norm_row__scalar(const float* x, const float* gamma, float eps, float* y, size_t n) {
  float s[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) s[k] += x[i + k] * x[i + k];
  for (; i < n; ++i) s[0] += x[i] * x[i];
  const float ms = ((s[0] + s[1]) + (s[2] + s[3])) / static_cast<float>(n);
  const float inv_rms = 1.0f / std::sqrt(ms + eps);
  for (i = 0; i < n; ++i) y[i] = x[i] * (gamma[i] * inv_rms);
}

void f32_rotary__scalar(const float* x, const float* c, const float* s, float* y, size_t half,
                        bool interleaved) {
  for (size_t i = 0; i < half; ++i) {
    const size_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
    const float x1 = x[i1], x2 = x[i2];
    y[i1] = c[i] * x1 - s[i] * x2;
    y[i2] = s[i] * x1 + c[i] * x2;
  }
}

void f32_max_row__scalar(const float* x, size_t stride, float* acc, size_t n) {
  for (size_t j = 0; j < n; ++j) acc[j] = std::max(acc[j], x[j * stride]);
}

void f32_add_row__scalar(const float* x, size_t stride, float* acc, size_t n) {
  for (size_t j = 0; j < n; ++j) acc[j] += x[j * stride];
}

void f32_copy_row__scalar(const float* x, size_t stride, float* y, size_t n) {
  for (size_t j = 0; j < n; ++j) y[j] = x[j * stride];
}

void x32_transpose__scalar(const uint32_t* src, size_t src_stride, uint32_t* dst, size_t dst_stride,
                           size_t rows, size_t cols) {
  for (size_t j = 0; j < cols; ++j)
    for (size_t i = 0; i < rows; ++i) dst[j * dst_stride + i] = src[i * src_stride + j];
}

}  // namespace scalar

namespace {

const VectorUkernels kScalar = {
    Isa::kScalar,
    scalar::f32_vunary__scalar,
    scalar::f32_vbinary__scalar,
    scalar::f32_softmax_row__scalar,
    scalar::f32_softmax_columns__scalar,
    scalar::f32_layer_norm_row__scalar,
    scalar::f32_rms_norm_row__scalar,
    scalar::f32_rotary__scalar,
    scalar::f32_max_row__scalar,
    scalar::f32_add_row__scalar,
    scalar::f32_copy_row__scalar,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    scalar::f32_reduce_max__scalar,
    scalar::f32_reduce_sum__scalar,
    scalar::x32_transpose__scalar,
};

const VectorUkernels kAvx2 = {
    Isa::kAvx2,
    avx2::f32_vunary__avx2,
    avx2::f32_vbinary__avx2,
    avx2::f32_softmax_row__avx2,
    avx2::f32_softmax_columns__avx2,
    avx2::f32_layer_norm_row__avx2,
    avx2::f32_rms_norm_row__avx2,
    avx2::f32_rotary__avx2,
    avx2::f32_max_row__avx2,
    avx2::f32_add_row__avx2,
    avx2::f32_copy_row__avx2,
    avx2::f32_max_pool_3x3s2__avx2,
    avx2::f32_pool_2x2s2__avx2,
    avx2::f32_pool_s1__avx2,
    nullptr,
    avx2::f32_reduce_max__avx2,
    avx2::f32_reduce_sum__avx2,
    avx2::x32_transpose__avx2,
};

// AVX-512: the AVX2 kernels but for the unary maps, whose transcendental approximations are
// bound by vector instructions per element, halved at 16 lanes (EfficientNet's SiLU), the 3x3 / 2
// max pool of narrow planes (masked tails), and the window pools, which need masked loads that skip
// the taps outside a plane to run over many small planes as one array (GoogLeNet's and
// Inception-v3's pools). The rows and reductions stay AVX2: bound by memory, and on Zen 4 a 512-bit
// shuffle costs two. Block transposes take 16x16 register transposes: a whole 64-byte line of each
// of 16 rows per step.
const VectorUkernels kAvx512 = [] {
  VectorUkernels t = kAvx2;
  t.isa = Isa::kAvx512;
  t.unary = avx512::f32_vunary__avx512;
  t.max_pool_3x3s2 = avx512::f32_max_pool_3x3s2__avx512;
  t.window_planes = avx512::f32_window_planes__avx512;
  t.transpose_x32 = avx512::x32_transpose__avx512;
  return t;
}();

}  // namespace

const VectorUkernels* vector_ukernels_for(Isa isa) {
  if (!isa_supported(isa)) return nullptr;
  return isa == Isa::kScalar ? &kScalar : isa == Isa::kAvx2 ? &kAvx2 : &kAvx512;
}

const VectorUkernels& vector_ukernels() {
  const Expected<Isa>& isa = selected_isa();
  const VectorUkernels* table = vector_ukernels_for(isa.is_ok() ? isa.value() : Isa::kScalar);
  if (!isa.is_ok()) table = vector_ukernels_for(cpu_features().best_isa());
  return *table;
}

}  // namespace peregrine::cpu
