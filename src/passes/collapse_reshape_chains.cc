// collapse_reshape_chains
//   Matches:  Reshape(Reshape(x, s1), s2), also through Flatten / Squeeze / Unsqueeze
//             as the inner node, where the outer output's shape is static.
//   Produces: Reshape(x, static shape of the outer output); the inner node stays for
//             its other readers (dead_code_elimination removes it otherwise).
//   Preconditions: the outer Reshape's output type is static (so `0` and `-1` entries
//             need no reinterpretation) and the inner node is in this graph.
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

bool is_shape_only(const ir::Node* n) {
  return n && n->domain.empty() && !n->inputs.empty() &&
         (n->op_type == "Reshape" || n->op_type == "Flatten" || n->op_type == "Squeeze" ||
          n->op_type == "Unsqueeze");
}

struct Match {
  ir::Node* outer;
  std::string source;  // x
  Shape shape;
};

std::optional<Match> match(const ir::Graph& g, const GraphIndex& index, ir::Node& n) {
  if (!is_op(&n, "Reshape") || n.inputs.size() < 2 || n.opset < 5) return std::nullopt;
  ir::Node* inner = index.producer(n.inputs[0]);
  if (!is_shape_only(inner)) return std::nullopt;
  const ir::Value* out = g.find_value(n.outputs[0]);
  if (!out || !out->type.is_static()) return std::nullopt;
  return Match{&n, inner->inputs[0], out->type.dims};
}

class CollapseReshapeChains : public Pass {
 public:
  const char* name() const override { return "collapse_reshape_chains"; }
  Expected<bool> run(ir::Graph& g) override {
    bool changed = false;
    GraphIndex index(g);
    for (auto& node_ptr : g.nodes) {
      auto m = match(g, index, *node_ptr);
      if (!m) continue;
      // Rewrite: read x directly with the final static shape.
      m->outer->inputs[0] = m->source;
      m->outer->inputs[1] = add_initializer(
          g, m->outer->outputs[0] + "_shape",
          Tensor::from_vector<int64_t>(m->shape, {static_cast<int64_t>(m->shape.size())}));
      m->outer->attributes.erase("allowzero");
      count_rewrite();
      changed = true;
      index = GraphIndex(g);
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_collapse_reshape_chains() {
  return std::make_unique<CollapseReshapeChains>();
}

}  // namespace peregrine::passes
