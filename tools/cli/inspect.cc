// peregrine inspect MODEL: what a model takes and gives, what it is made of, what it costs.
#include <cstdio>
#include <map>
#include <sstream>

#include "cli_common.h"
#include "core/json_text.h"
#include "ir/graph.h"
#include "ir/printer.h"
#include "model_inputs.h"
#include "ops/op_schema.h"
#include "peregrine/session.h"
#include "runtime/session_internals.h"

namespace peregrine::cli {

namespace {

struct Summary {
  std::map<std::string, int> op_histogram;
  int64_t parameters = 0;
  int64_t parameter_bytes = 0;
  double flops = 0;
  int64_t nodes = 0;
};

void summarize(const ir::Graph& g, Summary* s) {
  const SchemaRegistry& schemas = SchemaRegistry::global();
  for (const auto& [name, v] : g.values)
    if (v.initializer) {
      s->parameters += v.initializer->numel();
      s->parameter_bytes += static_cast<int64_t>(v.initializer->nbytes());
    }
  for (const auto& n : g.nodes) {
    ++s->nodes;
    s->op_histogram[(n->domain.empty() ? "" : n->domain + ".") + n->op_type]++;
    const OpSchema* schema = schemas.find(n->domain, n->op_type);
    if (schema && schema->cost) {
      std::vector<ir::ValueType> in, out;
      for (const auto& i : n->inputs) in.push_back(i.empty() || !g.find_value(i) ? ir::ValueType{} : g.find_value(i)->type);
      for (const auto& o : n->outputs) out.push_back(o.empty() || !g.find_value(o) ? ir::ValueType{} : g.find_value(o)->type);
      s->flops += schema->cost(*n, in, out).flops;
    }
    for (const auto& [k, a] : n->attributes) {
      if (a.g) summarize(*a.g, s);
      for (const auto& sg : a.graphs) summarize(*sg, s);
    }
  }
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  Args args("inspect", "MODEL [options]");
  args.flag("shape", "NAME=DIMS: fix an input's shape for shape inference and FLOPs (repeatable)", true);
  args.toggle("json", "print one JSON object instead of text");
  args.toggle("graph", "print the graph after optimization, one node per line");
  args.toggle("kernels",
              "run once on seeded random inputs, then print the kernel each node ran on (the "
              "algorithm its shapes chose) and the file that defines it");
  add_engine_flags(&args);
  Status st = args.parse(argc, argv);
  if (!st.is_ok()) return print_error(st);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (args.positional().size() != 1)
    return print_error(invalid_input("peregrine inspect: expected exactly one MODEL argument"));
  SessionOptions options;
  st = parse_engine_flags(args, &options);
  if (!st.is_ok()) return print_error(st);
  for (const auto& s : args.get_all("shape")) {
    auto kv = split_assignment(s, "shape");
    if (!kv.is_ok()) return print_error(kv.status());
    auto dims = parse_dims(kv->second);
    if (!dims.is_ok()) return print_error(dims.status());
    options.input_shapes[kv->first] = *dims;
  }
  auto session = Session::load(args.positional()[0], options);
  if (!session.is_ok()) return print_error(session.status());
  const ir::Model& model = session_model(**session);
  Summary sum;
  summarize(model.graph, &sum);
  const MemoryPlanStats mem = (*session)->memory_plan_stats();
  std::vector<NodeKernel> kernels;
  if (args.is_set("kernels")) {
    auto inputs = make_model_inputs(**session, {}, 0);
    if (!inputs.is_ok()) return print_error(inputs.status());
    auto ran = (*session)->run(*inputs);
    if (!ran.is_ok()) return print_error(ran.status());
    kernels = (*session)->node_kernels();
  }

  std::ostringstream o;
  if (args.is_set("json")) {
    auto io_list = [&](const std::vector<IoInfo>& list) {
      o << "[";
      for (size_t i = 0; i < list.size(); ++i)
        o << (i ? ", " : "") << "{\"name\": " << json_string(list[i].name)
          << ", \"type\": " << json_string(list[i].type) << "}";
      o << "]";
    };
    o << "{\"model\": " << json_string(model.path)
      << ", \"producer\": " << json_string(model.producer_name + " " + model.producer_version)
      << ", \"ir_version\": " << model.ir_version << ", \"opsets\": {";
    size_t k = 0;
    for (const auto& [d, v] : model.graph.opsets)
      o << (k++ ? ", " : "") << json_string(d.empty() ? "ai.onnx" : d) << ": " << v;
    o << "}, \"inputs\": ";
    io_list((*session)->inputs());
    o << ", \"outputs\": ";
    io_list((*session)->outputs());
    o << ", \"nodes\": " << sum.nodes << ", \"op_histogram\": {";
    k = 0;
    for (const auto& [op, n] : sum.op_histogram)
      o << (k++ ? ", " : "") << json_string(op) << ": " << n;
    o << "}, \"parameters\": " << sum.parameters << ", \"parameter_bytes\": " << sum.parameter_bytes
      << ", \"flops\": " << static_cast<int64_t>(sum.flops) << ", \"arena_bytes\": "
      << mem.arena_bytes << ", \"arena_lower_bound_bytes\": " << mem.lower_bound_bytes
      << ", \"unshared_bytes\": " << mem.unshared_bytes
      << ", \"values_in_concat_outputs\": " << mem.concat_slices;
    if (args.is_set("kernels")) {
      o << ", \"kernels\": [";
      for (size_t i = 0; i < kernels.size(); ++i)
        o << (i ? ", " : "") << "{\"node\": " << json_string(kernels[i].node)
          << ", \"op_type\": " << json_string(kernels[i].op_type)
          << ", \"kernel\": " << json_string(kernels[i].kernel)
          << ", \"source\": " << json_string(kernels[i].source) << "}";
      o << "]";
    }
    o << "}\n";
  } else {
    o << "model:      " << model.path << "\n";
    o << "producer:   " << model.producer_name << " " << model.producer_version << " (IR version "
      << model.ir_version << ")\n";
    o << "opsets:    ";
    for (const auto& [d, v] : model.graph.opsets) o << " " << (d.empty() ? "ai.onnx" : d) << "=" << v;
    o << "\ninputs:\n";
    for (const auto& i : (*session)->inputs()) o << "  " << i.name << ": " << i.type << "\n";
    o << "outputs:\n";
    for (const auto& i : (*session)->outputs()) o << "  " << i.name << ": " << i.type << "\n";
    o << "nodes:      " << sum.nodes << "\n";
    for (const auto& [op, n] : sum.op_histogram) o << "  " << op << ": " << n << "\n";
    char buf[128];
    std::snprintf(buf, sizeof buf, "%.3f M (%.2f MB)", sum.parameters / 1e6, sum.parameter_bytes / 1e6);
    o << "parameters: " << buf << "\n";
    std::snprintf(buf, sizeof buf, "%.3f GFLOP", sum.flops / 1e9);
    o << "flops:      " << buf << " per run\n";
    // The static activation arena against its lower bound and against no sharing at all.
    std::snprintf(buf, sizeof buf,
                  "%.2f MB (lower bound %.2f MB, %.3fx; unshared %.2f MB; %lld values "
                  "written into Concat outputs)",
                  mem.arena_bytes / 1e6, mem.lower_bound_bytes / 1e6,
                  mem.lower_bound_bytes ? double(mem.arena_bytes) / mem.lower_bound_bytes : 1.0,
                  mem.unshared_bytes / 1e6, static_cast<long long>(mem.concat_slices));
    o << "arena:      " << buf << "\n";
  }
  if (args.is_set("graph") && !args.is_set("json")) o << "\n" << ir::print_graph(model.graph);
  if (args.is_set("kernels") && !args.is_set("json")) {
    // One line per node; the sources are the CPU kernel table's (src/backends/cpu/).
    o << "\nkernels (node, op, kernel, source):\n";
    for (const NodeKernel& k : kernels)
      o << "  " << k.node << "  " << k.op_type << "  " << k.kernel
        << (k.source.empty() ? "" : "  " + k.source) << "\n";
  }
  std::fputs(o.str().c_str(), stdout);
  return 0;
}

}  // namespace peregrine::cli
