// Depthwise 3x3 / 5x5 convolutions (NCHW, multiplier 1, bias + Clip(0, 6)) through
// depthwise_chw() with each algorithm forced: the per-plane kernel against the channel-blocked
// (c8) one, on the selected ISA. The measurements behind use_dwconv2d_c8()
// (kernels/conv_depthwise_chw.cc).
//
//   build/bin/peregrine_dwconv_bench --benchmark_repetitions=5 \
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
//
// Names: <model>/<C>x<H>x<W>_k<K>_s<S>/<algo>; batch 1, pads K / 2, 1 thread, CPU time.
// Shapes: every MobileNetV2 depthwise layer, a few MobileNetV3 / EfficientNet-style 5x5 ones and
// wider planes where the per-plane kernel's long rows might win.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/kernels/conv_depthwise_chw.h"

namespace {

using namespace peregrine;

struct DwShape {
  const char *model;
  int64_t c, h, w, k, stride;
};

const DwShape kShapes[] = {
    {"MobileNetV2", 32, 112, 112, 3, 1},
    {"MobileNetV2", 96, 112, 112, 3, 2},
    {"MobileNetV2", 144, 56, 56, 3, 1},
    {"MobileNetV2", 144, 56, 56, 3, 2},
    {"MobileNetV2", 192, 28, 28, 3, 1},
    {"MobileNetV2", 192, 28, 28, 3, 2},
    {"MobileNetV2", 384, 14, 14, 3, 1},
    {"MobileNetV2", 576, 14, 14, 3, 1},
    {"MobileNetV2", 576, 14, 14, 3, 2},
    {"MobileNetV2", 960, 7, 7, 3, 1},
    {"K5", 72, 56, 56, 5, 2},
    {"K5", 240, 28, 28, 5, 1},
    {"K5", 672, 14, 14, 5, 1},
    {"K5", 960, 7, 7, 5, 1},
    {"Wide", 16, 224, 224, 3, 1},
    {"Wide", 32, 160, 160, 3, 1},
    {"Wide", 32, 224, 224, 3, 2},
    {"Wide", 16, 320, 320, 3, 1},
    {"Wide", 8, 640, 640, 3, 1},
    {"Wide", 8, 640, 640, 3, 2},
    {"Wide", 8, 1280, 720, 3, 1},
    {"K1", 144, 56, 56, 1, 1},
    {"K7", 96, 56, 56, 7, 1},
    {"K7", 384, 14, 14, 7, 1},
};

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v) x = dist(rng);
  return v;
}

void BM_DwConv(benchmark::State &state, DwShape s, cpu::DwConvAlgo algo) {
  const int64_t pad = s.k / 2;
  const int64_t oh = (s.h + 2 * pad - s.k) / s.stride + 1,
                ow = (s.w + 2 * pad - s.k) / s.stride + 1;
  const cpu::DwConv2dGeometry g{s.h, s.w, oh, ow, s.k, s.k, s.stride, s.stride, 1, 1, pad, pad};
  const std::vector<float> x = random_floats(size_t(s.c * s.h * s.w), 1);
  const std::vector<float> w = random_floats(size_t(s.c * s.k * s.k), 2);
  const std::vector<float> b = random_floats(size_t(s.c), 3);
  std::vector<float> y(size_t(s.c * oh * ow));
  cpu::FusedEpilogue fused;
  fused.activation = cpu::Activation::kClip;
  fused.p0 = 0.0f;
  fused.p1 = 6.0f;
  const cpu::DepthwiseChwArgs args{x.data(), w.data(), b.data(), nullptr, y.data(), 1, s.c, s.c, g};
  const char *ran = "";
  for (auto _ : state) {
    ran = cpu::depthwise_chw(cpu::f32_dwconv2d_chw_ukernel(), args, fused,
                             cpu::f32_gemm_kernel().epilogue, 1, algo);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(ran);
}

}  // namespace

int main(int argc, char **argv) {
  for (const DwShape &s : kShapes)
    for (auto [algo, algo_name] :
         {std::pair{cpu::DwConvAlgo::kPlane, "plane"}, std::pair{cpu::DwConvAlgo::kC8, "c8"}}) {
      const std::string name = std::string(s.model) + "/" + std::to_string(s.c) + "x" +
                               std::to_string(s.h) + "x" + std::to_string(s.w) + "_k" +
                               std::to_string(s.k) + "_s" + std::to_string(s.stride) + "/" +
                               algo_name;
      benchmark::RegisterBenchmark(name.c_str(), BM_DwConv, s, algo)->Unit(benchmark::kMicrosecond);
    }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
