// bf16 GEMM (micro-kernel, packers, driver) against a double-precision loop over the same
// bf16-rounded operands: every product of two bf16 values is exact in float32, so the only
// difference is the order of the float32 sums. Skipped where the CPU has no AVX512_BF16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/gemm/bf16_gemm.h"
#include "backends/cpu/gemm/f32_gemm.h"
#include "cpu_test_util.h"

namespace peregrine::cpu {
namespace {

using testing::random_floats;

float round_bf16(float x) { return bf16_bits_to_float(float_to_bf16_bits(x)); }

TEST(Bf16Conversion, RoundsToNearestEven) {
  EXPECT_EQ(round_bf16(1.0f), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(round_bf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);
  EXPECT_EQ(round_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(round_bf16(std::nanf(""))));
  EXPECT_EQ(round_bf16(-INFINITY), -INFINITY);
}

// An im2col-like packer over a row-major matrix, to drive the packer path.
class MatrixPacker : public BPanelPacker {
 public:
  MatrixPacker(const float* b, int64_t ldb) : b_(b), ldb_(ldb) {}
  void pack(int64_t p0, int64_t j0, int64_t kc, int64_t nc, int nr, int64_t panel_stride,
            float* dst) const override {
    for (int64_t jr = 0; jr < nc; jr += nr, dst += panel_stride)
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t j = 0; j < nr; ++j)
          dst[p * nr + j] = jr + j < nc ? b_[(p0 + p) * ldb_ + j0 + jr + j] : 0.0f;
  }

 private:
  const float* b_;
  int64_t ldb_;
};

enum class AForm { kView, kTransposedView, kPacked };
enum class BForm { kView, kTransposedView, kPacked, kPacker };

// epilogue: per-row bias + residual + Relu (fused into the micro-kernel); sigmoid: per-column
// bias + Sigmoid instead (the tile epilogue after the store).
void check(int64_t m, int64_t n, int64_t k, AForm af, BForm bf, float alpha, float beta,
           bool epilogue, int threads, bool sigmoid = false) {
  const Bf16GemmKernelInfo* kernel = bf16_gemm_kernel();
  SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
               " a=" + std::to_string(static_cast<int>(af)) + " b=" +
               std::to_string(static_cast<int>(bf)) + " threads=" + std::to_string(threads));
  std::vector<float> a = random_floats(static_cast<size_t>(m * k), 11);
  std::vector<float> b = random_floats(static_cast<size_t>(k * n), 12);
  std::vector<float> at(a.size()), bt(b.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) at[p * m + i] = a[i * k + p];
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) bt[j * k + p] = b[p * n + j];
  const int64_t ldc = n + 5;
  std::vector<float> c = random_floats(static_cast<size_t>(m * ldc), 13), c0 = c;
  std::vector<float> bias = random_floats(static_cast<size_t>(std::max(m, n)), 14);
  std::vector<float> residual = random_floats(static_cast<size_t>(m * n), 15);
  GemmEpilogue ep;
  if (epilogue) {
    ep.bias_kind = GemmEpilogue::Bias::kPerRow;
    ep.bias = bias.data();
    ep.residual = residual.data();
    ep.ldr = n;
    ep.activation = Activation::kRelu;
  }
  if (sigmoid) {
    ep.bias_kind = GemmEpilogue::Bias::kPerColumn;
    ep.bias = bias.data();
    ep.activation = Activation::kSigmoid;
  }
  Bf16PackedMatrix pa = Bf16PackedMatrix::pack_a(*kernel, MatrixView{a.data(), k, 1}, m, k);
  Bf16PackedMatrix pb = Bf16PackedMatrix::pack_b(*kernel, MatrixView{bt.data(), 1, k}, k, n);
  MatrixPacker packer(b.data(), n);
  const Bf16GemmOperand oa = af == AForm::kView             ? Bf16GemmOperand::of(a.data(), k, 1)
                             : af == AForm::kTransposedView ? Bf16GemmOperand::of(at.data(), 1, m)
                                                            : Bf16GemmOperand::of(pa);
  const Bf16GemmOperand ob = bf == BForm::kView             ? Bf16GemmOperand::of(b.data(), n, 1)
                             : bf == BForm::kTransposedView ? Bf16GemmOperand::of(bt.data(), 1, k)
                             : bf == BForm::kPacked         ? Bf16GemmOperand::of(pb)
                                                            : Bf16GemmOperand::of(packer);
  bf16_gemm(*kernel, m, n, k, oa, ob, c.data(), ldc, alpha, beta, ep, f32_gemm_kernel().epilogue,
            threads);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const float got = c[i * ldc + j];
      if (j >= n) {
        ASSERT_EQ(got, c0[i * ldc + j]) << "wrote past the tile at " << i << "," << j;
        continue;
      }
      double sum = 0, mag = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double prod =
            static_cast<double>(round_bf16(a[i * k + p])) * round_bf16(b[p * n + j]);
        sum += prod;
        mag += std::fabs(prod);
      }
      double want = alpha * sum + (beta != 0.0f ? beta * c0[i * ldc + j] : 0.0);
      if (epilogue) want = std::max(0.0, want + bias[i] + residual[i * n + j]);
      if (sigmoid) want = 1.0 / (1.0 + std::exp(-(want + bias[j])));
      const double tol = 1e-6 * (std::fabs(alpha) * mag + std::fabs(beta) + 1) * 8;
      ASSERT_NEAR(got, want, tol) << "at " << i << "," << j;
    }
}

TEST(Bf16Gemm, MatchesRoundedOperandsOnOddShapes) {
  if (!bf16_gemm_kernel()) GTEST_SKIP() << bf16_unavailable_reason();
  struct Shape3 {
    int64_t m, n, k;
  };
  for (Shape3 s : {Shape3{1, 1, 1}, Shape3{14, 32, 256}, Shape3{13, 31, 7}, Shape3{15, 33, 257},
                   Shape3{29, 100, 513}, Shape3{3, 700, 64}, Shape3{64, 49, 1152}})
    for (AForm af : {AForm::kView, AForm::kTransposedView, AForm::kPacked})
      for (BForm bf : {BForm::kView, BForm::kTransposedView, BForm::kPacked, BForm::kPacker})
        for (int threads : {1, 2}) check(s.m, s.n, s.k, af, bf, 1.0f, 0.0f, false, threads);
}

TEST(Bf16Gemm, AlphaBetaAndEpilogue) {
  if (!bf16_gemm_kernel()) GTEST_SKIP() << bf16_unavailable_reason();
  check(17, 45, 300, AForm::kPacked, BForm::kView, 0.5f, -2.0f, false, 2);
  check(17, 45, 300, AForm::kView, BForm::kPacked, -1.5f, 1.0f, true, 1);
  check(30, 600, 40, AForm::kPacked, BForm::kPacker, 1.0f, 0.0f, true, 2);
  check(5, 7, 0, AForm::kView, BForm::kView, 1.0f, 0.5f, true, 1);  // k == 0: beta * C
  check(33, 70, 129, AForm::kView, BForm::kPacked, 1.0f, 0.0f, false, 2, true);
}

}  // namespace
}  // namespace peregrine::cpu
