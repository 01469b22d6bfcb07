// Fused attention (src/backends/cpu/kernels/attention.h) in GFLOP/s: batch 1, 12 heads x 64
// (BERT-base / ViT-B), sequence 128 / 512 / 2048, head-form layout (B, S, 768), with a padding
// mask (B, 1, 1, S) or causal; `threads` is the last argument. BM_AttentionBf16: the bf16 tile
// (products in bf16), where the CPU has AVX512_BF16.
//
//   build/bin/peregrine_attention_bench --benchmark_filter='Attention/128'
//
// FLOPs counted: 4 * H * S * S * D (Q K^T and P V; exp and the softmax bookkeeping not
// counted), halved for causal. Single-thread rates use CPU time, two-thread rates wall time.
#include <benchmark/benchmark.h>

#include <vector>

#include "backends/cpu/kernels/attention.h"

namespace {

using peregrine::cpu::AttentionOperand;
using peregrine::cpu::AttentionProblem;

enum class Tile { kBest, kScalar, kBf16 };

void attention_case(benchmark::State& state, bool causal, Tile which) {
  const int64_t s = state.range(0), h = 12, d = 64;
  const int threads = static_cast<int>(state.range(1));
  const auto* kernel = which == Tile::kScalar
                           ? peregrine::cpu::f32_attention_kernel_for(peregrine::cpu::Isa::kScalar)
                       : which == Tile::kBf16 ? peregrine::cpu::bf16_attention_kernel()
                                              : &peregrine::cpu::f32_attention_kernel();
  if (kernel == nullptr) {
    state.SkipWithError("no bf16 tile on this CPU");
    return;
  }
  std::vector<float> q(s * h * d, 0.01f), k(s * h * d, 0.02f), v(s * h * d, 0.5f), out(s * h * d);
  std::vector<float> mask(s, 0.0f);
  for (int64_t j = s - s / 8; j < s; ++j) mask[j] = -10000.0f;  // 1/8 padding
  AttentionProblem p;
  p.batch_rank = 2;
  p.batch_dims[0] = 1;
  p.batch_dims[1] = h;
  p.sq = p.skv = s;
  p.d = p.dv = d;
  p.scale = 0.125f;
  p.causal = causal;
  auto operand = [&](const float* data) {
    AttentionOperand o;
    o.data = data;
    o.batch_strides[0] = s * h * d;
    o.batch_strides[1] = d;
    o.rs = h * d;
    o.cs = 1;
    return o;
  };
  p.q = operand(q.data());
  p.k = operand(k.data());
  p.v = operand(v.data());
  p.out = operand(out.data());
  if (!causal) {
    p.mask.data = mask.data();
    p.mask.rs = 0;
    p.mask.cs = 1;
  }
  for (auto _ : state) {
    peregrine::cpu::run_attention(*kernel, p, threads);
    benchmark::ClobberMemory();
  }
  state.SetLabel(kernel->name);
  const double flops = 4.0 * h * s * s * d * (causal ? 0.5 : 1.0);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Attention(benchmark::State& state) { attention_case(state, false, Tile::kBest); }
void BM_AttentionCausal(benchmark::State& state) { attention_case(state, true, Tile::kBest); }
void BM_AttentionScalar(benchmark::State& state) { attention_case(state, false, Tile::kScalar); }
void BM_AttentionBf16(benchmark::State& state) { attention_case(state, false, Tile::kBf16); }

void one_thread(benchmark::internal::Benchmark* b) {
  for (int s : {128, 512, 2048}) b->Args({s, 1});
  b->Unit(benchmark::kMillisecond);
}
void two_threads(benchmark::internal::Benchmark* b) {
  for (int s : {128, 512, 2048}) b->Args({s, 2});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_Attention)->Apply(one_thread);
BENCHMARK(BM_Attention)->Apply(two_threads);
BENCHMARK(BM_AttentionCausal)->Apply(one_thread);
BENCHMARK(BM_AttentionScalar)->Args({128, 1})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AttentionBf16)->Apply(one_thread);

}  // namespace

BENCHMARK_MAIN();
