// The CPU backend's vector micro-kernels (ukernels/f32_vector_ukernels.h) at
// every ISA level this machine has, against double-precision std:: math and
// naive loops (odd lengths, a guard page after each output); and the
// elementwise / Softmax / LayerNorm op kernels against the reference backend
// through the executor (at the selected ISA; run the suite again with
// PEREGRINE_ISA=scalar for the scalar level).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"
#include "cpu_one_node_graph.h"
#include "cpu_test_util.h"

namespace peregrine::cpu {
namespace {

using testing::GuardedBuffer;
using testing::random_floats;

std::vector<const VectorUkernels*> all_tables() {
  std::vector<const VectorUkernels*> tables;
  for (Isa isa : testing::isa_levels())
    if (const VectorUkernels* t = vector_ukernels_for(isa)) tables.push_back(t);
  return tables;
}

const size_t kLengths[] = {0, 1, 7, 8, 9, 13, 16, 31, 33, 127, 1000};

// Max relative error of `op` over x in [lo, hi) step `step` (values with |f| <
// floor measured against floor instead, i.e. absolute below it), and the worst x.
struct ErrorStats {
  double max_rel = 0, worst_x = 0;
};
ErrorStats sweep(const VectorUkernels& uk, UnaryOp op, double (*ref)(double), float lo, float hi,
                 float step, double floor) {
  std::vector<float> x;
  for (float v = lo; v < hi; v += step) x.push_back(v);
  std::vector<float> y(x.size());
  uk.unary(op, x.data(), y.data(), x.size());
  ErrorStats s;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = ref(x[i]);
    const double err = std::fabs(y[i] - want) / std::max(std::fabs(want), floor);
    if (err > s.max_rel) {
      s.max_rel = err;
      s.worst_x = x[i];
    }
  }
  return s;
}

double ref_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double ref_gelu(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
double ref_gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double ref_exp(double x) { return std::exp(x); }
double ref_tanh(double x) { return std::tanh(x); }
double ref_erf(double x) { return std::erf(x); }

// The error bounds stated in ukernels/f32_vmath_avx2.h (the scalar level, std::
// in float, is held to the same bounds).
TEST(VectorMath, ErrorBoundsOverDenseSweeps) {
  for (const VectorUkernels* uk : all_tables()) {
    SCOPED_TRACE(isa_name(uk->isa));
    auto check = [&](const char* name, UnaryOp op, double (*ref)(double), float lo, float hi,
                     float step, double floor, double bound) {
      ErrorStats s = sweep(*uk, op, ref, lo, hi, step, floor);
      std::printf("  [%s] %-10s max err %.3g at x = %.7g\n", isa_name(uk->isa), name, s.max_rel,
                  s.worst_x);
      EXPECT_LE(s.max_rel, bound) << name << " at x = " << s.worst_x;
    };
    // Relative where the result is a normal float.
    check("exp", UnaryOp::kExp, ref_exp, -87.3f, 88.7f, 1.1e-4f, 0.0, 3e-7);
    check("tanh", UnaryOp::kTanh, ref_tanh, -10.0f, 10.0f, 1.3e-5f, 0.0, 1e-6);
    check("tanh-tiny", UnaryOp::kTanh, ref_tanh, -1e-3f, 1e-3f, 1.1e-8f, 0.0, 1e-6);
    check("sigmoid", UnaryOp::kSigmoid, ref_sigmoid, -87.0f, 30.0f, 1.1e-4f, 0.0, 1e-6);
    check("erf-small", UnaryOp::kErf, ref_erf, -0.5f, 0.5f, 1.3e-6f, 0.0, 1e-6);
    // Absolute (floor 1).
    check("erf", UnaryOp::kErf, ref_erf, -6.0f, 6.0f, 1.3e-5f, 1.0, 5e-7);
    check("gelu", UnaryOp::kGelu, ref_gelu, -12.0f, 12.0f, 1.3e-5f, 1.0, 1e-6);
    check("gelu-tanh", UnaryOp::kGeluTanh, ref_gelu_tanh, -12.0f, 12.0f, 1.3e-5f, 1.0, 1e-6);
  }
}

TEST(VectorMath, SpecialValues) {
  const float inf = INFINITY, nan = NAN;
  for (const VectorUkernels* uk : all_tables()) {
    SCOPED_TRACE(isa_name(uk->isa));
    const float x[] = {inf, -inf, nan, 0.0f, 100.0f, -200.0f, 88.8f, -110.0f, 1e-30f};
    float y[9];
    uk->unary(UnaryOp::kExp, x, y, 9);
    EXPECT_EQ(y[0], inf);
    EXPECT_EQ(y[1], 0.0f);
    EXPECT_TRUE(std::isnan(y[2]));
    EXPECT_EQ(y[3], 1.0f);
    EXPECT_EQ(y[4], inf);
    EXPECT_EQ(y[5], 0.0f);
    EXPECT_EQ(y[6], inf);
    EXPECT_EQ(y[7], 0.0f);
    uk->unary(UnaryOp::kTanh, x, y, 9);
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[1], -1.0f);
    EXPECT_TRUE(std::isnan(y[2]));
    EXPECT_EQ(y[8], 1e-30f);
    uk->unary(UnaryOp::kSigmoid, x, y, 9);
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[1], 0.0f);
    EXPECT_TRUE(std::isnan(y[2]));
    uk->unary(UnaryOp::kErf, x, y, 9);
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[1], -1.0f);
    EXPECT_TRUE(std::isnan(y[2]));
  }
}

TEST(VectorUkernels, UnaryOddLengthsAndInPlace) {
  const UnaryOp ops[] = {UnaryOp::kRelu, UnaryOp::kSigmoid, UnaryOp::kSilu, UnaryOp::kTanh,
                         UnaryOp::kErf,  UnaryOp::kExp,     UnaryOp::kGelu, UnaryOp::kGeluTanh};
  for (const VectorUkernels* uk : all_tables()) {
    for (UnaryOp op : ops) {
      for (size_t n : kLengths) {
        SCOPED_TRACE(std::string(isa_name(uk->isa)) + " op=" + std::to_string(int(op)) +
                     " n=" + std::to_string(n));
        std::vector<float> x = random_floats(n, 7 + static_cast<uint32_t>(n), -4.0f, 4.0f);
        GuardedBuffer y(n);
        uk->unary(op, x.data(), y.data(), n);
        std::vector<float> in_place = x;
        uk->unary(op, in_place.data(), in_place.data(), n);
        std::vector<float> want(n);
        scalar::f32_vunary__scalar(op, x.data(), want.data(), n);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_NEAR(y.data()[i], want[i], 2e-6f * std::max(1.0f, std::fabs(want[i])));
          ASSERT_EQ(in_place[i], y.data()[i]);
        }
      }
    }
  }
}

TEST(VectorUkernels, BinaryStepsAndOddLengths) {
  for (const VectorUkernels* uk : all_tables()) {
    for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv}) {
      for (size_t n : kLengths) {
        for (size_t a_step : {0, 1}) {
          for (size_t b_step : {0, 1}) {
            SCOPED_TRACE(std::string(isa_name(uk->isa)) + " op=" + std::to_string(int(op)) +
                         " n=" + std::to_string(n) + " steps=" + std::to_string(a_step) +
                         std::to_string(b_step));
            std::vector<float> a = random_floats(std::max<size_t>(n, 1), 1, 0.5f, 2.0f);
            std::vector<float> b = random_floats(std::max<size_t>(n, 1), 2, 0.5f, 2.0f);
            GuardedBuffer y(n);
            uk->binary(op, a.data(), a_step, b.data(), b_step, y.data(), n);
            for (size_t i = 0; i < n; ++i) {
              const float p = a[i * a_step], q = b[i * b_step];
              const float want = op == BinaryOp::kAdd   ? p + q
                                 : op == BinaryOp::kSub ? p - q
                                 : op == BinaryOp::kMul ? p * q
                                                        : p / q;
              ASSERT_EQ(y.data()[i], want) << "at " << i;
            }
          }
        }
      }
    }
  }
}

TEST(VectorUkernels, SoftmaxAndLayerNormRows) {
  for (const VectorUkernels* uk : all_tables()) {
    for (size_t n : kLengths) {
      if (n == 0) continue;
      SCOPED_TRACE(std::string(isa_name(uk->isa)) + " n=" + std::to_string(n));
      std::vector<float> x = random_floats(n, 3, -5.0f, 5.0f);
      std::vector<float> gamma = random_floats(n, 4), beta = random_floats(n, 5);
      GuardedBuffer y(n);
      uk->softmax_row(x.data(), y.data(), n);
      double m = -INFINITY, sum = 0;
      for (float v : x) m = std::max<double>(m, v);
      for (float v : x) sum += std::exp(v - m);
      for (size_t i = 0; i < n; ++i)
        ASSERT_NEAR(y.data()[i], std::exp(x[i] - m) / sum, 1e-6) << "softmax at " << i;
      for (bool with_beta : {false, true}) {
        uk->layer_norm_row(x.data(), gamma.data(), with_beta ? beta.data() : nullptr, 1e-5f,
                           y.data(), n);
        double mean = 0, var = 0;
        for (float v : x) mean += v;
        mean /= n;
        for (float v : x) var += (v - mean) * (v - mean);
        var /= n;
        for (size_t i = 0; i < n; ++i) {
          const double want =
              (x[i] - mean) / std::sqrt(var + 1e-5) * gamma[i] + (with_beta ? beta[i] : 0.0);
          ASSERT_NEAR(y.data()[i], want, 1e-5) << "layernorm at " << i;
        }
      }
    }
  }
}

// Masked scores (-FLT_MAX, -inf, and values 90-100 below the row's max, whose exponentials are
// below FLT_MIN): the softmax of the rest, the masked terms 0 to within 1e-30.
TEST(VectorUkernels, SoftmaxRowWithMaskedScores) {
  for (const VectorUkernels* uk : all_tables()) {
    for (size_t n : {5, 8, 19, 128}) {
      SCOPED_TRACE(std::string(isa_name(uk->isa)) + " n=" + std::to_string(n));
      std::vector<float> x = random_floats(n, 7, -2.0f, 2.0f);
      for (size_t i = 1; i < n; i += 3) x[i] = -std::numeric_limits<float>::max();
      for (size_t i = 2; i < n; i += 6) x[i] = -90.0f - static_cast<float>(i % 10);
      if (n > 4) x[4] = -INFINITY;
      GuardedBuffer y(n);
      uk->softmax_row(x.data(), y.data(), n);
      double m = -INFINITY, sum = 0;
      for (float v : x) m = std::max<double>(m, v);
      for (float v : x) sum += std::exp(v - m);
      for (size_t i = 0; i < n; ++i) {
        const double want = std::exp(x[i] - m) / sum;
        ASSERT_NEAR(y.data()[i], want, want < 1e-30 ? 1e-30 : 1e-6) << "softmax at " << i;
      }
    }
  }
}

TEST(VectorUkernels, SoftmaxColumns) {
  for (const VectorUkernels* uk : all_tables()) {
    for (size_t len : {1, 4, 16}) {
      for (size_t width : {1, 7, 8, 13, 131}) {
        SCOPED_TRACE(std::string(isa_name(uk->isa)) + " len=" + std::to_string(len) +
                     " width=" + std::to_string(width));
        const size_t stride = width + 5;  // rows longer than the block: columns past width stay
        const size_t count = (len - 1) * stride + width;
        std::vector<float> x = random_floats(count, 21, -6.0f, 6.0f);
        GuardedBuffer y(count);
        std::fill(y.data(), y.data() + count, -7.0f);
        uk->softmax_columns(x.data(), y.data(), len, stride, width);
        for (size_t j = 0; j < stride && j < count; ++j) {
          if (j >= width) {
            ASSERT_EQ(y.data()[j], -7.0f) << "column " << j << " outside the block written";
            continue;
          }
          double m = -INFINITY, sum = 0;
          for (size_t k = 0; k < len; ++k) m = std::max<double>(m, x[k * stride + j]);
          for (size_t k = 0; k < len; ++k) sum += std::exp(x[k * stride + j] - m);
          for (size_t k = 0; k < len; ++k)
            ASSERT_NEAR(y.data()[k * stride + j], std::exp(x[k * stride + j] - m) / sum, 1e-6);
        }
      }
    }
  }
}

TEST(VectorUkernels, PoolRowsCopyRowsAndReductions) {
  for (const VectorUkernels* uk : all_tables()) {
    for (size_t n : kLengths) {
      for (size_t stride : {1, 2, 3}) {
        SCOPED_TRACE(std::string(isa_name(uk->isa)) + " n=" + std::to_string(n) +
                     " stride=" + std::to_string(stride));
        // The input ends exactly at a guard page too: no read past x[(n - 1) * stride].
        const size_t in_len = n == 0 ? 0 : (n - 1) * stride + 1;
        GuardedBuffer x(in_len);
        std::vector<float> xv = random_floats(in_len, 11);
        std::copy(xv.begin(), xv.end(), x.data());
        std::vector<float> init = random_floats(n, 12);
        for (bool max : {true, false}) {
          GuardedBuffer acc(n);
          std::copy(init.begin(), init.end(), acc.data());
          (max ? uk->max_row : uk->add_row)(x.data(), stride, acc.data(), n);
          for (size_t j = 0; j < n; ++j) {
            const float v = xv[j * stride];
            ASSERT_EQ(acc.data()[j], max ? std::max(init[j], v) : init[j] + v) << "at " << j;
          }
        }
        GuardedBuffer y(n);  // copy_row: every output written, none past n
        uk->copy_row(x.data(), stride, y.data(), n);
        for (size_t j = 0; j < n; ++j) ASSERT_EQ(y.data()[j], xv[j * stride]) << "at " << j;
      }
      GuardedBuffer x(n);
      std::vector<float> xv = random_floats(n, 13);
      std::copy(xv.begin(), xv.end(), x.data());
      float m = -INFINITY;
      double s = 0;
      for (float v : xv) {
        m = std::max(m, v);
        s += v;
      }
      EXPECT_EQ(uk->reduce_max(x.data(), n), m);
      EXPECT_NEAR(uk->reduce_sum(x.data(), n), s, 1e-5 * std::max<size_t>(n, 1));
    }
  }
}

// pool_s1 (where a level has it) against a naive loop: kernels 1x1 to 5x7, pads 0 .. k - 1 on
// each side, planes 1 to 60 wide (the 8-column vectors and masked tails), the input ending at a
// guard page and the output exactly out_h x out_w (a guard page after it).
TEST(VectorUkernels, PoolStride1PlaneMatchesNaiveLoop) {
  struct Case {
    size_t h, w, kh, kw, pt, pl, pb, pr;
  };
  const Case cases[] = {
      {7, 7, 3, 3, 1, 1, 1, 1},   {28, 28, 3, 3, 1, 1, 1, 1}, {14, 9, 5, 5, 2, 2, 2, 2},
      {1, 1, 3, 3, 1, 1, 1, 1},   {5, 35, 1, 7, 0, 3, 0, 3},  {9, 17, 7, 1, 3, 0, 3, 0},
      {6, 16, 2, 2, 0, 0, 1, 1},  {4, 8, 5, 7, 0, 6, 4, 0},   {3, 3, 5, 5, 2, 2, 2, 2},
      {12, 13, 3, 4, 0, 0, 0, 0}, {6, 60, 3, 3, 1, 1, 1, 1},  {4, 57, 3, 5, 1, 2, 1, 2}};
  int levels = 0;
  for (const VectorUkernels* uk : all_tables()) {
    if (!uk->pool_s1) continue;
    ++levels;
    for (const Case& c : cases)
      for (bool max : {true, false}) {
        SCOPED_TRACE(std::string(isa_name(uk->isa)) + " " + std::to_string(c.h) + "x" +
                     std::to_string(c.w) + " k=" + std::to_string(c.kh) + "x" +
                     std::to_string(c.kw) + " max=" + std::to_string(max));
        const size_t oh = c.h + c.pt + c.pb - c.kh + 1, ow = c.w + c.pl + c.pr - c.kw + 1;
        GuardedBuffer x(c.h * c.w);
        std::vector<float> xv = random_floats(c.h * c.w, 21, -2, 2);
        std::copy(xv.begin(), xv.end(), x.data());
        GuardedBuffer y(oh * ow);
        std::vector<float> row(pool_s1_scratch_floats(ow, c.kw));
        uk->pool_s1(x.data(), c.h, c.w, c.kh, c.kw, c.pt, c.pl, y.data(), oh, ow, max, row.data());
        for (size_t i = 0; i < oh; ++i)
          for (size_t j = 0; j < ow; ++j) {
            double want = max ? -INFINITY : 0.0;
            for (size_t ki = 0; ki < c.kh; ++ki)
              for (size_t kj = 0; kj < c.kw; ++kj) {
                const int64_t ih = int64_t(i + ki) - int64_t(c.pt),
                              iw = int64_t(j + kj) - int64_t(c.pl);
                if (ih < 0 || iw < 0 || ih >= int64_t(c.h) || iw >= int64_t(c.w)) continue;
                const float v = xv[size_t(ih) * c.w + size_t(iw)];
                want = max ? std::max<double>(want, v) : want + v;
              }
            ASSERT_NEAR(y.data()[i * ow + j], want, 1e-5) << "at " << i << "," << j;
          }
      }
  }
  if (levels == 0) GTEST_SKIP() << "no ISA level with pool_s1 on this CPU";
}

// max_pool_3x3s2 (where a level has it) against a naive loop: planes 1 to 111 wide (full
// vectors, masked tails, one-column planes; narrow ones take all vertical rows first), pads 0 /
// 1 at each end, the input ending at a
// guard page and the output exactly out_h x out_w (a guard page after it).
TEST(VectorUkernels, MaxPool3x3s2PlaneMatchesNaiveLoop) {
  struct Case {
    size_t h, w, pt, pl, pb, pr;
  };
  const Case cases[] = {{111, 111, 0, 0, 0, 0}, {112, 112, 1, 1, 1, 1}, {56, 56, 1, 1, 0, 0},
                        {35, 35, 0, 0, 0, 0},   {17, 33, 1, 0, 1, 1},   {3, 3, 0, 0, 0, 0},
                        {1, 1, 1, 1, 1, 1},     {5, 66, 0, 1, 0, 1},    {9, 34, 1, 1, 0, 0},
                        {17, 17, 0, 0, 0, 0},   {24, 23, 1, 1, 1, 0},   {8, 13, 0, 1, 0, 1},
                        {27, 27, 0, 0, 1, 1},   {14, 14, 1, 1, 0, 0}};
  int levels = 0;
  for (const VectorUkernels* uk : all_tables()) {
    if (!uk->max_pool_3x3s2) continue;
    ++levels;
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(isa_name(uk->isa)) + " " + std::to_string(c.h) + "x" +
                   std::to_string(c.w) + " pads " + std::to_string(c.pt) + std::to_string(c.pl) +
                   std::to_string(c.pb) + std::to_string(c.pr));
      const size_t oh = (c.h + c.pt + c.pb - 3) / 2 + 1, ow = (c.w + c.pl + c.pr - 3) / 2 + 1;
      GuardedBuffer x(c.h * c.w);
      std::vector<float> xv = random_floats(c.h * c.w, 23, -2, 2);
      std::copy(xv.begin(), xv.end(), x.data());
      GuardedBuffer y(oh * ow);
      std::vector<float> row(max_pool_3x3s2_scratch_floats(c.w, oh));
      uk->max_pool_3x3s2(x.data(), c.h, c.w, c.pt, c.pl, y.data(), oh, ow, row.data());
      for (size_t i = 0; i < oh; ++i)
        for (size_t j = 0; j < ow; ++j) {
          float want = -INFINITY;
          for (size_t ki = 0; ki < 3; ++ki)
            for (size_t kj = 0; kj < 3; ++kj) {
              const int64_t ih = int64_t(2 * i + ki) - int64_t(c.pt);
              const int64_t iw = int64_t(2 * j + kj) - int64_t(c.pl);
              if (ih < 0 || iw < 0 || ih >= int64_t(c.h) || iw >= int64_t(c.w)) continue;
              want = std::max(want, xv[size_t(ih) * c.w + size_t(iw)]);
            }
          ASSERT_EQ(y.data()[i * ow + j], want) << "at " << i << "," << j;
        }
    }
  }
  if (levels == 0) GTEST_SKIP() << "no ISA level with max_pool_3x3s2 on this CPU";
}

// pool_2x2s2 (where a level has it) against a naive loop, max and mean: planes 2 to 113 wide
// (full vectors, element tails, an unused last column), the input ending at a guard page and
// the output exactly out_h x out_w (a guard page after it).
TEST(VectorUkernels, Pool2x2s2PlaneMatchesNaiveLoop) {
  const std::pair<size_t, size_t> sizes[] = {{2, 2},  {3, 3},  {4, 16},  {5, 17},
                                             {8, 33}, {9, 34}, {56, 56}, {7, 113}};
  int levels = 0;
  for (const VectorUkernels* uk : all_tables()) {
    if (!uk->pool_2x2s2) continue;
    ++levels;
    for (const auto& [h, w] : sizes)
      for (bool max : {true, false}) {
        SCOPED_TRACE(std::string(isa_name(uk->isa)) + " " + std::to_string(h) + "x" +
                     std::to_string(w) + (max ? " max" : " mean"));
        const size_t oh = h / 2, ow = w / 2;
        GuardedBuffer x(h * w);
        std::vector<float> xv = random_floats(h * w, 29, -2, 2);
        std::copy(xv.begin(), xv.end(), x.data());
        GuardedBuffer y(oh * ow);
        uk->pool_2x2s2(x.data(), w, y.data(), oh, ow, max);
        for (size_t i = 0; i < oh; ++i)
          for (size_t j = 0; j < ow; ++j) {
            const float a = xv[2 * i * w + 2 * j], b = xv[2 * i * w + 2 * j + 1];
            const float c = xv[(2 * i + 1) * w + 2 * j], d = xv[(2 * i + 1) * w + 2 * j + 1];
            const float want =
                max ? std::max(std::max(a, b), std::max(c, d)) : ((a + b) + (c + d)) * 0.25f;
            ASSERT_NEAR(y.data()[i * ow + j], want, max ? 0.0f : 1e-6f) << "at " << i << "," << j;
          }
      }
  }
  if (levels == 0) GTEST_SKIP() << "no ISA level with pool_2x2s2 on this CPU";
}

// --- Op kernels through the executor, against the reference backend.

using testing::compare_with_reference;
using testing::OneNodeGraph;
using testing::random_tensor;
using testing::string_attr;

const Shape kShapes[] = {{1}, {7}, {13}, {127}, {3, 5, 9}, {2, 3, 4, 5}, {0, 4}, {1, 1000}};

TEST(VectorUkernels, RotaryMatchesNaiveLoopAtEveryIsa) {
  for (const VectorUkernels* uk : all_tables()) {
    SCOPED_TRACE(isa_name(uk->isa));
    for (bool interleaved : {false, true})
      for (size_t half : {1, 3, 4, 5, 8, 9, 17, 32, 33}) {
        SCOPED_TRACE("half=" + std::to_string(half) +
                     " interleaved=" + std::to_string(interleaved));
        const std::vector<float> x = random_floats(2 * half, 3, -2, 2);
        const std::vector<float> c = random_floats(half, 4), s = random_floats(half, 5);
        GuardedBuffer y(2 * half);
        uk->rotary(x.data(), c.data(), s.data(), y.data(), half, interleaved);
        for (size_t i = 0; i < half; ++i) {
          const size_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
          const double x1 = x[i1], x2 = x[i2];
          EXPECT_NEAR(y.data()[i1], c[i] * x1 - s[i] * x2, 1e-6) << i;
          EXPECT_NEAR(y.data()[i2], s[i] * x1 + c[i] * x2, 1e-6) << i;
        }
      }
  }
}

// RotaryEmbedding through the executor: 3-D with num_heads and 4-D, with position ids or
// per-token caches, a rotary dim short of the head (the rest passed through), odd sizes.
TEST(CpuElementwise, RotaryEmbeddingMatchesReference) {
  struct RotaryCase {
    bool four_d, ids, interleaved;
    int64_t batch, seq, heads, head_size, rotary;
  };
  for (const RotaryCase& c : {RotaryCase{false, true, false, 1, 7, 3, 10, 0},
                              RotaryCase{false, false, true, 2, 5, 2, 18, 0},
                              RotaryCase{true, true, true, 2, 9, 3, 34, 18},
                              RotaryCase{true, false, false, 1, 13, 4, 64, 32},
                              RotaryCase{false, true, true, 3, 1, 5, 6, 2}}) {
    SCOPED_TRACE("4d=" + std::to_string(c.four_d) + " ids=" + std::to_string(c.ids) +
                 " interleaved=" + std::to_string(c.interleaved) +
                 " D=" + std::to_string(c.head_size));
    const int64_t half = (c.rotary ? c.rotary : c.head_size) / 2, positions = 20;
    const Shape x = c.four_d ? Shape{c.batch, c.heads, c.seq, c.head_size}
                             : Shape{c.batch, c.seq, c.heads * c.head_size};
    const Shape cache = c.ids ? Shape{positions, half} : Shape{c.batch, c.seq, half};
    std::vector<std::pair<std::string, Tensor>> inputs = {
        {"X", testing::random_tensor(x, 1, -2, 2)},
        {"C", testing::random_tensor(cache, 2)},
        {"S", testing::random_tensor(cache, 3)}};
    if (c.ids) {
      std::vector<int64_t> ids;
      for (int64_t t = 0; t < c.batch * c.seq; ++t) ids.push_back((t * 7 + 3) % positions);
      inputs.push_back({"P", Tensor::from_vector<int64_t>(ids, {c.batch, c.seq})});
    }
    std::vector<ir::Attribute> attrs = {testing::int_attr("interleaved", c.interleaved),
                                        testing::int_attr("rotary_embedding_dim", c.rotary)};
    if (!c.four_d) attrs.push_back(testing::int_attr("num_heads", c.heads));
    testing::OneNodeGraph g("RotaryEmbedding", inputs, std::vector<bool>(inputs.size(), false),
                            attrs, "", 23);
    testing::compare_with_reference(g, cpu_backend(), "cpu/rotary", 1e-6f, 1e-6f);
  }
}

TEST(CpuElementwise, UnaryOpsMatchReference) {
  struct Op {
    const char* type;
    std::string domain;
    std::vector<ir::Attribute> attrs;
    float lo, hi;
  };
  const Op ops[] = {{"Relu", "", {}, -3, 3},
                    {"Sigmoid", "", {}, -10, 10},
                    {"Tanh", "", {}, -6, 6},
                    {"Erf", "", {}, -4, 4},
                    {"Exp", "", {}, -20, 20},
                    {"Gelu", "", {}, -6, 6},
                    {"Gelu", "", {string_attr("approximate", "tanh")}, -6, 6},
                    {"Gelu", "peregrine", {}, -6, 6}};
  for (const Op& op : ops) {
    for (const Shape& shape : kShapes) {
      SCOPED_TRACE(std::string(op.type) + " " + op.domain + " " + shape_to_string(shape));
      OneNodeGraph g(op.type, {{"X", random_tensor(shape, 1, op.lo, op.hi)}}, {false}, op.attrs,
                     op.domain, 20);
      compare_with_reference(g, cpu_backend(), "cpu/unary", 1e-6f, 2e-6f);
    }
  }
}

TEST(CpuElementwise, BinaryBroadcastMatchesReference) {
  struct Case {
    Shape a, b;
  };
  const Case cases[] = {
      {{7}, {7}},
      {{2, 3, 4, 5}, {2, 3, 4, 5}},
      {{127}, {1}},
      {{1}, {13}},
      {{}, {3, 5}},
      {{2, 6, 7, 9}, {6, 1, 1}},        // [N,C,H,W] + [C,1,1]
      {{2, 13, 33}, {33}},              // [B,S,D] + [D]
      {{2, 13, 1}, {2, 13, 33}},        // a broadcast along the last dim
      {{3, 1, 5}, {1, 4, 1}},           // both broadcast
      {{2, 1, 3, 1, 4}, {1, 3, 5, 1}},  // mixed groups
      {{0, 3}, {3}},
      {{1, 40000}, {40000}},  // one long row: split into pieces
      {{300, 7}, {7}},        // many short rows per task
  };
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    for (const Case& c : cases) {
      for (bool swap : {false, true}) {
        const Shape& sa = swap ? c.b : c.a;
        const Shape& sb = swap ? c.a : c.b;
        SCOPED_TRACE(std::string(op) + " " + shape_to_string(sa) + " " + shape_to_string(sb));
        OneNodeGraph g(
            op, {{"A", random_tensor(sa, 1, 0.5f, 2.0f)}, {"B", random_tensor(sb, 2, 0.5f, 2.0f)}},
            {false, false}, {});
        compare_with_reference(g, cpu_backend(), "cpu/binary", 0.0f, 1e-6f);
      }
    }
  }
}

TEST(CpuElementwise, SoftmaxMatchesReference) {
  for (const Shape& shape : {Shape{1}, Shape{7}, Shape{3, 13}, Shape{2, 3, 127}, Shape{4, 0},
                             Shape{2, 5, 1000}, Shape{1, 16, 4, 131}, Shape{2, 3, 1, 9}}) {
    for (int opset : {11, 13}) {
      for (int64_t axis : {-1, 0, 1}) {
        if (axis >= static_cast<int64_t>(shape.size())) continue;
        SCOPED_TRACE(shape_to_string(shape) + " opset " + std::to_string(opset) + " axis " +
                     std::to_string(axis));
        OneNodeGraph g("Softmax", {{"X", random_tensor(shape, 3, -8.0f, 8.0f)}}, {false},
                       {testing::int_attr("axis", axis)}, "", opset);
        compare_with_reference(g, cpu_backend(), "cpu/softmax", 1e-6f, 1e-5f);
      }
    }
  }
}

TEST(CpuElementwise, LayerNormMatchesReference) {
  struct Case {
    Shape x;
    int64_t axis;
    Shape scale;
    bool bias;
    std::string domain;
  };
  const Case cases[] = {{{1}, -1, {1}, true, ""},
                        {{3, 7}, -1, {7}, true, ""},
                        {{2, 13, 127}, -1, {127}, false, ""},
                        {{2, 3, 4, 5}, 2, {4, 5}, true, ""},
                        {{2, 3, 1, 5}, -2, {5}, true, "peregrine"},
                        {{2, 9, 768}, -1, {768}, true, "peregrine"},
                        {{0, 5}, -1, {5}, true, ""}};
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_to_string(c.x) + " axis " + std::to_string(c.axis) + " " + c.domain);
    std::vector<std::pair<std::string, Tensor>> inputs = {{"X", random_tensor(c.x, 1, -3, 3)},
                                                          {"S", random_tensor(c.scale, 2)}};
    std::vector<bool> constant = {false, true};
    if (c.bias) {
      inputs.push_back({"B", random_tensor(c.scale, 3)});
      constant.push_back(true);
    }
    OneNodeGraph g("LayerNormalization", inputs, constant,
                   {testing::int_attr("axis", c.axis), testing::float_attr("epsilon", 1e-5f)},
                   c.domain);
    compare_with_reference(g, cpu_backend(), "cpu/layernorm", 1e-5f, 1e-5f);
  }
}

}  // namespace
}  // namespace peregrine::cpu
