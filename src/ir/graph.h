// The graph IR: values (typed edges, named), nodes (an op, its attributes and the
// names of the values it reads and writes) and graphs (a topologically ordered
// node list; subgraphs of If/Loop/Scan hang off node attributes).
//
// Edges are identified by name rather than pointer so a subgraph can read a value
// of an enclosing graph the way ONNX scoping says it does.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "peregrine/precision.h"
#include "peregrine/tensor.h"

namespace peregrine::ir {

class Graph;

// The type of a value: a tensor (dtype, maybe a shape), a sequence or an optional.
struct ValueType {
  enum class Kind { kUnknown, kTensor, kSequence, kOptional };
  Kind kind = Kind::kUnknown;
  DType dtype = DType::kUndefined;  // tensor element type
  bool has_shape = false;           // false: even the rank is unknown
  Shape dims;                       // -1 for a dim not known yet
  std::vector<std::string> dim_names;  // symbolic names, "" where none (same length as dims)
  std::shared_ptr<ValueType> elem;  // element type of a sequence / optional

  static ValueType tensor(DType t, Shape s) {
    ValueType v;
    v.kind = Kind::kTensor;
    v.dtype = t;
    v.has_shape = true;
    v.dim_names.assign(s.size(), "");
    v.dims = std::move(s);
    return v;
  }
  static ValueType tensor_unknown_shape(DType t) {
    ValueType v;
    v.kind = Kind::kTensor;
    v.dtype = t;
    return v;
  }
  bool is_tensor() const { return kind == Kind::kTensor; }
  // Every dim known (a static shape).
  bool is_static() const {
    if (kind != Kind::kTensor || !has_shape) return false;
    for (int64_t d : dims)
      if (d < 0) return false;
    return true;
  }
  int64_t rank() const { return has_shape ? static_cast<int64_t>(dims.size()) : -1; }
  std::string to_string() const;
};

struct Attribute {
  enum class Type { kFloat, kInt, kString, kTensor, kGraph, kFloats, kInts, kStrings, kTensors,
                    kGraphs, kTypeProto };
  std::string name;
  Type type = Type::kInt;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
  ValueType type_proto;  // kTypeProto
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" is the default ONNX domain
  int opset = 0;       // version of `domain` the model imports
  std::vector<std::string> inputs;   // "" marks an omitted optional input
  std::vector<std::string> outputs;  // "" marks an output nobody wants
  std::map<std::string, Attribute> attributes;
  // The precision the node's kernel computes in (passes/assign_precision.h); float32 unless
  // the session asked for less and the op has a kernel for it.
  Precision precision = Precision::kFloat32;

  const Attribute* attribute(const std::string& key) const {
    auto it = attributes.find(key);
    return it == attributes.end() ? nullptr : &it->second;
  }
  // "node 'conv_1' (Conv)": the prefix of every error about this node.
  std::string describe() const;
};

struct Value {
  std::string name;
  ValueType type;
  std::optional<Tensor> initializer;  // set for weights and folded constants
};

class Graph {
 public:
  std::string name;
  std::vector<std::unique_ptr<Node>> nodes;  // topological order once verified
  std::vector<std::string> inputs;            // graph inputs (not initializers)
  std::vector<std::string> outputs;
  std::map<std::string, Value> values;        // every named value declared in this graph
  std::map<std::string, int> opsets;          // domain -> version (shared with subgraphs)

  Value& value(const std::string& n) {
    Value& v = values[n];
    v.name = n;
    return v;
  }
  const Value* find_value(const std::string& n) const {
    auto it = values.find(n);
    return it == values.end() ? nullptr : &it->second;
  }
  bool is_initializer(const std::string& n) const {
    const Value* v = find_value(n);
    return v && v->initializer.has_value();
  }
};

struct Model {
  Graph graph;
  int64_t ir_version = 0;
  std::string producer_name;
  std::string producer_version;
  std::string path;  // file it came from
  // ModelProto's descriptive fields (what ONNX Runtime's get_modelmeta() reports).
  std::string domain;
  int64_t model_version = 0;
  std::string doc_string;
  std::string graph_doc_string;
  std::map<std::string, std::string> metadata_props;
};

}  // namespace peregrine::ir
