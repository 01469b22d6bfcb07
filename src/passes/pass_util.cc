#include "passes/pass_util.h"

#include <cstring>

#include "ir/verifier.h"
#include "ops/op_schema.h"

namespace peregrine::passes {

GraphIndex::GraphIndex(const ir::Graph& g) {
  inputs_.insert(g.inputs.begin(), g.inputs.end());
  outputs_.insert(g.outputs.begin(), g.outputs.end());
  for (const auto& n : g.nodes) {
    for (const auto& o : n->outputs)
      if (!o.empty()) producer_[o] = n.get();
    for (size_t i = 0; i < n->inputs.size(); ++i)
      if (!n->inputs[i].empty()) uses_[n->inputs[i]].push_back({n.get(), static_cast<int>(i)});
    for (const auto& [key, a] : n->attributes) {
      std::vector<const ir::Graph*> subs;
      if (a.g) subs.push_back(a.g.get());
      for (const auto& sg : a.graphs) subs.push_back(sg.get());
      for (const ir::Graph* sg : subs)
        for (const auto& fv : ir::free_variables(*sg)) uses_[fv].push_back({n.get(), -1});
    }
  }
}

ir::Node* GraphIndex::producer(const std::string& v) const {
  auto it = producer_.find(v);
  return it == producer_.end() ? nullptr : it->second;
}

const std::vector<GraphIndex::Use>& GraphIndex::uses(const std::string& v) const {
  static const std::vector<Use> kNone;
  auto it = uses_.find(v);
  return it == uses_.end() ? kNone : it->second;
}

ir::Node* GraphIndex::sole_consumer(const std::string& v) const {
  if (is_graph_output(v)) return nullptr;
  const auto& u = uses(v);
  if (u.size() != 1 || u[0].input < 0) return nullptr;
  return u[0].node;
}

bool GraphIndex::only_local_uses(const std::string& v) const {
  if (is_graph_output(v)) return false;
  for (const Use& u : uses(v))
    if (u.input < 0) return false;
  return true;
}

bool has_subgraph(const ir::Node& n) {
  for (const auto& [k, a] : n.attributes)
    if (a.g || !a.graphs.empty()) return true;
  return false;
}

const Tensor* constant_of(const ir::Graph& g, const std::string& v) {
  if (v.empty()) return nullptr;
  const ir::Value* val = g.find_value(v);
  return val && val->initializer ? &*val->initializer : nullptr;
}

std::optional<double> scalar_constant(const ir::Graph& g, const std::string& v) {
  const Tensor* t = constant_of(g, v);
  if (!t || t->numel() != 1 || !(dtype_is_float(t->dtype()) || dtype_is_integer(t->dtype())))
    return std::nullopt;
  return t->get_as_double(0);
}

const ir::ValueType* float32_type(const ir::Graph& g, const std::string& v) {
  const ir::Value* val = g.find_value(v);
  if (!val || !val->type.is_tensor() || val->type.dtype != DType::kFloat32) return nullptr;
  return &val->type;
}

bool is_float32(const ir::Graph& g, const std::string& v) { return float32_type(g, v) != nullptr; }

bool is_op(const ir::Node* n, const char* op_type) {
  return n && n->domain.empty() && n->op_type == op_type;
}

std::string fresh_name(ir::Graph& g, const std::string& base) {
  // "__pg" marks pass-made names; the counter keeps them unique in this graph.
  for (int i = 0;; ++i) {
    std::string name = base + "__pg" + std::to_string(i);
    if (!g.values.count(name)) {
      g.value(name);
      return name;
    }
  }
}

std::string add_initializer(ir::Graph& g, const std::string& base, Tensor t) {
  std::string name = fresh_name(g, base);
  ir::Value& v = g.value(name);
  v.type = ir::ValueType::tensor(t.dtype(), t.shape());
  v.initializer = std::move(t);
  return name;
}

ir::Node* add_node(ir::Graph& g, const std::string& op_type, std::vector<std::string> inputs,
                   std::vector<std::string> outputs, const std::string& name) {
  auto n = std::make_unique<ir::Node>();
  n->op_type = op_type;
  n->name = name;
  auto it = g.opsets.find("");
  n->opset = it == g.opsets.end() ? 1 : it->second;
  n->inputs = std::move(inputs);
  n->outputs = std::move(outputs);
  g.nodes.push_back(std::move(n));
  return g.nodes.back().get();
}

void remove_nodes(ir::Graph& g, const std::set<const ir::Node*>& dead) {
  if (dead.empty()) return;
  std::vector<std::unique_ptr<ir::Node>> kept;
  kept.reserve(g.nodes.size());
  for (auto& n : g.nodes)
    if (!dead.count(n.get())) kept.push_back(std::move(n));
  g.nodes = std::move(kept);
}

void replace_uses(ir::Graph& g, const std::string& from, const std::string& to) {
  for (auto& n : g.nodes)
    for (auto& in : n->inputs)
      if (in == from) in = to;
}

void import_peregrine_domain(ir::Graph& g) {
  if (!g.opsets.count(kPeregrineDomain)) g.opsets[kPeregrineDomain] = 1;
}

bool tensors_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (a.dtype() == DType::kString) return a.strings() == b.strings();
  if (a.nbytes() == 0) return true;
  return std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

bool attributes_equal(const ir::Attribute& a, const ir::Attribute& b) {
  using T = ir::Attribute::Type;
  if (a.type != b.type) return false;
  switch (a.type) {
    case T::kFloat: return a.f == b.f;
    case T::kInt: return a.i == b.i;
    case T::kString: return a.s == b.s;
    case T::kFloats: return a.floats == b.floats;
    case T::kInts: return a.ints == b.ints;
    case T::kStrings: return a.strings == b.strings;
    case T::kTensor: return tensors_equal(a.t, b.t);
    case T::kTensors:
      if (a.tensors.size() != b.tensors.size()) return false;
      for (size_t i = 0; i < a.tensors.size(); ++i)
        if (!tensors_equal(a.tensors[i], b.tensors[i])) return false;
      return true;
    default: return false;  // graphs and type protos: never treated as equal
  }
}

ir::Attribute int_attr(const std::string& name, int64_t v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::Attribute::Type::kInt;
  a.i = v;
  return a;
}
ir::Attribute float_attr(const std::string& name, float v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::Attribute::Type::kFloat;
  a.f = v;
  return a;
}
ir::Attribute string_attr(const std::string& name, const std::string& v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::Attribute::Type::kString;
  a.s = v;
  return a;
}
ir::Attribute ints_attr(const std::string& name, std::vector<int64_t> v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::Attribute::Type::kInts;
  a.ints = std::move(v);
  return a;
}
ir::Attribute floats_attr(const std::string& name, std::vector<float> v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::Attribute::Type::kFloats;
  a.floats = std::move(v);
  return a;
}

}  // namespace peregrine::passes
