// SGEMM through the CPU backend's f32_gemm driver, in GFLOP/s, and the single-core FMA peak
// it is measured against.
//
//   build/bin/peregrine_gemm_bench --benchmark_filter='Peak|Sgemm/1024'
//
// Peak: a loop of independent AVX2 FMAs (enough chains to cover FMA latency x ports), so the
// rate is ports x 8 lanes x 2 flops x GHz. SGEMM: C = A * B, square sizes, B packed per run
// (BM_Sgemm) or pre-packed like a weight (BM_SgemmPackedB); `threads` is the second argument.
// Single-thread rates use CPU time, so other load on a shared machine inflates them less.
//
// Model shapes (BM_ConvGemmResNet50[BiasRelu], BM_LinearGemmBert; arguments M, N, K, threads):
//   ResNet-50 (models/zoo.py resnet50, 1x3x224x224): every distinct conv GEMM as conv.cc runs
//     it in NCHW, M = Cout, N = OH * OW, K = Cin * KH * KW, the weight pre-packed as A. B is a
//     row-major (K, N) matrix packed by the driver on every run: exactly the 1x1 stride-1 case;
//     for the other convs conv.cc packs B straight from the image (im2col packer), which this
//     leaves out, so those rows are the GEMM part only. 3x3 stride-1 convs may run as Winograd
//     in the engine; here they are the im2col GEMM. The label names the layers and their count.
//     BiasRelu: the same with a fused conv's bias + Relu epilogue (the fused micro-kernel).
// Bf16 variants (BM_Bf16Ukernel, BM_ConvGemmResNet50Bf16, BM_LinearGemmBertBf16): the same
//   shapes on the bf16 GEMM (gemm/bf16_gemm.h, --precision bf16); %peak is still against the
//   float32 FMA peak, so 200% is the bf16 dot product's nominal twice the rate.
//   BERT-base encoder (seq 128, hidden 768, FFN 3072): activations (M, K) as A, the weight
//     pre-packed as B like kernels/matmul.cc: QKV/out projections, FFN up and down.
// Int8 variants (BM_Qu8Ukernel, BM_Qu8Gemm, BM_ConvGemmResNet50Qu8): uint8 x int8 with int32
//   accumulation and requantization to uint8 (gemm/qu8_gemm.h, QLinearConv / QDQ models), in
//   GOP/s (a multiply and an add per product) and "%vnni": against the vpdpbusd peak of
//   `peregrine machine` (its dot_loop, measured here once the same way as the FMA peak).
// Each at 1 thread (CPU time) and 2 threads (wall time), with GFLOP/s and "%peak": the rate
// over threads x the single-core FMA peak, which this binary measures once at start-up (the
// BM_FmaPeakAvx2 loop, best of 7 on the thread's CPU clock; see single_core_peak_gflops).
// No %peak without AVX2.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/gemm/bf16_gemm.h"
#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/gemm/qu8_gemm.h"
#include "profiler/machine_kernels.h"

namespace {

using peregrine::cpu::Activation;
using peregrine::cpu::f32_gemm;
using peregrine::cpu::f32_gemm_kernel;
using peregrine::cpu::GemmEpilogue;
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

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The fastest of 7 runs of `loop` on this thread's CPU clock, in seconds, so time lost to other
// processes does not count.
template <typename Loop>
double fastest_of_7(Loop loop) {
  double best = 1e30;
  for (int rep = 0; rep < 7; ++rep) {
    const double start = thread_cpu_seconds();
    loop();
    best = std::min(best, thread_cpu_seconds() - start);
  }
  return best;
}

// The BM_FmaPeakAvx2 rate, measured once per process (runs of about 8 ms). 0 without AVX2.
double single_core_peak_gflops() {
  static const double peak = [] {
    if (!peregrine::cpu::isa_supported(peregrine::cpu::Isa::kAvx2)) return 0.0;
    const int64_t iters = int64_t{1} << 22;
    const double best = fastest_of_7([&] { benchmark::DoNotOptimize(fma_peak_loop(iters)); });
    return static_cast<double>(iters) * 12 * 8 * 2 * 1e-9 / best;
  }();
  return peak;
}

// A rate counter (`unit`, billions of `ops` per second) and, where `peak` (per thread, in the
// same unit) is known, the share of threads x peak (`peak_name`, in %).
void set_rate_counters(benchmark::State& state, double ops, int threads, const char* unit,
                       const char* peak_name, double peak) {
  state.counters[unit] =
      benchmark::Counter(ops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  if (peak > 0)
    state.counters[peak_name] = benchmark::Counter(100.0 * ops * 1e-9 / (peak * threads),
                                                   benchmark::Counter::kIsIterationInvariantRate);
}

// GFLOP/s and %peak counters of a GEMM of `flops` per iteration (rates divide by the time).
void set_gemm_counters(benchmark::State& state, double flops, int threads) {
  set_rate_counters(state, flops, threads, "GFLOP/s", "%peak", single_core_peak_gflops());
}

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
  set_gemm_counters(state, 2.0 * n * n * n, threads);
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

// One GEMM of a model: layers that share the shape, and the shape.
struct ModelGemm {
  const char* layers;
  int64_t m, n, k;
};

// models/zoo.py resnet50: the 53 convs reduce to these 20 GEMM shapes (M=Cout, N=OH*OW,
// K=Cin*KH*KW); "xN" counts the layers of a shape.
constexpr ModelGemm kResNet50Convs[] = {
    {"conv1 7x7/2", 64, 12544, 147},
    {"layer1.0.conv1 1x1", 64, 3136, 64},
    {"layer1.*.conv2 3x3 x3", 64, 3136, 576},
    {"layer1.*.conv3+downsample 1x1 x4", 256, 3136, 64},
    {"layer1.1-2.conv1 1x1 x2", 64, 3136, 256},
    {"layer2.0.conv1 1x1", 128, 3136, 256},
    {"layer2.*.conv2 3x3 (one /2) x4", 128, 784, 1152},
    {"layer2.*.conv3 1x1 x4", 512, 784, 128},
    {"layer2.0.downsample 1x1/2", 512, 784, 256},
    {"layer2.1-3.conv1 1x1 x3", 128, 784, 512},
    {"layer3.0.conv1 1x1", 256, 784, 512},
    {"layer3.*.conv2 3x3 (one /2) x6", 256, 196, 2304},
    {"layer3.*.conv3 1x1 x6", 1024, 196, 256},
    {"layer3.0.downsample 1x1/2", 1024, 196, 512},
    {"layer3.1-5.conv1 1x1 x5", 256, 196, 1024},
    {"layer4.0.conv1 1x1", 512, 196, 1024},
    {"layer4.*.conv2 3x3 (one /2) x3", 512, 49, 4608},
    {"layer4.*.conv3 1x1 x3", 2048, 49, 512},
    {"layer4.0.downsample 1x1/2", 2048, 49, 1024},
    {"layer4.1-2.conv1 1x1 x2", 512, 49, 2048},
};

// BERT-base encoder layer, seq 128: activations (128, K) times a (K, N) weight.
constexpr ModelGemm kBertLinears[] = {
    {"QKV/out projection x4", 128, 768, 768},
    {"FFN up", 128, 3072, 768},
    {"FFN down", 128, 768, 3072},
};

// ViT-B/16 encoder layer, 197 tokens: the same weights with M = 197 (14 x 14 + 1 rows of A).
constexpr ModelGemm kVitLinears[] = {
    {"Q/K/V/out projection x4", 197, 768, 768},
    {"MLP up", 197, 3072, 768},
    {"MLP down", 197, 768, 3072},
};

template <size_t kCount>
std::string layers_of(const ModelGemm (&table)[kCount], int64_t m, int64_t n, int64_t k) {
  for (const ModelGemm& g : table)
    if (g.m == m && g.n == n && g.k == k) return g.layers;
  return "?";
}

// Conv as GEMM: weight (M, K) pre-packed as A, the (K, N) im2col matrix as a plain B; with
// `fused`, the bias + Relu epilogue of a fused conv (the fused micro-kernel's path).
void conv_gemm(benchmark::State& state, bool fused) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const auto& kernel = f32_gemm_kernel();
  std::vector<float> w(m * k, 0.5f), b(k * n, 0.25f), c(m * n), bias(m, -0.125f);
  const PackedMatrix packed_w = PackedMatrix::pack_a(kernel, {w.data(), k, 1}, m, k);
  GemmEpilogue ep;
  if (fused) {
    ep.bias_kind = GemmEpilogue::Bias::kPerRow;
    ep.bias = bias.data();
    ep.activation = Activation::kRelu;
  }
  for (auto _ : state) {
    f32_gemm(kernel, m, n, k, GemmOperand::of(packed_w), GemmOperand::of(b.data(), n, 1), c.data(),
             n, 1.0f, 0.0f, ep, threads);
    benchmark::ClobberMemory();
  }
  state.SetLabel(layers_of(kResNet50Convs, m, n, k) + " " + kernel.name);
  set_gemm_counters(state, 2.0 * m * n * k, threads);
}
void BM_ConvGemmResNet50(benchmark::State& state) { conv_gemm(state, false); }
void BM_ConvGemmResNet50BiasRelu(benchmark::State& state) { conv_gemm(state, true); }

// Linear layer: activations (M, K) as a plain A, weight (K, N) pre-packed as B, plus a bias
// (as every linear layer in the zoo). With `cold_weights` each iteration takes the next of
// enough packed copies of the weight to overflow the last-level cache, so B streams from
// memory as in a model run, where a layer's weights were last read a whole forward pass ago.
template <size_t kCount>
void linear_gemm(benchmark::State& state, const ModelGemm (&table)[kCount], bool cold_weights) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const auto& kernel = f32_gemm_kernel();
  std::vector<float> a(m * k, 0.5f), w(k * n, 0.25f), c(m * n), bias(n, -0.125f);
  constexpr int64_t kColdBytes = int64_t{96} << 20;  // above any L3 these machines have
  const int64_t copies = cold_weights ? std::max<int64_t>(2, kColdBytes / (k * n * 4)) : 1;
  std::vector<PackedMatrix> packed_w;
  for (int64_t i = 0; i < copies; ++i)
    packed_w.push_back(PackedMatrix::pack_b(kernel, {w.data(), n, 1}, k, n));
  GemmEpilogue ep;
  ep.bias_kind = GemmEpilogue::Bias::kPerColumn;
  ep.bias = bias.data();
  size_t next = 0;
  for (auto _ : state) {
    f32_gemm(kernel, m, n, k, GemmOperand::of(a.data(), k, 1), GemmOperand::of(packed_w[next]),
             c.data(), n, 1.0f, 0.0f, ep, threads);
    next = (next + 1) % packed_w.size();
    benchmark::ClobberMemory();
  }
  state.SetLabel(layers_of(table, m, n, k) + " " + kernel.name);
  set_gemm_counters(state, 2.0 * m * n * k, threads);
}
void BM_LinearGemmBert(benchmark::State& state) { linear_gemm(state, kBertLinears, false); }
void BM_LinearGemmVit(benchmark::State& state) { linear_gemm(state, kVitLinears, false); }
void BM_LinearGemmVitColdWeights(benchmark::State& state) { linear_gemm(state, kVitLinears, true); }


// The bf16 micro-kernel alone on L1-resident panels (kc = 256).
void BM_Bf16Ukernel(benchmark::State& state) {
  const auto* kernel = peregrine::cpu::bf16_gemm_kernel();
  if (!kernel) {
    state.SkipWithError(peregrine::cpu::bf16_unavailable_reason().c_str());
    return;
  }
  const size_t kc = 256, kp = kc / 2;
  std::vector<uint32_t> a(kp * kernel->mr, 0x3f003f00u), c32(kernel->mr * kernel->nr);
  uint32_t* b = static_cast<uint32_t*>(std::aligned_alloc(64, kp * kernel->nr * 4));
  for (size_t i = 0; i < kp * kernel->nr; ++i) b[i] = 0x3e803e80u;
  std::vector<float> c(kernel->mr * kernel->nr);
  for (auto _ : state) {
    kernel->ukernel(kernel->mr, kernel->nr, kp, a.data(), b, c.data(), kernel->nr, 1.0f, 1.0f,
                    nullptr);
    benchmark::ClobberMemory();
  }
  std::free(b);
  state.SetLabel(kernel->name);
  set_gemm_counters(state, 2.0 * kc * kernel->mr * kernel->nr, 1);
}
BENCHMARK(BM_Bf16Ukernel);

// The bf16 GEMM, or nullptr with the benchmark skipped where the CPU has none.
const peregrine::cpu::Bf16GemmKernelInfo* bf16_kernel_or_skip(benchmark::State& state) {
  const auto* kernel = peregrine::cpu::bf16_gemm_kernel();
  if (!kernel) state.SkipWithError(peregrine::cpu::bf16_unavailable_reason().c_str());
  return kernel;
}

// conv_gemm and linear_gemm on the bf16 GEMM (bias + Relu / bias epilogues).
void BM_ConvGemmResNet50Bf16(benchmark::State& state) {
  using namespace peregrine::cpu;
  const Bf16GemmKernelInfo* kernel = bf16_kernel_or_skip(state);
  if (!kernel) return;
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  std::vector<float> w(m * k, 0.5f), b(k * n, 0.25f), c(m * n), bias(m, -0.125f);
  const Bf16PackedMatrix packed_w = Bf16PackedMatrix::pack_a(*kernel, {w.data(), k, 1}, m, k);
  GemmEpilogue ep;
  ep.bias_kind = GemmEpilogue::Bias::kPerRow;
  ep.bias = bias.data();
  ep.activation = Activation::kRelu;
  for (auto _ : state) {
    bf16_gemm(*kernel, m, n, k, Bf16GemmOperand::of(packed_w), Bf16GemmOperand::of(b.data(), n, 1),
              c.data(), n, 1.0f, 0.0f, ep, f32_gemm_kernel().epilogue, threads);
    benchmark::ClobberMemory();
  }
  state.SetLabel(layers_of(kResNet50Convs, m, n, k) + " " + kernel->name);
  set_gemm_counters(state, 2.0 * m * n * k, threads);
}
void BM_LinearGemmBertBf16(benchmark::State& state) {
  using namespace peregrine::cpu;
  const Bf16GemmKernelInfo* kernel = bf16_kernel_or_skip(state);
  if (!kernel) return;
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  std::vector<float> a(m * k, 0.5f), w(k * n, 0.25f), c(m * n), bias(n, -0.125f);
  const Bf16PackedMatrix packed_w = Bf16PackedMatrix::pack_b(*kernel, {w.data(), n, 1}, k, n);
  GemmEpilogue ep;
  ep.bias_kind = GemmEpilogue::Bias::kPerColumn;
  ep.bias = bias.data();
  for (auto _ : state) {
    bf16_gemm(*kernel, m, n, k, Bf16GemmOperand::of(a.data(), k, 1), Bf16GemmOperand::of(packed_w),
              c.data(), n, 1.0f, 0.0f, ep, f32_gemm_kernel().epilogue, threads);
    benchmark::ClobberMemory();
  }
  state.SetLabel(layers_of(kBertLinears, m, n, k) + " " + kernel->name);
  set_gemm_counters(state, 2.0 * m * n * k, threads);
}

template <size_t kCount>
void model_shapes(benchmark::internal::Benchmark* b, const ModelGemm (&table)[kCount],
                  int threads) {
  b->ArgNames({"M", "N", "K", "threads"});
  for (const ModelGemm& g : table) b->Args({g.m, g.n, g.k, threads});
  b->Unit(benchmark::kMillisecond);
  if (threads > 1) b->UseRealTime();  // the pool's workers are not in this thread's CPU time
}
BENCHMARK(BM_ConvGemmResNet50)->Apply([](auto* b) { model_shapes(b, kResNet50Convs, 1); });
BENCHMARK(BM_ConvGemmResNet50)->Apply([](auto* b) { model_shapes(b, kResNet50Convs, 2); });
BENCHMARK(BM_ConvGemmResNet50BiasRelu)->Apply([](auto* b) { model_shapes(b, kResNet50Convs, 1); });
BENCHMARK(BM_LinearGemmBert)->Apply([](auto* b) { model_shapes(b, kBertLinears, 1); });
BENCHMARK(BM_LinearGemmBert)->Apply([](auto* b) { model_shapes(b, kBertLinears, 2); });
BENCHMARK(BM_LinearGemmVit)->Apply([](auto* b) { model_shapes(b, kVitLinears, 1); });
BENCHMARK(BM_LinearGemmVit)->Apply([](auto* b) { model_shapes(b, kVitLinears, 2); });
BENCHMARK(BM_ConvGemmResNet50Bf16)->Apply([](auto* b) { model_shapes(b, kResNet50Convs, 1); });
BENCHMARK(BM_ConvGemmResNet50Bf16)->Apply([](auto* b) { model_shapes(b, kResNet50Convs, 2); });
BENCHMARK(BM_LinearGemmBertBf16)->Apply([](auto* b) { model_shapes(b, kBertLinears, 1); });
BENCHMARK(BM_LinearGemmBertBf16)->Apply([](auto* b) { model_shapes(b, kBertLinears, 2); });
BENCHMARK(BM_LinearGemmVitColdWeights)->Apply([](auto* b) { model_shapes(b, kVitLinears, 1); });

// ---- int8 ----

// The vpdpbusd peak in GOP/s on one core (measured as single_core_peak_gflops); 0 where the
// CPU has no AVX-512 VNNI.
double single_core_vnni_peak_gops() {
  static const double peak = [] {
    if (!peregrine::cpu::isa_supported(peregrine::cpu::Isa::kAvx512) ||
        !peregrine::cpu::cpu_features().avx512_vnni)
      return 0.0;
    const int64_t iters = int64_t{1} << 20;
    const double best =
        fastest_of_7([&] { benchmark::DoNotOptimize(peregrine::avx512vnni::dot_loop(iters)); });
    return static_cast<double>(iters) * peregrine::avx512vnni::kFlopsPerIteration * 1e-9 / best;
  }();
  return peak;
}

void set_qgemm_counters(benchmark::State& state, double ops, int threads) {
  set_rate_counters(state, ops, threads, "GOP/s", "%vnni", single_core_vnni_peak_gops());
}

// The int8 micro-kernel alone on L1-resident panels (k = 256), requantizing its tile.
void BM_Qu8Ukernel(benchmark::State& state) {
  using namespace peregrine::cpu;
  const Qu8GemmKernelInfo& kernel = qu8_gemm_kernel();
  const size_t kq = 64;
  std::vector<uint32_t> a(kq * kernel.mr, 0x01fe02ffu);
  uint32_t* b = static_cast<uint32_t*>(std::aligned_alloc(64, kq * kernel.nr * 4));
  for (size_t i = 0; i < kq * kernel.nr; ++i) b[i] = 0x80407f01u;
  std::vector<uint8_t> c(kernel.mr * kernel.nr);
  std::vector<int32_t> bias(kernel.mr, 3);
  std::vector<float> scale(kernel.mr, 1e-4f);
  const Qu8Output out{};
  for (auto _ : state) {
    kernel.ukernel(kernel.mr, kernel.nr, kq, a.data(), b, c.data(), kernel.nr, bias.data(),
                   scale.data(), out);
    benchmark::ClobberMemory();
  }
  std::free(b);
  state.SetLabel(kernel.name);
  set_qgemm_counters(state, 2.0 * 4 * kq * kernel.mr * kernel.nr, 1);
}
BENCHMARK(BM_Qu8Ukernel);

// C(m, n) = requant(A(m, k) B(k, n)): A the packed weight, B a row-major uint8 (k, n) matrix as
// an unpadded 1x1 conv's input (packed per call).
void run_qu8_gemm(benchmark::State& state, int64_t m, int64_t n, int64_t k, int threads) {
  using namespace peregrine::cpu;
  const Qu8GemmKernelInfo& kernel = qu8_gemm_kernel();
  std::vector<int8_t> w(m * k);
  std::vector<uint8_t> b(k * n), c(m * n);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(i * 37 % 255 - 127);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 101 % 256);
  const Qu8PackedA packed = Qu8PackedA::pack(kernel, w.data(), k, m, k);
  std::vector<int32_t> bias(m, 7);
  std::vector<float> scale(m, 1e-5f);
  Qu8Output out{};
  out.hi = 255;
  for (auto _ : state) {
    qu8_gemm(m, n, packed, b.data(), n, c.data(), n, Qu8Requant{bias.data(), scale.data(), out},
             threads);
    benchmark::ClobberMemory();
  }
  state.SetLabel(kernel.name);
  set_qgemm_counters(state, 2.0 * m * n * k, threads);
}
void BM_Qu8Gemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  run_qu8_gemm(state, n, n, n, static_cast<int>(state.range(1)));
}
BENCHMARK(BM_Qu8Gemm)->Apply(one_thread);
BENCHMARK(BM_Qu8Gemm)->Apply(two_threads);
void BM_ConvGemmResNet50Qu8(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  run_qu8_gemm(state, m, n, k, static_cast<int>(state.range(3)));
  state.SetLabel(layers_of(kResNet50Convs, m, n, k) + " " + peregrine::cpu::qu8_gemm_kernel().name);
}
BENCHMARK(BM_ConvGemmResNet50Qu8)->Apply([](auto* b) { model_shapes(b, kResNet50Convs, 1); });
BENCHMARK(BM_ConvGemmResNet50Qu8)->Apply([](auto* b) { model_shapes(b, kResNet50Convs, 2); });

}  // namespace

BENCHMARK_MAIN();
