// peregrine quantize MODEL -o OUT.onnx: post-training static quantization. Calibrates the
// activations' ranges on sample inputs and writes a standard QDQ model (uint8 activations, int8
// weights) that ONNX Runtime and OpenVINO load as well (src/quantization/).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "backends/reference/evaluate.h"
#include "cli_common.h"
#include "importer/onnx/onnx_exporter.h"
#include "importer/onnx/onnx_importer.h"
#include "io/npy.h"
#include "model_inputs.h"
#include "ops/type_inference.h"
#include "passes/pipelines.h"
#include "quantization/calibration.h"
#include "quantization/insert_qdq.h"

namespace peregrine::cli {

namespace {

namespace fs = std::filesystem;
using Sample = std::map<std::string, Tensor>;

std::vector<fs::path> sorted_entries(const fs::path& dir, bool directories) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (directories ? e.is_directory(ec) : (e.is_regular_file(ec) && e.path().extension() == ".npy"))
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// --calib DIR: for a model with one input, every DIR/*.npy is one sample; with several inputs,
// every subfolder of DIR is one sample holding INPUT_NAME.npy for each input.
Expected<std::vector<Sample>> samples_from_folder(const std::string& dir,
                                                  const std::vector<std::string>& inputs) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return invalid_input("--calib '" + dir + "' is not a folder");
  std::vector<Sample> samples;
  if (inputs.size() == 1) {
    for (const auto& f : sorted_entries(dir, false)) {
      PG_ASSIGN_OR_RETURN(Tensor t, read_npy(f.string()));
      samples.push_back({{inputs[0], std::move(t)}});
    }
  } else {
    for (const auto& sub : sorted_entries(dir, true)) {
      Sample s;
      for (const auto& name : inputs) {
        const fs::path f = sub / (name + ".npy");
        if (!fs::is_regular_file(f, ec))
          return invalid_input("--calib: sample folder '" + sub.string() + "' has no " + name + ".npy");
        PG_ASSIGN_OR_RETURN(s[name], read_npy(f.string()));
      }
      samples.push_back(std::move(s));
    }
  }
  if (samples.empty())
    return invalid_input("--calib '" + dir + "' holds no samples (" +
                         (inputs.size() == 1 ? "*.npy files" : "one subfolder per sample") + ")");
  return samples;
}

// --calib-random N: seeded values shaped like the graph inputs (--shape fixes unknown dims).
Expected<std::vector<Sample>> random_samples(const ir::Graph& g, int64_t count, uint64_t seed,
                                             const std::map<std::string, Shape>& shapes) {
  std::mt19937_64 rng(seed);
  std::vector<Sample> samples(static_cast<size_t>(count));
  for (const auto& name : g.inputs) {
    const ir::Value* v = g.find_value(name);
    if (!v || !v->type.is_tensor() || !v->type.has_shape)
      return unsupported("input '" + name + "' has no tensor shape; give samples with --calib");
    Shape shape = v->type.dims;
    if (auto it = shapes.find(name); it != shapes.end()) shape = it->second;
    for (auto& d : shape)
      if (d < 0) {
        std::fprintf(stderr, "note: input '%s' has an unknown dim; using 1 (fix it with --shape)\n",
                     name.c_str());
        d = 1;
      }
    for (auto& s : samples) {
      auto t = random_tensor(v->type.dtype, shape, rng);
      if (!t.is_ok()) return t.status().with_context("input '" + name + "'");
      s[name] = std::move(t).value();
    }
  }
  return samples;
}

}  // namespace

int cmd_quantize(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i)
    rest.push_back(!std::strcmp(argv[i], "-o") ? const_cast<char*>("--output") : argv[i]);
  Args args("quantize", "MODEL -o OUT.onnx [--calib DIR | --calib-random N] [options]");
  args.flag("output", "OUT.onnx: where to write the QDQ model (also -o)");
  args.flag("calib", "DIR: calibration samples (*.npy per sample, or a subfolder per sample with INPUT.npy)");
  args.flag("calib-random", "N: calibrate on N seeded random samples (default 8 without --calib)");
  args.flag("method", "minmax (default), percentile or entropy: how a tensor's range is chosen");
  args.flag("percentile", "P for --method percentile (default 99.999)");
  args.toggle("per-channel", "one weight scale per output channel (the default)");
  args.toggle("per-tensor", "one weight scale per weight tensor");
  args.flag("exclude", "NODE|OP_TYPE: keep a node (by name) or an op type in float32 (repeatable)", true);
  args.flag("shape", "NAME=DIMS: an input's shape for random samples (repeatable)", true);
  args.flag("seed", "seed of the random samples (default 0)");
  args.flag("threads", "worker threads for the calibration runs (default 1)");
  args.toggle("overwrite", "replace OUT if it exists");
  args.toggle("verbose", "list the nodes left in float32 and why");
  Status st = args.parse(static_cast<int>(rest.size()), rest.data());
  if (!st.is_ok()) return print_error(st);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (args.positional().size() != 1)
    return print_error(invalid_input("peregrine quantize: expected exactly one MODEL argument"));
  if (!args.has("output")) return print_error(invalid_input("peregrine quantize: -o OUT.onnx is required"));
  if (args.has("calib") && args.has("calib-random"))
    return print_error(invalid_input("--calib and --calib-random exclude each other"));
  if (args.is_set("per-channel") && args.is_set("per-tensor"))
    return print_error(invalid_input("--per-channel and --per-tensor exclude each other"));
  const std::string path = args.positional()[0];
  const std::string out = args.get("output");
  std::error_code ec;
  if (fs::exists(out, ec) && !args.is_set("overwrite"))
    return print_error(invalid_input("'" + out + "' exists; pass --overwrite to replace it"));

  quantization::QuantizeOptions qopts;
  qopts.per_channel = !args.is_set("per-tensor");
  qopts.exclude = args.get_all("exclude");
  quantization::CalibrationOptions copts;
  if (args.has("method")) {
    auto m = quantization::parse_calibration_method(args.get("method"));
    if (!m.is_ok()) return print_error(m.status());
    copts.method = *m;
  }
  if (args.has("percentile")) {
    char* end = nullptr;
    copts.percentile = std::strtod(args.get("percentile").c_str(), &end);
    if (*end != '\0' || !(copts.percentile > 50 && copts.percentile <= 100))
      return print_error(invalid_input("--percentile must be a number in (50, 100]"));
  }
  int64_t threads = 1, count = 8, seed = 0;
  for (auto [flag, target] : {std::pair{"threads", &threads}, {"calib-random", &count}, {"seed", &seed}}) {
    if (!args.has(flag)) continue;
    auto v = parse_int(args.get(flag), flag);
    if (!v.is_ok()) return print_error(v.status());
    *target = *v;
  }
  if (threads < 1 || count < 1 || seed < 0)
    return print_error(invalid_input("--threads and --calib-random must be at least 1, --seed at least 0"));
  copts.num_threads = static_cast<int>(threads);
  std::map<std::string, Shape> shapes;
  for (const auto& s : args.get_all("shape")) {
    auto kv = split_assignment(s, "shape");
    if (!kv.is_ok()) return print_error(kv.status());
    auto dims = parse_dims(kv->second);
    if (!dims.is_ok()) return print_error(dims.status());
    shapes[kv->first] = *dims;
  }

  auto model = load_onnx_model(path);
  if (!model.is_ok()) return print_error(model.status());
  ir::Graph& g = model->graph;
  for (const auto& [name, shape] : shapes)
    if (std::find(g.inputs.begin(), g.inputs.end(), name) == g.inputs.end())
      return print_error(invalid_input("--shape: '" + name + "' is not an input of the model"));
  auto inferred = infer_graph_types(g, reference_evaluator());
  if (!inferred.is_ok()) return print_error(inferred.status());
  // Batch norms folded into their convs and constants folded first (standard ONNX still).
  st = passes::prepare_for_quantization(g, reference_evaluator());
  if (!st.is_ok()) return print_error(st);
  inferred = infer_graph_types(g, reference_evaluator());
  if (!inferred.is_ok()) return print_error(inferred.status());
  auto plan = quantization::plan_quantization(g, qopts);
  if (!plan.is_ok()) return print_error(plan.status());
  if (plan->nodes.empty())
    return print_error(unsupported(path + ": no node to quantize (Conv, MatMul, Gemm with constant weights, Add)"));

  auto samples = args.has("calib") ? samples_from_folder(args.get("calib"), g.inputs)
                                   : random_samples(g, count, static_cast<uint64_t>(seed), shapes);
  if (!samples.is_ok()) return print_error(samples.status());
  // A second copy, prepared the same way (same names): calibration adds outputs to it.
  auto observed = load_onnx_model(path);
  if (!observed.is_ok()) return print_error(observed.status());
  inferred = infer_graph_types(observed->graph, reference_evaluator());
  if (inferred.is_ok())
    st = passes::prepare_for_quantization(observed->graph, reference_evaluator());
  if (!inferred.is_ok() || !st.is_ok()) return print_error(inferred.is_ok() ? st : inferred.status());
  auto ranges = quantization::calibrate(std::move(*observed), plan->activations, *samples, copts);
  if (!ranges.is_ok()) return print_error(ranges.status());

  st = quantization::insert_qdq(g, *plan, *ranges, qopts);
  if (!st.is_ok()) return print_error(st);
  inferred = infer_graph_types(g, reference_evaluator());
  if (!inferred.is_ok()) return print_error(inferred.status());
  st = save_onnx_model(*model, out, args.is_set("overwrite"));
  if (!st.is_ok()) return print_error(st);
  std::printf("%s: %zu nodes quantized (%zu activations, weights %s), %zu left in float32; "
              "calibrated on %zu samples (%s); wrote %s\n",
              path.c_str(), plan->nodes.size(), plan->activations.size(),
              qopts.per_channel ? "per channel" : "per tensor", plan->skipped.size(),
              samples->size(), args.has("method") ? args.get("method").c_str() : "minmax",
              out.c_str());
  if (args.is_set("verbose"))
    for (const auto& s : plan->skipped) std::printf("  float32: %s\n", s.c_str());
  return 0;
}

}  // namespace peregrine::cli
