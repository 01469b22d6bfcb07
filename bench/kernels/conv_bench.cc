// Stride-1 convolutions of the zoo and real models through the CPU backend (one-node Conv graph,
// the executor's kernel path), each algorithm forced: im2col + GEMM, Winograd F(4x4, 3x3) and
// F(2x2, 3x3), the phase-plane GEMM, and the automatic choice; in GFLOP/s counted as a direct
// convolution's 2 * Cout * Cin * KH * KW * OH * OW (so the paths compare by time).
//
//   build/bin/peregrine_conv_bench --benchmark_filter='ResNet50' --benchmark_repetitions=3
//
// Names: <model>/<layer>_<Cin>to<Cout>_<H>x<W>/<algo>/threads:<t>; batch 1, "same" pads, bias.
// Shapes: ResNet-50 (1x3x224x224) conv2 of layer1..4 (the stride-1 blocks); YOLOv8s-style
// (640x640) C2f bottleneck convs and the detect heads' 3x3 convs; VGG-16 (224x224) conv4/conv5
// (512 channels, 28x28 and 14x14); small maps (7x7 at 128/256 channels, 5x5 and 3x3 at 512)
// that bound the F(2x2) rule; Inception-v3's 1x7, 7x1 and 5x5 convs; and the Sweep of 3x3 convs
// (32-128 channels, 7x7 to 112x112) that fits the rule between Winograd and the phase planes.
// MobileNetV2 has no case: its 3x3 convs are depthwise or stride 2.
// bf16_<algo>: the same node at --precision bf16 (F(4x4) is never chosen there: no bf16_winograd).
// The algorithm is forced with PEREGRINE_CONV_ALGO at prepare time (a forced Winograd on a non-3x3
// shape runs im2col). Single-thread rates use CPU time; 2-thread ones real time.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/reference/evaluate.h"
#include "backends/reference/reference_backend.h"
#include "ir/graph.h"
#include "ops/type_inference.h"
#include "runtime/executor.h"

namespace {

using namespace peregrine;

struct ConvShape {
  const char *model;
  const char *layer;
  int64_t in_c, out_c, h, w;
  int64_t kh = 3, kw = 3;  // pads kh / 2, kw / 2
};

const ConvShape kShapes[] = {
    {"ResNet50", "layer1", 64, 64, 56, 56},
    {"ResNet50", "layer2", 128, 128, 28, 28},
    {"ResNet50", "layer3", 256, 256, 14, 14},
    {"ResNet50", "layer4", 512, 512, 7, 7},
    {"YOLO", "model.2.m", 32, 32, 160, 160},
    {"YOLO", "model.4.m", 64, 64, 80, 80},
    {"YOLO", "model.6.m", 128, 128, 40, 40},
    {"YOLO", "model.8.m", 256, 256, 20, 20},
    {"YOLO", "head.p3.cv2.0", 128, 64, 80, 80},
    {"YOLO", "head.p3.cv3", 128, 128, 80, 80},
    {"YOLO", "head.p4.cv2.0", 256, 64, 40, 40},
    {"YOLO", "head.p4.cv3.0", 256, 128, 40, 40},
    {"YOLO", "head.p5.cv2.0", 512, 64, 20, 20},
    {"YOLO", "head.p5.cv3.0", 512, 128, 20, 20},
    {"YOLO", "head.p5.cv3.1", 128, 128, 20, 20},
    {"VGG16", "conv4_2", 512, 512, 28, 28},
    {"VGG16", "conv5_2", 512, 512, 14, 14},
    {"Small", "7x7", 256, 256, 7, 7},
    {"Small", "7x7", 128, 128, 7, 7},
    {"Small", "7x7", 64, 64, 7, 7},
    {"Small", "5x5", 512, 512, 5, 5},
    {"Small", "3x3", 512, 512, 3, 3},
    // Inception-v3's factorized 7x7 (17x17 maps) and its 5x5 branch (35x35).
    {"InceptionV3", "1x7", 128, 128, 17, 17, 1, 7},
    {"InceptionV3", "7x1", 128, 192, 17, 17, 7, 1},
    {"InceptionV3", "5x5", 48, 64, 35, 35, 5, 5},
    {"InceptionV3", "3x3", 32, 64, 147, 147},
    {"InceptionV3", "3x3", 64, 96, 35, 35},
    {"InceptionV3", "3x3", 96, 96, 35, 35},
    {"InceptionV3", "3x3", 80, 192, 71, 71},
    // Pointwise convs of few channels on wide maps (MnasNet, MobileNetV2).
    {"Pointwise", "1x1", 32, 16, 112, 112, 1, 1},
    {"Pointwise", "1x1", 16, 48, 112, 112, 1, 1},
    {"Pointwise", "1x1", 16, 96, 112, 112, 1, 1},
    {"Pointwise", "1x1", 24, 72, 56, 56, 1, 1},
    // The sweep that fits the Winograd / phase-plane rule (conv.cc).
    {"Sweep", "3x3", 32, 32, 14, 14},
    {"Sweep", "3x3", 32, 32, 56, 56},
    {"Sweep", "3x3", 32, 32, 112, 112},
    {"Sweep", "3x3", 32, 64, 28, 28},
    {"Sweep", "3x3", 32, 64, 56, 56},
    {"Sweep", "3x3", 48, 64, 14, 14},
    {"Sweep", "3x3", 48, 64, 28, 28},
    {"Sweep", "3x3", 64, 64, 7, 7},
    {"Sweep", "3x3", 64, 64, 14, 14},
    {"Sweep", "3x3", 64, 64, 28, 28},
    {"Sweep", "3x3", 96, 96, 7, 7},
    {"Sweep", "3x3", 96, 96, 14, 14},
    {"Sweep", "3x3", 128, 32, 28, 28},
    {"Sweep", "3x3", 128, 32, 56, 56},
    {"Sweep", "3x3", 128, 128, 7, 7},
    {"Sweep", "3x3", 128, 128, 14, 14},
};

Tensor random_tensor(const Shape &shape, uint32_t seed) {
  Tensor t = Tensor::zeros(DType::kFloat32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

// Conv(X, W, B) with pads kh / 2, kw / 2, W and B initializers.
ir::Graph conv_graph(const ConvShape &s) {
  ir::Graph graph;
  graph.opsets[""] = 17;
  auto node = std::make_unique<ir::Node>();
  node->op_type = "Conv";
  node->opset = 17;
  node->name = "conv";
  node->inputs = {"X", "W", "B"};
  node->outputs = {"Y"};
  graph.value("X").type = ir::ValueType::tensor(DType::kFloat32, {1, s.in_c, s.h, s.w});
  graph.inputs.push_back("X");
  ir::Value &w = graph.value("W");
  w.initializer = random_tensor({s.out_c, s.in_c, s.kh, s.kw}, 2);
  w.type = ir::ValueType::tensor(DType::kFloat32, w.initializer->shape());
  ir::Value &b = graph.value("B");
  b.initializer = random_tensor({s.out_c}, 3);
  b.type = ir::ValueType::tensor(DType::kFloat32, b.initializer->shape());
  ir::Attribute pads;
  pads.name = "pads";
  pads.type = ir::Attribute::Type::kInts;
  pads.ints = {s.kh / 2, s.kw / 2, s.kh / 2, s.kw / 2};
  node->attributes["pads"] = pads;
  graph.value("Y");
  graph.outputs = {"Y"};
  graph.nodes.push_back(std::move(node));
  return graph;
}

void BM_Conv(benchmark::State &state, ConvShape s, const char *algo, bool bf16, int threads) {
  setenv("PEREGRINE_CONV_ALGO", algo, 1);
  ir::Graph graph = conv_graph(s);
  if (bf16) graph.nodes[0]->precision = Precision::kBFloat16;
  auto inferred = infer_graph_types(graph, reference_evaluator());
  auto ex = GraphExecutor::create(graph, {&cpu_backend(), &reference_backend()}, threads);
  unsetenv("PEREGRINE_CONV_ALGO");
  if (!inferred.is_ok() || !ex.is_ok()) {
    state.SkipWithError("graph setup failed");
    return;
  }
  std::map<std::string, RuntimeValue> feeds;
  feeds["X"] = RuntimeValue::of(random_tensor({1, s.in_c, s.h, s.w}, 1));
  std::vector<NodeTiming> timings;
  for (auto _ : state) {
    timings.clear();
    auto out = ex.value()->run(feeds, nullptr, &timings);
    if (!out.is_ok()) {
      state.SkipWithError(out.status().message().c_str());
      return;
    }
  }
  if (!timings.empty()) state.SetLabel(timings[0].kernel);
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(s.out_c * s.in_c * s.kh * s.kw * s.h * s.w) * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char **argv) {
  for (const ConvShape &s : kShapes)
    for (bool bf16 : {false, true})
      for (const char *algo : {"auto", "im2col", "winograd", "winograd_f2x3", "planes"})
        for (int threads : {1, 2}) {
          if (bf16 && std::string(algo) == "winograd") continue;  // never chosen at bf16
          const std::string name =
              std::string(s.model) + "/" + s.layer + "_" + std::to_string(s.in_c) + "to" +
              std::to_string(s.out_c) + "_" + std::to_string(s.h) + "x" + std::to_string(s.w) +
              "/" + (bf16 ? "bf16_" : "") + algo + "/threads:" + std::to_string(threads);
          auto *b = benchmark::RegisterBenchmark(name.c_str(), BM_Conv, s, algo, bf16, threads);
          b->Unit(benchmark::kMillisecond);
          if (threads > 1) b->UseRealTime();
        }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
