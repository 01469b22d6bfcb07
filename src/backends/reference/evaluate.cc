#include "backends/reference/evaluate.h"

#include "backends/reference/reference_backend.h"
#include "ops/op_schema.h"
#include "ops/type_inference.h"

namespace peregrine {

Expected<std::vector<RuntimeValue>> evaluate_on_reference(
    const ir::Node& node, const std::vector<const RuntimeValue*>& inputs) {
  const OpSchema* schema = SchemaRegistry::global().find(node.domain, node.op_type);
  if (!schema) return unsupported(node.describe() + ": no schema");
  std::vector<ir::ValueType> type_store(inputs.size());
  std::vector<const ir::ValueType*> types;
  std::vector<const Tensor*> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) {
      types.push_back(nullptr);
      values.push_back(nullptr);
      continue;
    }
    type_store[i] = type_of(*inputs[i]);
    types.push_back(&type_store[i]);
    values.push_back(inputs[i]->is_tensor() ? &inputs[i]->tensor : nullptr);
  }
  InferContext ictx(node, types, values);
  PG_RETURN_IF_ERROR(schema->infer(ictx));
  const KernelFn* fn = reference_backend().kernels().find(node.domain, node.op_type);
  if (!fn) return unsupported(node.describe() + ": no reference kernel");
  KernelContext kctx(node, inputs, ictx.output_types(), nullptr, 1);
  PG_RETURN_IF_ERROR((*fn)(kctx));
  return std::move(kctx.outputs());
}

namespace {

class ReferenceEvaluator final : public NodeEvaluator {
 public:
  bool supports(const ir::Node& node) const override { return reference_backend().supports(node); }
  Expected<std::vector<RuntimeValue>> evaluate(
      const ir::Node& node, const std::vector<const RuntimeValue*>& inputs) const override {
    return evaluate_on_reference(node, inputs);
  }
};

}  // namespace

const NodeEvaluator& reference_evaluator() {
  static const ReferenceEvaluator evaluator;
  return evaluator;
}

ir::Node make_eval_node(const std::string& op_type, int opset) {
  ir::Node n;
  n.name = op_type;
  n.op_type = op_type;
  n.opset = opset;
  n.outputs = {op_type + "_out"};
  return n;
}

Expected<Tensor> evaluate_tensor(const ir::Node& node, const std::vector<const Tensor*>& inputs) {
  std::vector<RuntimeValue> holders;
  holders.reserve(inputs.size());
  std::vector<const RuntimeValue*> ptrs;
  for (const Tensor* t : inputs) {
    if (!t) {
      ptrs.push_back(nullptr);
      continue;
    }
    holders.push_back(RuntimeValue::of(*t));
    ptrs.push_back(&holders.back());
  }
  ir::Node n = node;
  n.inputs.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) n.inputs[i] = inputs[i] ? "in" + std::to_string(i) : "";
  if (n.outputs.empty()) n.outputs = {"out"};
  PG_ASSIGN_OR_RETURN(auto outs, evaluate_on_reference(n, ptrs));
  if (outs.empty() || !outs[0].is_tensor()) return internal_error(n.describe() + ": no tensor output");
  return outs[0].tensor;
}

}  // namespace peregrine
