// remove_identity_ops
//   Matches:  Identity; Dropout at inference (no mask wanted, training_mode absent or
//             a constant false); Cast to the input's own type; Reshape whose static
//             output shape equals its static input shape.
//   Produces: readers of the node's output read its input; the node is removed.
//             When the output is a graph output, the producer of the input is renamed
//             to write it instead.
//   Preconditions: the removed name is not read from inside a subgraph; to rename a
//             producer, the input must be a node output used by nothing else.
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

bool is_noop(const ir::Graph& g, const GraphIndex& index, const ir::Node& n) {
  if (!n.domain.empty() || n.inputs.empty() || n.inputs[0].empty() || n.outputs.empty())
    return false;
  const ir::Value* in = g.find_value(n.inputs[0]);
  const ir::Value* out = g.find_value(n.outputs[0]);
  if (n.op_type == "Identity") return true;
  if (n.op_type == "Dropout") {
    for (size_t i = 1; i < n.outputs.size(); ++i)
      if (!n.outputs[i].empty() && (!index.uses(n.outputs[i]).empty() ||
                                    index.is_graph_output(n.outputs[i])))
        return false;
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
      auto training = scalar_constant(g, n.inputs[2]);
      if (!training || *training != 0) return false;
    }
    if (n.opset < 7) {  // old Dropout had is_test; without it, it was training
      const ir::Attribute* t = n.attribute("is_test");
      if (!t || t->i == 0) return false;
    }
    return true;
  }
  if (!in || !out || !in->type.is_tensor() || !out->type.is_tensor()) return false;
  if (n.op_type == "Cast") {
    const ir::Attribute* to = n.attribute("to");
    return to && in->type.dtype != DType::kUndefined &&
           static_cast<int64_t>(in->type.dtype) == to->i && n.outputs.size() == 1;
  }
  if (n.op_type == "Reshape")
    return in->type.is_static() && out->type.is_static() && in->type.dims == out->type.dims;
  return false;
}

class RemoveIdentityOps : public Pass {
 public:
  const char* name() const override { return "remove_identity_ops"; }
  Expected<bool> run(ir::Graph& g) override {
    bool changed = false;
    // One removal at a time: each rename invalidates the index.
    for (bool again = true; again;) {
      again = false;
      GraphIndex index(g);
      for (auto& node_ptr : g.nodes) {
        ir::Node& n = *node_ptr;
        if (!is_noop(g, index, n)) continue;
        const std::string x = n.inputs[0], y = n.outputs[0];
        if (!rewrite(g, index, n, x, y)) continue;
        remove_nodes(g, {&n});
        count_rewrite();
        changed = again = true;
        break;
      }
    }
    return changed;
  }

 private:
  static bool rewrite(ir::Graph& g, const GraphIndex& index, ir::Node& n, const std::string& x,
                      const std::string& y) {
    for (const auto& u : index.uses(y))
      if (u.input < 0) return false;
    if (!index.is_graph_output(y)) {
      replace_uses(g, y, x);
      return true;
    }
    // y is a graph output: make x's producer write y, if x is private to this node.
    ir::Node* p = index.producer(x);
    if (!p || index.is_graph_output(x) || index.uses(x).size() != 1) return false;
    for (auto& o : p->outputs)
      if (o == x) o = y;
    g.value(y).type = g.value(x).type.kind != ir::ValueType::Kind::kUnknown ? g.value(x).type
                                                                           : g.value(y).type;
    g.values.erase(x);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_remove_identity_ops() { return std::make_unique<RemoveIdentityOps>(); }

}  // namespace peregrine::passes
