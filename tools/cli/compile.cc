// peregrine compile MODEL -o OUT.onnx: runs the graph compiler's passes and writes the
// optimized graph as an ONNX file (fused ops in the `peregrine` domain).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends/reference/evaluate.h"
#include "cli_common.h"
#include "importer/onnx/onnx_exporter.h"
#include "importer/onnx/onnx_importer.h"
#include "ops/type_inference.h"
#include "passes/pipelines.h"

namespace peregrine::cli {

namespace {

// The same rules Session::load applies to --shape.
Status apply_shape(ir::Graph& g, const std::string& name, const Shape& shape) {
  bool is_input = std::find(g.inputs.begin(), g.inputs.end(), name) != g.inputs.end();
  if (!is_input) return invalid_input("--shape: '" + name + "' is not an input of the model");
  ir::Value& v = g.values[name];
  if (v.type.is_tensor() && v.type.has_shape && v.type.dims.size() != shape.size())
    return invalid_input("--shape: input '" + name + "' has rank " +
                         std::to_string(v.type.dims.size()) + ", given " + shape_to_string(shape));
  for (size_t i = 0; v.type.has_shape && i < shape.size(); ++i)
    if (v.type.dims[i] >= 0 && v.type.dims[i] != shape[i])
      return invalid_input("--shape: input '" + name + "' dim " + std::to_string(i) +
                           " is fixed at " + std::to_string(v.type.dims[i]));
  v.type = ir::ValueType::tensor(v.type.dtype, shape);
  return Status::ok();
}

}  // namespace

int cmd_compile(int argc, char** argv) {
  // -o is the short form of --output (main() already turned -O<N> into --opt-level=N).
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i)
    rest.push_back(!std::strcmp(argv[i], "-o") ? const_cast<char*>("--output") : argv[i]);
  Args args("compile", "MODEL -o OUT.onnx [-O0|-O1|-O2|-O3] [options]");
  args.flag("output", "OUT.onnx: where to write the optimized model (also -o)");
  args.flag("opt-level", "optimization level 0..3 (also -O0..-O3; default 2)");
  args.flag("disable-pass", "NAME: skip a pass (repeatable)", true);
  args.flag("shape", "NAME=DIMS: fix an input's shape, e.g. data=1x3x224x224 (repeatable)", true);
  args.toggle("verbose", "log what each pass changed");
  args.toggle("overwrite", "replace OUT if it exists");
  Status st = args.parse(static_cast<int>(rest.size()), rest.data());
  if (!st.is_ok()) return print_error(st);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    std::string names;
    for (const auto& n : passes::all_pass_names()) names += "  " + n + "\n";
    std::printf("passes:\n%s", names.c_str());
    return 0;
  }
  if (args.positional().size() != 1)
    return print_error(invalid_input("peregrine compile: expected exactly one MODEL argument"));
  int level = passes::kDefaultOptLevel;
  if (args.has("opt-level")) {
    std::string v = args.get("opt-level");
    if (v.size() != 1 || v[0] < '0' || v[0] > '3')
      return print_error(invalid_input("--opt-level must be 0, 1, 2 or 3, got '" + v + "'"));
    level = v[0] - '0';
  }
  if (!args.has("output")) return print_error(invalid_input("peregrine compile: -o OUT is required"));

  auto model = load_onnx_model(args.positional()[0]);
  if (!model.is_ok()) return print_error(model.status());
  ir::Graph& g = model->graph;
  for (const auto& s : args.get_all("shape")) {
    auto kv = split_assignment(s, "shape");
    if (!kv.is_ok()) return print_error(kv.status());
    auto dims = parse_dims(kv->second);
    if (!dims.is_ok()) return print_error(dims.status());
    st = apply_shape(g, kv->first, *dims);
    if (!st.is_ok()) return print_error(st);
  }
  auto inferred = infer_graph_types(g, reference_evaluator());
  if (!inferred.is_ok()) return print_error(inferred.status());
  const size_t nodes_before = g.nodes.size();
  std::vector<passes::PassStats> stats;
  st =
      passes::optimize_graph(g, level, reference_evaluator(), args.get_all("disable-pass"), &stats);
  if (!st.is_ok()) return print_error(st);
  // Fresh types for value_info (fused nodes' outputs, folded constants).
  inferred = infer_graph_types(g, reference_evaluator());
  if (!inferred.is_ok()) return print_error(inferred.status());
  if (args.is_set("verbose")) {
    for (const auto& s : stats)
      std::fprintf(stderr, "%-34s %4d rewrites  nodes %5zu -> %5zu  %8.2f ms\n", s.name.c_str(),
                   s.rewrites, s.nodes_before, s.nodes_after, s.millis);
  }
  st = save_onnx_model(*model, args.get("output"), args.is_set("overwrite"));
  if (!st.is_ok()) return print_error(st);
  std::printf("%s: -O%d, %zu -> %zu nodes, wrote %s\n", args.positional()[0].c_str(), level,
              nodes_before, g.nodes.size(), args.get("output").c_str());
  return 0;
}

}  // namespace peregrine::cli
