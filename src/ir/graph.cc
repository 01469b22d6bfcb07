#include "ir/graph.h"

namespace peregrine::ir {

std::string ValueType::to_string() const {
  switch (kind) {
    case Kind::kUnknown: return "unknown";
    case Kind::kSequence: return "sequence<" + (elem ? elem->to_string() : "?") + ">";
    case Kind::kOptional: return "optional<" + (elem ? elem->to_string() : "?") + ">";
    case Kind::kTensor: break;
  }
  std::string s(dtype_name(dtype));
  if (!has_shape) return s + "[?]";
  s += "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    if (dims[i] >= 0) s += std::to_string(dims[i]);
    else if (i < dim_names.size() && !dim_names[i].empty()) s += dim_names[i];
    else s += "?";
  }
  return s + "]";
}

std::string Node::describe() const { return "node '" + name + "' (" + op_type + ")"; }

}  // namespace peregrine::ir
