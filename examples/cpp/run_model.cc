// Loads an ONNX model with Peregrine's public C++ API, runs it once on inputs of ones (symbolic
// dims taken as 1) and prints each output's shape and first values; with --profile, one more
// run with node timings, printed per node (name, op type, kernel, microseconds) to stderr.
//   run_model MODEL.onnx [THREADS] [--profile]
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "peregrine/session.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: run_model MODEL.onnx [THREADS] [--profile]\n");
    return 2;
  }
  peregrine::SessionOptions options;
  if (argc > 2) options.num_threads = std::atoi(argv[2]);
  const bool profile = argc > 3 && std::string(argv[3]) == "--profile";
  auto session = peregrine::Session::load(argv[1], options);
  if (!session.is_ok()) {
    std::fprintf(stderr, "error: %s\n", session.status().message().c_str());
    return session.status().exit_code();
  }
  std::map<std::string, peregrine::Tensor> inputs;
  for (const peregrine::IoInfo& in : (*session)->inputs()) {
    if (in.dtype != peregrine::DType::kFloat32) {
      std::fprintf(stderr, "error: input '%s' is not float32\n", in.name.c_str());
      return 2;
    }
    peregrine::Shape shape = in.shape;
    for (int64_t& d : shape) d = d < 0 ? 1 : d;
    auto t = peregrine::Tensor::make(in.dtype, shape);
    if (!t.is_ok()) {
      std::fprintf(stderr, "error: %s\n", t.status().message().c_str());
      return 2;
    }
    float* data = t->data<float>();
    for (int64_t i = 0; i < t->numel(); ++i) data[i] = 1.0f;
    inputs.emplace(in.name, std::move(*t));
  }
  auto outputs = (*session)->run(inputs);
  if (!outputs.is_ok()) {
    std::fprintf(stderr, "error: %s\n", outputs.status().message().c_str());
    return outputs.status().exit_code();
  }
  for (const auto& [name, t] : *outputs) {
    std::printf("%s: [", name.c_str());
    for (size_t i = 0; i < t.shape().size(); ++i)
      std::printf("%s%lld", i ? "," : "", (long long)t.shape()[i]);
    std::printf("]");
    if (t.dtype() == peregrine::DType::kFloat32)
      for (int64_t i = 0; i < t.numel() && i < 4; ++i) std::printf(" %g", t.data<float>()[i]);
    std::printf("\n");
  }
  if (!profile) return 0;
  std::map<std::string, peregrine::RuntimeValue> values;
  for (const auto& [name, t] : inputs) values[name] = peregrine::RuntimeValue::of(t);
  std::vector<peregrine::NodeTiming> timings;
  auto profiled = (*session)->run_values(values, &timings);
  if (!profiled.is_ok()) {
    std::fprintf(stderr, "error: %s\n", profiled.status().message().c_str());
    return profiled.status().exit_code();
  }
  const std::vector<peregrine::NodeKernel> nodes = (*session)->node_kernels();
  for (const peregrine::NodeTiming& t : timings)
    std::fprintf(stderr, "%s %s %s %.1f\n", nodes[t.node].node.c_str(),
                 nodes[t.node].op_type.c_str(), t.kernel.c_str(), t.duration_us);
  return 0;
}
