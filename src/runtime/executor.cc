#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "ir/verifier.h"
#include "ops/op_schema.h"
#include "runtime/type_inference.h"

namespace peregrine {

const RuntimeValue* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent) {
    auto it = s->values->find(name);
    if (it != s->values->end()) return &it->second;
  }
  return nullptr;
}

Expected<std::unique_ptr<GraphExecutor>> GraphExecutor::create(const ir::Graph& graph,
                                                               std::vector<const Backend*> backends,
                                                               int num_threads) {
  std::unique_ptr<GraphExecutor> ex(new GraphExecutor(graph, num_threads));
  ex->backends_ = backends;
  const SchemaRegistry& schemas = SchemaRegistry::global();
  for (const auto& node : graph.nodes) {
    if (!schemas.find(node->domain, node->op_type))
      return unsupported(node->describe() + ": op '" + node->op_type + "'" +
                         (node->domain.empty() ? "" : " of domain '" + node->domain + "'") +
                         " is not supported");
    std::vector<ir::ValueType> in_types;
    std::vector<const Tensor*> constants;  // initializers, for weight packing
    for (const auto& in : node->inputs) {
      const ir::Value* v = in.empty() ? nullptr : graph.find_value(in);
      in_types.push_back(v ? v->type : ir::ValueType{});
      // An initializer that is also a graph input can be overridden at run time.
      const bool constant = v && v->initializer &&
                            std::find(graph.inputs.begin(), graph.inputs.end(), in) ==
                                graph.inputs.end();
      constants.push_back(constant ? &*v->initializer : nullptr);
    }
    std::unique_ptr<PreparedKernel> kernel;
    for (const Backend* b : backends) {
      if (!b->supports(*node)) continue;
      auto k = b->prepare_with_constants(*node, in_types, constants);
      if (!k.is_ok()) return k.status();
      kernel = std::move(k).value();
      break;
    }
    if (!kernel) return unsupported(node->describe() + ": no backend implements this op");
    ex->kernels_.push_back(std::move(kernel));
    // Subgraphs are planned now too, so an unsupported op anywhere fails at load time.
    for (const auto& [key, a] : node->attributes) {
      std::vector<const ir::Graph*> subs;
      if (a.g) subs.push_back(a.g.get());
      for (const auto& sg : a.graphs) subs.push_back(sg.get());
      for (const ir::Graph* sg : subs) {
        auto sub = create(*sg, backends, num_threads);
        if (!sub.is_ok()) return sub.status();
        ex->subgraph_executors_.emplace(sg, std::move(sub).value());
      }
    }
  }
  // Liveness: release each local value after its last reader (graph outputs never).
  std::map<std::string, size_t> last_use;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& n = *graph.nodes[i];
    for (const auto& in : n.inputs)
      if (!in.empty()) last_use[in] = i;
    for (const auto& [k, a] : n.attributes) {
      std::vector<const ir::Graph*> subs;
      if (a.g) subs.push_back(a.g.get());
      for (const auto& sg : a.graphs) subs.push_back(sg.get());
      for (const ir::Graph* sg : subs)
        for (const auto& fv : ir::free_variables(*sg)) last_use[fv] = i;
    }
  }
  std::set<std::string> keep(graph.outputs.begin(), graph.outputs.end());
  ex->release_after_.resize(graph.nodes.size());
  std::set<std::string> produced;
  for (const auto& n : graph.nodes)
    for (const auto& o : n->outputs) produced.insert(o);
  for (const auto& [name, i] : last_use)
    if (!keep.count(name) && produced.count(name)) ex->release_after_[i].push_back(name);
  return ex;
}

Expected<std::vector<RuntimeValue>> GraphExecutor::run_subgraph(
    const ir::Graph& g, const std::vector<RuntimeValue>& inputs, const Scope* scope) {
  auto it = subgraph_executors_.find(&g);
  if (it == subgraph_executors_.end()) {
    PG_ASSIGN_OR_RETURN(auto ex, create(g, backends_, num_threads_));
    it = subgraph_executors_.emplace(&g, std::move(ex)).first;
  }
  if (inputs.size() != g.inputs.size())
    return invalid_model("subgraph '" + g.name + "' takes " + std::to_string(g.inputs.size()) +
                         " inputs, given " + std::to_string(inputs.size()));
  std::map<std::string, RuntimeValue> named;
  for (size_t i = 0; i < inputs.size(); ++i) named[g.inputs[i]] = inputs[i];
  return it->second->run(named, scope);
}

Expected<std::vector<RuntimeValue>> GraphExecutor::run(
    const std::map<std::string, RuntimeValue>& inputs, const Scope* outer,
    std::vector<NodeTiming>* timings) {
  std::map<std::string, RuntimeValue> values;
  for (const auto& [name, v] : graph_.values)
    if (v.initializer) values[name] = RuntimeValue::of(*v.initializer);
  for (const auto& name : graph_.inputs) {
    auto it = inputs.find(name);
    if (it == inputs.end()) return invalid_input("graph input '" + name + "' was not given");
    values[name] = it->second;
  }
  Scope scope{&values, outer};
  const SchemaRegistry& schemas = SchemaRegistry::global();
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const ir::ValueType unknown;

  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    const ir::Node& node = *graph_.nodes[i];
    std::vector<const RuntimeValue*> in;
    std::vector<ir::ValueType> in_types_store(node.inputs.size());
    std::vector<const ir::ValueType*> in_types;
    std::vector<const Tensor*> in_values;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const std::string& name = node.inputs[k];
      if (name.empty()) {
        in.push_back(nullptr);
        in_types.push_back(nullptr);
        in_values.push_back(nullptr);
        continue;
      }
      const RuntimeValue* v = scope.find(name);
      if (!v) return internal_error(node.describe() + ": input '" + name + "' has no value at run time");
      in.push_back(v);
      in_types_store[k] = type_of(*v);
      in_types.push_back(&in_types_store[k]);
      in_values.push_back(v->is_tensor() ? &v->tensor : nullptr);
    }
    const OpSchema* schema = schemas.find(node.domain, node.op_type);
    InferContext ictx(node, in_types, in_values);
    PG_RETURN_IF_ERROR(schema->infer(ictx));

    const Scope* node_scope = &scope;
    KernelContext kctx(
        node, in, ictx.output_types(),
        [this, node_scope](const ir::Graph& g, const std::vector<RuntimeValue>& sub_inputs) {
          return run_subgraph(g, sub_inputs, node_scope);
        },
        num_threads_);
    const auto start = Clock::now();
    Status st = kernels_[i]->run(kctx);
    const auto end = Clock::now();
    if (!st.is_ok()) {
      // Kernel errors are about this node; make sure the message names it.
      if (st.message().find(node.describe()) == std::string::npos) st = st.with_context(node.describe());
      return st;
    }
    if (timings) {
      timings->push_back({&node, std::chrono::duration<double, std::micro>(start - t0).count(),
                          std::chrono::duration<double, std::micro>(end - start).count(),
                          kernels_[i]->name()});
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      if (node.outputs[k].empty()) continue;
      RuntimeValue& out = kctx.outputs()[k];
      const ir::ValueType& expect = ictx.output_types()[k];
      if (out.is_tensor() && expect.is_tensor()) {
        if (expect.dtype != DType::kUndefined && out.tensor.dtype() != expect.dtype)
          return internal_error(node.describe() + ": output " + std::to_string(k) + " has type " +
                                std::string(dtype_name(out.tensor.dtype())) + ", schema says " +
                                std::string(dtype_name(expect.dtype)));
        if (expect.is_static() && out.tensor.shape() != expect.dims)
          return internal_error(node.describe() + ": output " + std::to_string(k) + " has shape " +
                                shape_to_string(out.tensor.shape()) + ", schema says " +
                                shape_to_string(expect.dims));
      }
      values[node.outputs[k]] = std::move(out);
    }
    for (const auto& dead : release_after_[i]) values.erase(dead);
  }
  std::vector<RuntimeValue> outputs;
  for (const auto& name : graph_.outputs) {
    const RuntimeValue* v = scope.find(name);
    if (!v) return internal_error("graph output '" + name + "' was not produced");
    outputs.push_back(*v);
  }
  return outputs;
}

}  // namespace peregrine
