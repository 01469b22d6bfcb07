// ONNX protobuf -> IR. Enforces the loader's safety rules: file-size and nesting
// limits, checked sizes, raw_data lengths, external data confined to the model's
// folder, and opset ranges. Model-local functions are inlined.
#pragma once

#include <string>

#include "ir/graph.h"
#include "ir/opset.h"
#include "peregrine/runtime_value.h"

namespace onnx {
class TensorProto;
class TypeProto;
}  // namespace onnx

namespace peregrine {

struct ImportLimits {
  int64_t max_file_bytes = int64_t{2} << 30;  // protobuf's own ceiling is 2 GiB
  int max_proto_nesting = 100;                // protobuf recursion depth
  int max_subgraph_depth = 16;                // If/Loop/Scan nested in each other
  int max_function_depth = 16;                // functions calling functions
};

Expected<ir::Model> load_onnx_model(const std::string& path, const ImportLimits& limits = {});
Expected<ir::Model> parse_onnx_model(const std::string& bytes, const std::string& model_dir,
                                     const std::string& display_name,
                                     const ImportLimits& limits = {});

// TensorProto -> Tensor. `model_dir` is where external data may live ("" forbids it).
Expected<Tensor> tensor_from_proto(const onnx::TensorProto& proto, const std::string& model_dir);
void tensor_to_proto(const Tensor& tensor, onnx::TensorProto* proto);
ir::ValueType type_from_proto(const onnx::TypeProto& proto);

// Reads a serialized TensorProto / SequenceProto / OptionalProto (.pb test data).
Expected<RuntimeValue> load_value_proto_file(const std::string& path, const ir::ValueType& type);

}  // namespace peregrine
