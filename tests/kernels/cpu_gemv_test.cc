// The small-M GEMM path (gemm/f32_gemv.h) at every ISA level this machine has, against a naive loop
// in double: m = 1..4, odd n (1, 7, 13, 17, 127: partial NR panels) and k (1, 255..257, 700: one or
// several K blocks), alpha / beta, per-column bias, residual and activation in the epilogue, 1 and
// 3 threads, C ending at a guard page. Then MatMul / Gemm with constant B at M = 1..5 through the
// CPU backend against the reference backend.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/gemm/f32_gemv.h"
#include "cpu_one_node_graph.h"
#include "cpu_test_util.h"

namespace peregrine {
namespace {

using namespace cpu;
using cpu::testing::GuardedBuffer;
using cpu::testing::random_floats;

TEST(CpuGemv, MatchesNaiveLoop) {
  for (Isa isa : cpu::testing::isa_levels()) {
    const GemmKernelInfo *kernel = f32_gemm_kernel_for(isa);
    if (!kernel) continue;
    for (int64_t k : {1, 255, 256, 257, 700})
      for (int64_t n : {1, 7, 13, 17, 33, 127}) {
        const std::vector<float> bv = random_floats(size_t(k * n), 2);
        const PackedMatrix b = PackedMatrix::pack_b(*kernel, MatrixView{bv.data(), n, 1}, k, n);
        for (int64_t m = 1; m <= kGemvMaxM; ++m)
          for (int variant = 0; variant < 3; ++variant) {
            const int threads = variant == 1 ? 3 : 1;
            SCOPED_TRACE(std::string(kernel->name) + " m=" + std::to_string(m) +
                         " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                         " variant=" + std::to_string(variant));
            ASSERT_TRUE(f32_gemv_applies(*kernel, m, b));
            const int64_t lda = k + 3;  // a row stride wider than K
            const std::vector<float> av = random_floats(size_t(m * lda), 1);
            const std::vector<float> bias = random_floats(size_t(n), 3);
            const std::vector<float> res = random_floats(size_t(m * n), 4);
            GuardedBuffer c(size_t(m * n));
            const std::vector<float> c0 = random_floats(c.size(), 5);
            std::copy(c0.begin(), c0.end(), c.data());
            const float alpha = variant == 2 ? 0.5f : 1.0f, beta = variant == 2 ? -2.0f : 0.0f;
            GemmEpilogue ep;
            if (variant >= 1) {
              ep.bias_kind = GemmEpilogue::Bias::kPerColumn;
              ep.bias = bias.data();
              ep.residual = res.data();
              ep.ldr = n;
              ep.activation = variant == 1 ? Activation::kRelu : Activation::kNone;
            }
            f32_gemv(*kernel, m, n, k, av.data(), lda, b, c.data(), n, alpha, beta, ep, threads);
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                double acc = 0;
                for (int64_t p = 0; p < k; ++p)
                  acc += double(av[size_t(i * lda + p)]) * bv[size_t(p * n + j)];
                double v = alpha * acc + (beta != 0.0f ? beta * c0[size_t(i * n + j)] : 0.0);
                if (variant >= 1) v += bias[size_t(j)] + res[size_t(i * n + j)];
                if (variant == 1) v = std::max(v, 0.0);
                ASSERT_NEAR(c.data()[i * n + j], v, 1e-5 * (1 + std::sqrt(double(k))))
                    << "at (" << i << ", " << j << ")";
              }
          }
        EXPECT_FALSE(f32_gemv_applies(*kernel, kGemvMaxM + 1, b));
      }
  }
}

using cpu::testing::compare_with_reference;
using cpu::testing::int_attr;
using cpu::testing::OneNodeGraph;
using cpu::testing::random_tensor;

TEST(CpuGemv, MatMulAndGemmMatchReference) {
  for (int64_t m : {1, 2, 3, 4, 5})
    for (int64_t n : {9, 130}) {
      SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n));
      OneNodeGraph mm("MatMul",
                      {{"A", random_tensor({m, 300}, 1)}, {"Bm", random_tensor({300, n}, 2)}},
                      {false, true}, {});
      compare_with_reference(mm, cpu_backend(), "cpu/", 2e-4f);
      OneNodeGraph batched(
          "MatMul", {{"A", random_tensor({2, 1, 1, 40}, 1)}, {"Bm", random_tensor({40, n}, 2)}},
          {false, true}, {});
      compare_with_reference(batched, cpu_backend(), "cpu/", 2e-4f);
      OneNodeGraph gemm("Gemm",
                        {{"A", random_tensor({m, 257}, 1)},
                         {"Bm", random_tensor({n, 257}, 2)},
                         {"C", random_tensor({n}, 3)}},
                        {false, true, true}, {int_attr("transB", 1)});
      compare_with_reference(gemm, cpu_backend(), "cpu/", 2e-4f);
    }
}

}  // namespace
}  // namespace peregrine
