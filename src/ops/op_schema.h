// One schema per op: shape/type inference and a cost model. Schemas are
// backend-independent; kernels live in src/backends/<backend>/.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status_error.h"
#include "ir/attributes.h"
#include "ir/graph.h"
#include "peregrine/runtime_value.h"

namespace peregrine {

// What shape inference sees of one node: input types, constant input values where
// known (initializers, folded constants, or real inputs at run time), attributes.
class InferContext {
 public:
  InferContext(const ir::Node& node, std::vector<const ir::ValueType*> input_types,
               std::vector<const Tensor*> input_values)
      : node_(node), attrs_(node), input_types_(std::move(input_types)),
        input_values_(std::move(input_values)), output_types_(node.outputs.size()),
        output_values_(node.outputs.size()) {}

  const ir::Node& node() const { return node_; }
  int opset() const { return node_.opset; }
  const ir::AttrView& attrs() const { return attrs_; }

  size_t num_inputs() const { return input_types_.size(); }
  // Present: listed and not the empty name.
  bool has_input(size_t i) const { return i < input_types_.size() && input_types_[i] != nullptr; }
  // A required input the node omits (an empty name) is the model's error, not a null read.
  const ir::ValueType& input_type(size_t i) const {
    if (!has_input(i)) throw_missing_input(node_.describe(), i);
    return *input_types_[i];
  }
  // The input's value when known now; nullptr otherwise.
  const Tensor* input_value(size_t i) const {
    return i < input_values_.size() ? input_values_[i] : nullptr;
  }

  size_t num_outputs() const { return output_types_.size(); }
  void set_output(size_t i, ir::ValueType t) {
    if (i < output_types_.size()) output_types_[i] = std::move(t);
  }
  void set_output_tensor(size_t i, DType d, Shape s) { set_output(i, ir::ValueType::tensor(d, std::move(s))); }
  // For ops whose output is known without running them (e.g. Shape).
  void set_output_value(size_t i, Tensor t) {
    if (i < output_values_.size()) output_values_[i] = std::move(t);
  }

  // An error that names this node.
  Status error(const std::string& message) const {
    return invalid_model(node_.describe() + ": " + message);
  }

  std::vector<ir::ValueType>& output_types() { return output_types_; }
  std::vector<Tensor>& output_values() { return output_values_; }

 private:
  const ir::Node& node_;
  ir::AttrView attrs_;
  std::vector<const ir::ValueType*> input_types_;
  std::vector<const Tensor*> input_values_;
  std::vector<ir::ValueType> output_types_;
  std::vector<Tensor> output_values_;
};

// Work and traffic of one node at its static shapes.
struct OpCost {
  double flops = 0;
  double bytes_read = 0;
  double bytes_written = 0;
};

using InferFn = std::function<Status(InferContext&)>;
// Gets the node and its static input/output types; default: 0 flops, bytes = sizes.
using CostFn = std::function<OpCost(const ir::Node&, const std::vector<ir::ValueType>& inputs,
                                    const std::vector<ir::ValueType>& outputs)>;

struct OpSchema {
  std::string domain;  // "" for ai.onnx
  std::string op_type;
  int since_version = 1;  // oldest opset of `domain` this schema covers
  InferFn infer;
  CostFn cost;  // may be empty
};

class SchemaRegistry {
 public:
  void add(OpSchema schema);
  const OpSchema* find(const std::string& domain, const std::string& op_type) const;
  const std::map<std::pair<std::string, std::string>, OpSchema>& all() const { return schemas_; }
  // The registry with every op Peregrine knows (built once).
  static const SchemaRegistry& global();

 private:
  std::map<std::pair<std::string, std::string>, OpSchema> schemas_;
};

// Domain names; "" and "ai.onnx" are the same domain.
inline constexpr const char* kOnnxDomain = "";
inline constexpr const char* kMlDomain = "ai.onnx.ml";
inline constexpr const char* kTrainingDomain = "ai.onnx.preview.training";
inline constexpr const char* kPreviewDomain = "ai.onnx.preview";
inline constexpr const char* kPeregrineDomain = "peregrine";

// Bytes of a statically known tensor type (0 if unknown).
double static_bytes(const ir::ValueType& t);
OpCost default_cost(const std::vector<ir::ValueType>& inputs,
                    const std::vector<ir::ValueType>& outputs);

}  // namespace peregrine
