// constant_folding
//   Matches:  a deterministic node without subgraphs whose inputs are all
//             initializers, or whose outputs the op's schema can state from input
//             types alone (Shape / Size of a statically shaped tensor).
//   Produces: initializers in place of the node's outputs; the node is removed.
//             Constant nodes become initializers. Walking nodes in order folds whole
//             chains (torch's Shape -> Gather -> Unsqueeze -> Concat -> Reshape).
//   Preconditions: inputs and outputs are tensors of at most kMaxFoldElements each
//             (folding must not blow up the model); the reference backend runs it.
#include "ops/node_evaluator.h"
#include "ops/op_schema.h"
#include "ops/type_inference.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

constexpr int64_t kMaxFoldElements = int64_t{1} << 22;

// The node's output tensors when they are known at compile time; nullopt otherwise.
std::optional<std::vector<Tensor>> match_foldable(const ir::Graph& g, const ir::Node& node,
                                                  const NodeEvaluator& evaluator) {
  if (!is_deterministic_op(node) || has_subgraph(node)) return std::nullopt;
  for (const auto& o : node.outputs)
    if (o.empty()) return std::nullopt;  // keep it simple: every output must be wanted
  const OpSchema* schema = SchemaRegistry::global().find(node.domain, node.op_type);
  if (!schema) return std::nullopt;
  std::vector<const ir::ValueType*> types;
  std::vector<const Tensor*> values;
  bool all_constant = true;
  int64_t elements = 0;
  for (const auto& in : node.inputs) {
    if (in.empty()) {
      types.push_back(nullptr);
      values.push_back(nullptr);
      continue;
    }
    const ir::Value* v = g.find_value(in);
    // Outer-scope values (in subgraphs) have no entry here: not constant.
    if (!v || !v->type.is_tensor()) return std::nullopt;
    types.push_back(&v->type);
    const Tensor* t = v->initializer ? &*v->initializer : nullptr;
    values.push_back(t);
    if (!t) all_constant = false;
    else elements += t->numel();
  }
  if (elements > kMaxFoldElements) return std::nullopt;
  InferContext ictx(node, types, values);
  if (!schema->infer(ictx).is_ok()) return std::nullopt;
  // Outputs the schema already knows (Shape of a static tensor, ...).
  std::vector<Tensor> outs;
  for (const Tensor& t : ictx.output_values()) {
    if (!t.defined()) break;
    outs.push_back(t);
  }
  if (outs.size() == node.outputs.size()) return outs;
  if (!all_constant) return std::nullopt;
  // Only evaluate what is known to be small: a static output shape under the cap.
  for (const ir::ValueType& t : ictx.output_types()) {
    if (!t.is_static()) return std::nullopt;
    int64_t n = 1;
    for (int64_t d : t.dims) {
      if (d > kMaxFoldElements) return std::nullopt;
      n *= d;
      if (n > kMaxFoldElements) return std::nullopt;
    }
  }
  std::vector<RuntimeValue> holders;
  holders.reserve(values.size());
  std::vector<const RuntimeValue*> ins;
  for (const Tensor* t : values) {
    if (!t) {
      ins.push_back(nullptr);
      continue;
    }
    holders.push_back(RuntimeValue::of(*t));
    ins.push_back(&holders.back());
  }
  auto result = evaluator.evaluate(node, ins);
  if (!result.is_ok()) return std::nullopt;  // leave it for run time to report
  outs.clear();
  for (const RuntimeValue& v : *result) {
    if (!v.is_tensor() || v.is_optional || v.tensor.numel() > kMaxFoldElements) return std::nullopt;
    outs.push_back(v.tensor);
  }
  if (outs.size() != node.outputs.size()) return std::nullopt;
  return outs;
}

class ConstantFolding : public Pass {
 public:
  explicit ConstantFolding(const NodeEvaluator& evaluator) : evaluator_(evaluator) {}
  const char* name() const override { return "constant_folding"; }
  Expected<bool> run(ir::Graph& g) override {
    std::set<const ir::Node*> folded;
    std::set<std::string> graph_inputs(g.inputs.begin(), g.inputs.end());
    for (auto& node : g.nodes) {
      bool defines_input = false;
      for (const auto& o : node->outputs) defines_input |= graph_inputs.count(o) > 0;
      if (defines_input) continue;
      auto outs = match_foldable(g, *node, evaluator_);
      if (!outs) continue;
      // Rewrite: the outputs keep their names and become initializers.
      for (size_t i = 0; i < outs->size(); ++i) {
        ir::Value& v = g.value(node->outputs[i]);
        v.type = ir::ValueType::tensor((*outs)[i].dtype(), (*outs)[i].shape());
        v.initializer = (*outs)[i];
      }
      folded.insert(node.get());
      count_rewrite();
    }
    remove_nodes(g, folded);
    return !folded.empty();
  }

 private:
  const NodeEvaluator& evaluator_;
};

}  // namespace

std::unique_ptr<Pass> make_constant_folding(const NodeEvaluator& evaluator) {
  return std::make_unique<ConstantFolding>(evaluator);
}

}  // namespace peregrine::passes
