// f32 GEMM micro-kernels and the BLIS driver against naive loops, at every ISA level this
// machine has, over odd sizes, alpha/beta corners, packed operands, epilogues and threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/thread_pool.h"
#include "cpu_test_util.h"

namespace peregrine::cpu {
namespace {

using testing::GuardedBuffer;
using testing::random_floats;

std::vector<const GemmKernelInfo*> available_kernels() {
  std::vector<const GemmKernelInfo*> out;
  for (Isa isa : testing::isa_levels())
    if (const GemmKernelInfo* k = f32_gemm_kernel_for(isa)) out.push_back(k);
  return out;
}

float tolerance(int64_t k) { return 1e-5f * static_cast<float>(k + 4) * 4.0f; }

TEST(CpuFeatures, SelectedIsaIsSupported) {
  ASSERT_TRUE(selected_isa().is_ok());
  EXPECT_TRUE(isa_supported(selected_isa().value()));
  EXPECT_TRUE(isa_supported(Isa::kScalar));
  EXPECT_FALSE(parse_isa("sse9").is_ok());
  EXPECT_NE(f32_gemm_kernel_for(Isa::kScalar), nullptr);
}

// Micro-kernel: full MR x NR tile, C with a row stride wider than NR, last row ending at a
// guard page.
TEST(F32GemmUkernel, MatchesNaiveLoop) {
  for (const GemmKernelInfo* kernel : available_kernels()) {
    const int mr = kernel->mr, nr = kernel->nr;
    for (size_t kc : {0, 1, 2, 3, 7, 13, 127, 256}) {
      struct Case {
        float alpha, beta;
      };
      for (Case ab : {Case{1, 0}, Case{1, 1}, Case{0.5f, -2.0f}, Case{-1.5f, 0}, Case{0, 0.75f}}) {
        SCOPED_TRACE(std::string(kernel->name) + " kc=" + std::to_string(kc) +
                     " alpha=" + std::to_string(ab.alpha) + " beta=" + std::to_string(ab.beta));
        std::vector<float> a = random_floats(kc * mr, 1);
        float* b = static_cast<float*>(
            std::aligned_alloc(64, std::max<size_t>(64, (kc * nr * 4 + 63) / 64 * 64)));
        std::vector<float> bv = random_floats(kc * nr, 2);
        std::copy(bv.begin(), bv.end(), b);
        const size_t ldc = static_cast<size_t>(nr) + 3;
        GuardedBuffer c((mr - 1) * ldc + nr);
        std::vector<float> c0 = random_floats(c.size(), 3);
        // beta == 0 must not read C: NaN there must not reach the output.
        for (size_t i = 0; i < c.size(); ++i)
          c.data()[i] = ab.beta == 0 ? std::numeric_limits<float>::quiet_NaN() : c0[i];
        kernel->ukernel(kc, a.data(), b, c.data(), ldc, ab.alpha, ab.beta);
        for (int i = 0; i < mr; ++i)
          for (int j = 0; j < nr; ++j) {
            double sum = 0;
            for (size_t p = 0; p < kc; ++p) sum += double(a[p * mr + i]) * b[p * nr + j];
            double want = ab.alpha * sum + (ab.beta == 0 ? 0.0 : ab.beta * c0[i * ldc + j]);
            ASSERT_NEAR(c.data()[i * ldc + j], want, tolerance(int64_t(kc))) << i << "," << j;
          }
        std::free(b);
      }
    }
  }
}

// A micro-panel packer (where the ISA has one): (kc, MR) of row-major A for depths around its
// 16-column step, A's last row ending at a guard page (no read past column kc - 1) and the
// panel too (no write past it).
TEST(F32GemmPackA, MatchesPanelLayout) {
  for (const GemmKernelInfo* kernel : available_kernels()) {
    if (kernel->pack_a_panel == nullptr) continue;
    const size_t mr = static_cast<size_t>(kernel->mr);
    for (size_t kc : {1, 7, 15, 16, 17, 40, 256}) {
      SCOPED_TRACE(std::string(kernel->name) + " kc=" + std::to_string(kc));
      const size_t lda = kc + 5;
      GuardedBuffer a((mr - 1) * lda + kc);
      const std::vector<float> values = random_floats(a.size(), 4);
      std::copy(values.begin(), values.end(), a.data());
      GuardedBuffer panel(kc * mr);
      kernel->pack_a_panel(a.data(), lda, kc, panel.data());
      for (size_t p = 0; p < kc; ++p)
        for (size_t i = 0; i < mr; ++i)
          ASSERT_EQ(panel.data()[p * mr + i], values[i * lda + p]) << "k " << p << " row " << i;
    }
  }
}

struct GemmCase {
  int64_t m, n, k;
  bool trans_a = false, trans_b = false, pack_a = false, pack_b = false;
  float alpha = 1, beta = 0;
  GemmEpilogue::Bias bias = GemmEpilogue::Bias::kNone;
  Activation act = Activation::kNone;
  bool residual = false;
};

std::string describe(const GemmCase& c) {
  return std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) +
         " tA=" + std::to_string(c.trans_a) + " tB=" + std::to_string(c.trans_b) +
         " pA=" + std::to_string(c.pack_a) + " pB=" + std::to_string(c.pack_b) +
         " alpha=" + std::to_string(c.alpha) + " beta=" + std::to_string(c.beta) +
         " bias=" + std::to_string(int(c.bias)) + " act=" + std::to_string(int(c.act)) +
         " res=" + std::to_string(c.residual);
}

double activate_ref(Activation act, double v) {
  switch (act) {
    case Activation::kNone:
      return v;
    case Activation::kRelu:
      return std::max(v, 0.0);
    case Activation::kClip:
      return std::min(std::max(v, -0.5), 0.75);
    case Activation::kLeakyRelu:
      return v >= 0 ? v : 0.1 * v;
    case Activation::kSigmoid:
      return 1 / (1 + std::exp(-v));
    case Activation::kSilu:
      return v / (1 + std::exp(-v));
    case Activation::kHardSwish:
      return v * std::min(std::max(v / 6 + 0.5, 0.0), 1.0);
    case Activation::kGelu:
      return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  }
  return v;
}

void check_gemm(const GemmKernelInfo& kernel, const GemmCase& c, int threads) {
  SCOPED_TRACE(std::string(kernel.name) + " mc=" + std::to_string(kernel.mc) + " " + describe(c) +
               " threads=" + std::to_string(threads));
  const int64_t m = c.m, n = c.n, k = c.k;
  std::vector<float> a = random_floats(size_t(m * k), 11), b = random_floats(size_t(k * n), 12);
  std::vector<float> bias = random_floats(size_t(std::max(m, n)), 13);
  std::vector<float> res = random_floats(size_t(m * n), 14);
  // op(A)(i, p) and op(B)(p, j) from their stored layouts.
  const int64_t a_rs = c.trans_a ? 1 : k, a_cs = c.trans_a ? m : 1;
  const int64_t b_rs = c.trans_b ? 1 : n, b_cs = c.trans_b ? k : 1;
  GuardedBuffer out(size_t(std::max<int64_t>(m * n, 1)));
  std::vector<float> c0 = random_floats(out.size(), 15);
  for (size_t i = 0; i < out.size(); ++i)
    out.data()[i] = c.beta == 0 ? std::numeric_limits<float>::quiet_NaN() : c0[i];

  GemmEpilogue ep;
  ep.bias_kind = c.bias;
  ep.bias = bias.data();
  ep.activation = c.act;
  ep.act_alpha = c.act == Activation::kClip ? -0.5f : 0.1f;
  ep.act_beta = 0.75f;
  if (c.residual) {
    ep.residual = res.data();
    ep.ldr = n;
  }
  PackedMatrix pa, pb;
  GemmOperand op_a = GemmOperand::of(a.data(), a_rs, a_cs);
  GemmOperand op_b = GemmOperand::of(b.data(), b_rs, b_cs);
  if (c.pack_a) {
    pa = PackedMatrix::pack_a(kernel, op_a.view, m, k);
    op_a = GemmOperand::of(pa);
  }
  if (c.pack_b) {
    pb = PackedMatrix::pack_b(kernel, op_b.view, k, n);
    op_b = GemmOperand::of(pb);
  }
  f32_gemm(kernel, m, n, k, op_a, op_b, out.data(), n, c.alpha, c.beta, ep, threads);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += double(a[i * a_rs + p * a_cs]) * b[p * b_rs + j * b_cs];
      double v = c.alpha * sum + (c.beta == 0 ? 0.0 : c.beta * double(c0[i * n + j]));
      if (c.bias == GemmEpilogue::Bias::kPerRow) v += bias[i];
      if (c.bias == GemmEpilogue::Bias::kPerColumn) v += bias[j];
      if (c.residual) v += res[i * n + j];
      v = activate_ref(c.act, v);
      ASSERT_NEAR(out.data()[i * n + j], v, tolerance(k)) << "at " << i << "," << j;
    }
}

// Each kernel twice: with its real block sizes and with tiny ones, so the jc / pc / ic loops
// and their edges are all exercised on small matrices.
std::vector<GemmKernelInfo> kernels_with_small_blocks() {
  std::vector<GemmKernelInfo> out;
  for (const GemmKernelInfo* k : available_kernels()) {
    out.push_back(*k);
    GemmKernelInfo small = *k;
    small.kc = 5;
    small.mc = 2 * k->mr;
    small.nc = 2 * k->nr;
    small.nc_l2 = 3 * k->nr;  // a pre-packed A takes this one
    out.push_back(small);
  }
  return out;
}

TEST(F32Gemm, OddSizesMatchNaiveLoop) {
  for (const GemmKernelInfo& kernel : kernels_with_small_blocks()) {
    const int64_t mr = kernel.mr, nr = kernel.nr;
    std::vector<int64_t> sizes = {1, mr - 1, mr + 1, 7, 13, nr + 1, 127};
    for (int64_t m : sizes)
      for (int64_t n : {int64_t{1}, nr - 1, int64_t{13}, 2 * nr + 3})
        for (int64_t k : {int64_t{1}, int64_t{7}, int64_t{13}}) check_gemm(kernel, {m, n, k}, 1);
    check_gemm(kernel, {127, 127, 127}, 1);
    check_gemm(kernel, {3 * mr + 1, 5 * nr + 7, 300}, 1);
  }
}

TEST(F32Gemm, EmptyAndKZero) {
  for (const GemmKernelInfo* kernel : available_kernels()) {
    check_gemm(*kernel, {0, 5, 3}, 1);
    check_gemm(*kernel, {5, 0, 3}, 1);
    GemmCase c{5, 7, 0};
    check_gemm(*kernel, c, 1);
    c.beta = 0.5f;
    check_gemm(*kernel, c, 2);
    c.beta = 0;
    c.bias = GemmEpilogue::Bias::kPerColumn;
    c.act = Activation::kRelu;
    check_gemm(*kernel, c, 1);
  }
}

TEST(F32Gemm, AlphaBetaTransposesAndPacking) {
  for (const GemmKernelInfo& kernel : kernels_with_small_blocks()) {
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool pa : {false, true})
          for (bool pb : {false, true}) {
            GemmCase c{17, 35, 23, ta, tb, pa, pb};
            check_gemm(kernel, c, 1);
            c.alpha = -0.5f;
            c.beta = 1.25f;
            check_gemm(kernel, c, 2);
            c.alpha = 0;
            check_gemm(kernel, c, 1);
          }
  }
}

// Pre-packed weights against a row-major B with few rows of A: the kernel may read B in place
// (gemm/f32_gemm.cc, kDirectBMaxRows); B ends at a guard page, so a read past its last element
// in any edge tile faults.
TEST(F32Gemm, PackedAAgainstInPlaceBReadsOnlyB) {
  for (const GemmKernelInfo* kernel : available_kernels())
    for (int64_t m : {int64_t{1}, int64_t{16}, int64_t{kernel->mr + 3}, int64_t{100}})
      for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{45}, int64_t{2 * kernel->nr + 13}})
        for (int64_t k : {int64_t{7}, int64_t{64}, int64_t{300}}) {
          SCOPED_TRACE(std::string(kernel->name) + " m=" + std::to_string(m) +
                       " n=" + std::to_string(n) + " k=" + std::to_string(k));
          const std::vector<float> a = random_floats(size_t(m * k), 21);
          const std::vector<float> b_values = random_floats(size_t(k * n), 22);
          const std::vector<float> bias = random_floats(size_t(m), 23);
          const std::vector<float> res = random_floats(size_t(m * n), 24);
          GuardedBuffer b(size_t(k * n));
          std::copy(b_values.begin(), b_values.end(), b.data());
          const PackedMatrix pa = PackedMatrix::pack_a(*kernel, {a.data(), k, 1}, m, k);
          GemmEpilogue ep;
          ep.bias_kind = GemmEpilogue::Bias::kPerRow;
          ep.bias = bias.data();
          ep.residual = res.data();
          ep.ldr = n;
          ep.activation = Activation::kRelu;
          GuardedBuffer c(size_t(m * n));
          f32_gemm(*kernel, m, n, k, GemmOperand::of(pa), GemmOperand::of(b.data(), n, 1), c.data(),
                   n, 1.0f, 0.0f, ep, 2);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double v = bias[i] + res[i * n + j];
              for (int64_t p = 0; p < k; ++p) v += double(a[i * k + p]) * b_values[p * n + j];
              ASSERT_NEAR(c.data()[i * n + j], std::max(v, 0.0), tolerance(k))
                  << "i=" << i << " j=" << j;
            }
        }
}

TEST(F32Gemm, Epilogues) {
  for (const GemmKernelInfo& kernel : kernels_with_small_blocks()) {
    for (auto bias :
         {GemmEpilogue::Bias::kNone, GemmEpilogue::Bias::kPerRow, GemmEpilogue::Bias::kPerColumn})
      for (Activation act :
           {Activation::kNone, Activation::kRelu, Activation::kClip, Activation::kLeakyRelu,
            Activation::kSigmoid, Activation::kSilu, Activation::kHardSwish, Activation::kGelu})
        for (bool residual : {false, true})
          // A packed: tiles in rows, the epilogues the tiles cannot take in registers run
          // once per row of tiles (29 rows: a partial row of tiles at the bottom). One column
          // (a squeeze-excite conv): C's rows are contiguous, one activation call for them all.
          for (bool pack_a : {false, true})
            for (int64_t n : {37, 1}) {
              GemmCase c{pack_a ? 29 : 13, n, 19};
              c.pack_a = pack_a;
              c.bias = bias;
              c.act = act;
              c.residual = residual;
              c.beta = residual ? 0.5f : 0.0f;
              check_gemm(kernel, c, 1);
            }
  }
}

TEST(F32Gemm, ThreadCounts) {
  for (const GemmKernelInfo& kernel : kernels_with_small_blocks())
    for (int threads : {1, 2, 3})
      for (GemmCase c : {GemmCase{1, 200, 9}, GemmCase{200, 1, 9}, GemmCase{61, 45, 33},
                         GemmCase{150, 70, 40, false, false, true, true, 1, 0,
                                  GemmEpilogue::Bias::kPerRow, Activation::kRelu},
                         // A packed whole before the tasks (against a packed B), by several
                         // packing tasks: 150 rows are 11 or more panels.
                         GemmCase{150, 70, 40, false, false, false, true, 1, 0,
                                  GemmEpilogue::Bias::kPerColumn, Activation::kGelu},
                         GemmCase{150, 70, 40, true, false, false, true},
                         // More row tiles than column panels: threads split M and share one B
                         // packed whole (several groups of panels, several K blocks).
                         GemmCase{400, 300, 40}, GemmCase{400, 300, 300, false, true},
                         // A above the whole-packing bound (2^22 floats): packed per block.
                         GemmCase{2100, 3, 2050, false, false, false, true}})
        check_gemm(kernel, c, threads);
}

// B written by the caller at packed_b_offset (GemmOperand::prepacked) is laid out exactly as
// PackedMatrix::pack_b and gives the same C, bit for bit, over several K blocks (small KC), N
// not a multiple of NR and 1 / 3 threads.
TEST(F32Gemm, PrepackedBMatchesPackedMatrix) {
  for (const GemmKernelInfo& kernel : kernels_with_small_blocks())
    for (int64_t n : {int64_t{1}, int64_t{kernel.nr} - 1, int64_t{2 * kernel.nr + 3}})
      for (int64_t k : {int64_t{1}, int64_t{13}}) {
        const int64_t m = 11;
        SCOPED_TRACE(std::string(kernel.name) + " kc=" + std::to_string(kernel.kc) +
                     " n=" + std::to_string(n) + " k=" + std::to_string(k));
        std::vector<float> a = random_floats(size_t(m * k), 1), b = random_floats(size_t(k * n), 2);
        const PackedMatrix pb = PackedMatrix::pack_b(kernel, MatrixView{b.data(), n, 1}, k, n);
        const int64_t size = packed_b_floats(kernel, k, n);
        std::unique_ptr<float, void (*)(void*)> panels(
            static_cast<float*>(std::aligned_alloc(64, size_t((size * 4 + 63) / 64 * 64))),
            std::free);
        std::fill(panels.get(), panels.get() + size, 0.0f);
        for (int64_t p = 0; p < k; ++p)
          for (int64_t j = 0; j < n; ++j)
            panels.get()[packed_b_offset(kernel, k, n, p, j)] = b[size_t(p * n + j)];
        ASSERT_TRUE(std::equal(panels.get(), panels.get() + size, pb.panel(0, 0)));
        for (int threads : {1, 3}) {
          std::vector<float> want(size_t(m * n)), got(size_t(m * n));
          f32_gemm(kernel, m, n, k, GemmOperand::of(a.data(), k, 1), GemmOperand::of(pb),
                   want.data(), n, 1, 0, {}, threads);
          f32_gemm(kernel, m, n, k, GemmOperand::of(a.data(), k, 1),
                   GemmOperand::prepacked(panels.get()), got.data(), n, 1, 0, {}, threads);
          EXPECT_EQ(want, got);
        }
      }
}

// Results do not depend on the thread count (each element is summed in the same order).
TEST(F32Gemm, ThreadCountDoesNotChangeResults) {
  const GemmKernelInfo& kernel = f32_gemm_kernel();
  const int64_t m = 97, n = 131, k = 301;
  std::vector<float> a = random_floats(m * k, 1), b = random_floats(k * n, 2);
  std::vector<float> c1(m * n), c3(m * n);
  f32_gemm(kernel, m, n, k, GemmOperand::of(a.data(), k, 1), GemmOperand::of(b.data(), n, 1),
           c1.data(), n, 1, 0, {}, 1);
  f32_gemm(kernel, m, n, k, GemmOperand::of(a.data(), k, 1), GemmOperand::of(b.data(), n, 1),
           c3.data(), n, 1, 0, {}, 3);
  EXPECT_EQ(c1, c3);
}

// The per-shape choice: padded tile area over the kernel's rate, among the levels up to the
// selected one.
TEST(F32GemmKernelForShape, LeastPaddedWorkAmongSelectedLevels) {
  const std::vector<const GemmKernelInfo*> candidates = f32_gemm_kernel_candidates();
  ASSERT_FALSE(candidates.empty());
  for (const GemmKernelInfo* k : candidates) {
    EXPECT_LE(static_cast<int>(k->isa), static_cast<int>(f32_gemm_kernel().isa)) << k->name;
    // Whole tiles: no padding; unknown sizes count none either.
    EXPECT_DOUBLE_EQ(f32_gemm_relative_time(*k, 3 * k->mr, 2 * k->nr), 1.0 / k->relative_rate);
    EXPECT_DOUBLE_EQ(f32_gemm_relative_time(*k, 0, 0), 1.0 / k->relative_rate);
    // One row and column: a whole tile computed for one element, or with a partial kernel one
    // column of 4 rows (its floor for latency-bound rows).
    EXPECT_DOUBLE_EQ(f32_gemm_relative_time(*k, 1, 1),
                     (k->partial_ukernel ? 4 : k->mr * k->nr) / k->relative_rate);
  }
  for (int64_t m : {1, 6, 14, 16, 64, 197, 512})
    for (int64_t n : {0, 1, 16, 17, 32, 49, 196, 3072}) {
      const GemmKernelInfo& chosen = f32_gemm_kernel_for_shape(m, n);
      for (const GemmKernelInfo* k : candidates)
        EXPECT_LE(f32_gemm_relative_time(chosen, m, n), f32_gemm_relative_time(*k, m, n))
            << "m=" << m << " n=" << n << " " << chosen.name << " vs " << k->name;
    }
  const GemmKernelInfo* avx2 = f32_gemm_kernel_for(Isa::kAvx2);
  const GemmKernelInfo* avx512 = f32_gemm_kernel_for(Isa::kAvx512);
  if (avx2 && avx512 && f32_gemm_kernel().isa == Isa::kAvx512) {
    // The partial 14 x 32 kernel computes 16- and 17-column products without 32-column tiles.
    EXPECT_EQ(&f32_gemm_kernel_for_shape(512, 16), avx512);
    EXPECT_EQ(&f32_gemm_kernel_for_shape(16, 17), avx512);
    EXPECT_EQ(&f32_gemm_kernel_for_shape(512, 4096), avx512);
  }
}

TEST(ThreadPool, RunsEveryTaskOnceWithDistinctThreadIds) {
  ThreadPool pool;
  for (int threads : {1, 2, 3, 5}) {
    for (int64_t tasks : {0, 1, 2, 7, 100}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(tasks));
      std::atomic<int> max_thread{0};
      auto fn = [&](int64_t t, int thread) {
        hits[static_cast<size_t>(t)].fetch_add(1);
        int cur = max_thread.load();
        while (thread > cur && !max_thread.compare_exchange_weak(cur, thread)) {
        }
      };
      pool.parallel_for(tasks, threads, fn);
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
      EXPECT_LT(max_thread.load(), threads);
    }
  }
}

// A worker that keeps a task far longer than the caller's own tasks take (as one descheduled by
// the OS would) makes the workers not pay: the pool must then run calls on the caller alone for
// a while, and still run every task exactly once.
TEST(ThreadPool, RunsOnTheCallerAloneWhileWorkersDoNotPay) {
  ThreadPool pool;
  constexpr int64_t kTasks = 8;
  int solo_calls = 0;
  for (int call = 0; call < 40; ++call) {
    std::vector<std::atomic<int>> hits(kTasks);
    std::atomic<bool> on_worker{false};
    auto fn = [&](int64_t t, int thread) {
      hits[static_cast<size_t>(t)].fetch_add(1);
      if (thread != 0) {
        on_worker = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(4));
      } else {
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
        while (std::chrono::steady_clock::now() < until) {
        }
      }
    };
    pool.parallel_for(kTasks, 2, fn);
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    if (!on_worker) ++solo_calls;
  }
  // Without the back-off no call is solo: the worker wakes well within the caller's first
  // tasks, so it always takes one of its own.
  EXPECT_GE(solo_calls, 30);
}

}  // namespace
}  // namespace peregrine::cpu
