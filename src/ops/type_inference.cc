#include "ops/type_inference.h"

#include "ops/op_schema.h"

namespace peregrine {

namespace {

// Folding evaluates nodes at load time; keep that cheap.
constexpr int64_t kMaxFoldElements = 1 << 16;

bool has_subgraph(const ir::Node& n) {
  for (const auto& [k, a] : n.attributes)
    if (a.g || !a.graphs.empty()) return true;
  return false;
}

}  // namespace

ir::ValueType type_of(const RuntimeValue& v) {
  ir::ValueType t;
  if (v.is_tensor()) {
    t = ir::ValueType::tensor(v.tensor.dtype(), v.tensor.shape());
  } else if (v.is_sequence()) {
    t.kind = ir::ValueType::Kind::kSequence;
    DType elem = v.sequence.empty() ? v.sequence_dtype : v.sequence.front().dtype();
    t.elem = std::make_shared<ir::ValueType>(ir::ValueType::tensor_unknown_shape(elem));
  } else {
    t.kind = ir::ValueType::Kind::kOptional;
  }
  if (v.is_optional && !v.is_none()) {
    ir::ValueType o;
    o.kind = ir::ValueType::Kind::kOptional;
    o.elem = std::make_shared<ir::ValueType>(t);
    return o;
  }
  return t;
}

bool is_deterministic_op(const ir::Node& n) {
  static const char* kRandom[] = {
      "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
      "Multinomial",  "Bernoulli",     "Dropout"};
  for (const char* r : kRandom)
    if (n.op_type == r) return false;
  return !has_subgraph(n);
}

Expected<InferenceResult> infer_graph_types(ir::Graph& g, const NodeEvaluator& evaluator,
                                            const std::map<std::string, ir::ValueType>& outer) {
  InferenceResult result;
  const SchemaRegistry& schemas = SchemaRegistry::global();
  for (auto& [name, v] : g.values)
    if (v.initializer) result.known_values[name] = *v.initializer;

  for (auto& node_ptr : g.nodes) {
    ir::Node& node = *node_ptr;
    const OpSchema* schema = schemas.find(node.domain, node.op_type);
    if (!schema)
      return unsupported(node.describe() + ": op '" + node.op_type + "'" +
                         (node.domain.empty() ? "" : " of domain '" + node.domain + "'") +
                         " is not supported");
    std::vector<const ir::ValueType*> in_types;
    std::vector<const Tensor*> in_values;
    static const ir::ValueType kUnknown;
    for (const auto& in : node.inputs) {
      if (in.empty()) {
        in_types.push_back(nullptr);
        in_values.push_back(nullptr);
        continue;
      }
      const ir::Value* v = g.find_value(in);
      const ir::ValueType* t = v ? &v->type : nullptr;
      if (!t || t->kind == ir::ValueType::Kind::kUnknown) {
        auto it = outer.find(in);
        t = it != outer.end() ? &it->second : &kUnknown;
      }
      in_types.push_back(t);
      auto kv = result.known_values.find(in);
      in_values.push_back(kv != result.known_values.end() ? &kv->second : nullptr);
    }
    // An input whose type is unknown until run time (e.g. an untyped If output):
    // leave this node's outputs unknown; the executor infers them from real values.
    bool input_unknown = false;
    for (const ir::ValueType* t : in_types)
      input_unknown |= t && t->kind == ir::ValueType::Kind::kUnknown;
    if (input_unknown) continue;
    InferContext ctx(node, in_types, in_values);
    PG_RETURN_IF_ERROR(schema->infer(ctx));
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i].empty()) continue;
      ir::Value& out = g.value(node.outputs[i]);
      ir::ValueType inferred = ctx.output_types()[i];
      // Keep a declared type where inference knows less.
      if (inferred.kind == ir::ValueType::Kind::kUnknown ||
          (inferred.is_tensor() && !inferred.has_shape && out.type.is_tensor() &&
           out.type.has_shape)) {
        if (out.type.kind == ir::ValueType::Kind::kUnknown) out.type = inferred;
        if (inferred.is_tensor() && out.type.is_tensor() && inferred.dtype != DType::kUndefined)
          out.type.dtype = inferred.dtype;
      } else {
        out.type = inferred;
      }
      if (ctx.output_values()[i].defined())
        result.known_values[node.outputs[i]] = ctx.output_values()[i];
    }
    // Constant propagation through small deterministic nodes.
    bool all_known = !node.inputs.empty();
    int64_t elements = 0;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i].empty()) continue;
      if (!in_values[i]) {
        all_known = false;
        break;
      }
      elements += in_values[i]->numel();
    }
    if (node.op_type == "Constant" && node.domain.empty()) all_known = true;
    bool outputs_known = true;
    for (size_t i = 0; i < node.outputs.size(); ++i)
      if (!node.outputs[i].empty() && !result.known_values.count(node.outputs[i]))
        outputs_known = false;
    if (all_known && !outputs_known && elements <= kMaxFoldElements && is_deterministic_op(node) &&
        evaluator.supports(node)) {
      std::vector<RuntimeValue> holders;
      holders.reserve(node.inputs.size());
      std::vector<const RuntimeValue*> ins;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (node.inputs[i].empty()) {
          ins.push_back(nullptr);
          continue;
        }
        holders.push_back(RuntimeValue::of(*in_values[i]));
        ins.push_back(&holders.back());
      }
      auto outputs = evaluator.evaluate(node, ins);
      if (outputs.is_ok()) {
        for (size_t i = 0; i < node.outputs.size() && i < outputs->size(); ++i) {
          if (node.outputs[i].empty() || !(*outputs)[i].is_tensor()) continue;
          const Tensor& t = (*outputs)[i].tensor;
          if (t.numel() > kMaxFoldElements) continue;
          result.known_values[node.outputs[i]] = t;
          g.value(node.outputs[i]).type = ir::ValueType::tensor(t.dtype(), t.shape());
        }
      }
    }
  }
  return result;
}

}  // namespace peregrine
