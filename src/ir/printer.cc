#include "ir/printer.h"

#include <sstream>

namespace peregrine::ir {

namespace {

std::string value_label(const Graph& g, const std::string& name) {
  if (name.empty()) return "_";
  const Value* v = g.find_value(name);
  std::string label = "%" + name;
  if (v && v->type.kind != ValueType::Kind::kUnknown) label += ": " + v->type.to_string();
  return label;
}

template <typename T>
std::string join(const std::vector<T>& items) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < items.size(); ++i) o << (i ? "," : "") << items[i];
  o << "]";
  return o.str();
}

std::string attribute_text(const Attribute& a) {
  using T = Attribute::Type;
  switch (a.type) {
    case T::kFloat: return std::to_string(a.f);
    case T::kInt: return std::to_string(a.i);
    case T::kString: return "\"" + a.s + "\"";
    case T::kFloats: return join(a.floats);
    case T::kInts: return join(a.ints);
    case T::kStrings: return std::to_string(a.strings.size()) + " strings";
    case T::kTensor: return "tensor " + std::string(dtype_name(a.t.dtype())) + "[" + shape_to_string(a.t.shape()) + "]";
    case T::kTensors: return std::to_string(a.tensors.size()) + " tensors";
    case T::kGraph: return "graph";
    case T::kGraphs: return std::to_string(a.graphs.size()) + " graphs";
    case T::kTypeProto: return a.type_proto.to_string();
  }
  return "?";
}

}  // namespace

std::string print_graph(const Graph& g, int indent) {
  std::ostringstream o;
  const std::string pad(static_cast<size_t>(indent), ' ');
  o << pad << "graph " << (g.name.empty() ? "(unnamed)" : g.name) << " (";
  for (size_t i = 0; i < g.inputs.size(); ++i) o << (i ? ", " : "") << value_label(g, g.inputs[i]);
  o << ")\n";
  size_t weights = 0;
  for (const auto& [name, v] : g.values) weights += v.initializer.has_value();
  if (weights) o << pad << "  " << weights << " initializers\n";
  for (const auto& n : g.nodes) {
    o << pad << "  ";
    for (size_t i = 0; i < n->outputs.size(); ++i) o << (i ? ", " : "") << value_label(g, n->outputs[i]);
    o << " = " << (n->domain.empty() ? "" : n->domain + ".") << n->op_type << "(";
    for (size_t i = 0; i < n->inputs.size(); ++i)
      o << (i ? ", " : "") << (n->inputs[i].empty() ? "_" : "%" + n->inputs[i]);
    o << ")";
    std::vector<const Attribute*> subgraphs;
    bool first = true;
    for (const auto& [key, a] : n->attributes) {
      o << (first ? " {" : ", ") << key << "=" << attribute_text(a);
      first = false;
      if (a.type == Attribute::Type::kGraph || a.type == Attribute::Type::kGraphs) subgraphs.push_back(&a);
    }
    if (!first) o << "}";
    if (n->precision != Precision::kFloat32) o << " @" << precision_name(n->precision);
    o << "  # " << n->name << "\n";
    for (const Attribute* a : subgraphs) {
      if (a->g) o << print_graph(*a->g, indent + 4);
      for (const auto& sg : a->graphs) o << print_graph(*sg, indent + 4);
    }
  }
  o << pad << "  return ";
  for (size_t i = 0; i < g.outputs.size(); ++i) o << (i ? ", " : "") << "%" << g.outputs[i];
  o << "\n";
  return o.str();
}

}  // namespace peregrine::ir
