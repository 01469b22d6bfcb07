// SGEMM through the CPU backend's f32_gemm driver, in GFLOP/s, and the single-core FMA peak
// it is measured against.
//
//   build/bin/peregrine_gemm_bench --benchmark_filter='Peak|Sgemm/1024'
//
// Peak: a loop of independent AVX2 FMAs (enough chains to cover FMA latency x ports), so the
// rate is ports x 8 lanes x 2 flops x GHz. SGEMM: C = A * B, square sizes, B packed per run
// (BM_Sgemm) or pre-packed like a weight (BM_SgemmPackedB); `threads` is the second argument.
// Single-thread rates use CPU time, so other load on a shared machine inflates them less.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdlib>
#include <vector>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/gemm/f32_gemm.h"

namespace {

using peregrine::cpu::f32_gemm;
using peregrine::cpu::f32_gemm_kernel;
using peregrine::cpu::GemmOperand;
using peregrine::cpu::PackedMatrix;

// 12 independent accumulator chains of 8 floats: 2 ports x 4-5 cycles latency, with room.
__attribute__((target("avx2,fma"), noinline)) float fma_peak_loop(int64_t iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  }
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}

void BM_FmaPeakAvx2(benchmark::State& state) {
  if (!peregrine::cpu::isa_supported(peregrine::cpu::Isa::kAvx2)) {
    state.SkipWithError("no AVX2");
    return;
  }
  int64_t iters = 1 << 20;
  for (auto _ : state) {
    benchmark::DoNotOptimize(iters);  // keeps the call inside the timed loop
    benchmark::DoNotOptimize(fma_peak_loop(iters));
  }
  const int64_t kIters = iters;
  state.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(kIters) * 12 * 8 * 2 * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_FmaPeakAvx2);

// The micro-kernel alone on L1-resident panels (kc = 256): its ceiling without packing or
// cache misses.
void BM_Ukernel(benchmark::State& state) {
  const auto& kernel = f32_gemm_kernel();
  const size_t kc = 256;
  std::vector<float> a(kc * kernel.mr, 0.5f), c(kernel.mr * kernel.nr);
  float* b = static_cast<float*>(std::aligned_alloc(64, kc * kernel.nr * sizeof(float)));
  for (size_t i = 0; i < kc * kernel.nr; ++i) b[i] = 0.25f;
  for (auto _ : state) {
    kernel.ukernel(kc, a.data(), b, c.data(), kernel.nr, 1.0f, 1.0f);
    benchmark::ClobberMemory();
  }
  std::free(b);
  state.SetLabel(kernel.name);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kc * kernel.mr * kernel.nr * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Ukernel);

void run_sgemm(benchmark::State& state, bool prepack_b) {
  const int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  const auto& kernel = f32_gemm_kernel();
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  PackedMatrix packed;
  if (prepack_b) packed = PackedMatrix::pack_b(kernel, {b.data(), n, 1}, n, n);
  const GemmOperand op_b = prepack_b ? GemmOperand::of(packed) : GemmOperand::of(b.data(), n, 1);
  for (auto _ : state) {
    f32_gemm(kernel, n, n, n, GemmOperand::of(a.data(), n, 1), op_b, c.data(), n, 1.0f, 0.0f, {},
             threads);
    benchmark::ClobberMemory();
  }
  state.SetLabel(kernel.name);
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Sgemm(benchmark::State& state) { run_sgemm(state, false); }
void BM_SgemmPackedB(benchmark::State& state) { run_sgemm(state, true); }

// One thread: rates from the thread's CPU time (robust on a shared machine). Two threads:
// rates from wall time.
void one_thread(benchmark::internal::Benchmark* b) {
  for (int n : {256, 512, 1024, 2048}) b->Args({n, 1});
  b->Unit(benchmark::kMillisecond);
}
void two_threads(benchmark::internal::Benchmark* b) {
  for (int n : {256, 512, 1024, 2048}) b->Args({n, 2});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_Sgemm)->Apply(one_thread);
BENCHMARK(BM_Sgemm)->Apply(two_threads);
BENCHMARK(BM_SgemmPackedB)->Apply(one_thread);
BENCHMARK(BM_SgemmPackedB)->Apply(two_threads);

}  // namespace

BENCHMARK_MAIN();
