// move_transposes
//   Matches:  E(Transpose(x, perm)) where E is elementwise on its one tensor
//   input: a unary
//             map (Relu Sigmoid Tanh Exp Log Neg Abs Sqrt Reciprocal Erf Clip
//             LeakyRelu HardSwish HardSigmoid Gelu Softplus Elu), or Add Sub
//             Mul Div Pow Max Min whose other operand is a one-element constant
//             (of rank <= x's, so nothing broadcasts).
//   Produces: Transpose(E(x), perm): the transpose moves one op forward.
//   Repeated, it slides
//             down an elementwise run until it meets what comes next; when that
//             is another Transpose, collapse_transpose_chains (run right after)
//             composes or cancels them.
//   Preconditions: perm is an attribute; the Transpose output is read only by E
//   (not a graph
//             output, no second reader: moving would then duplicate the
//             transpose); Clip's bounds are constants; E has one output.
//   Order: after attention_fusion (its patterns hold Transposes in place) and
//   before
//             fuse_activation / elementwise_chain_fusion, which see the longer
//             runs.
#include <set>

#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

const std::set<std::string> &unary_ops() {
  static const std::set<std::string> kOps = {
      "Relu",      "Sigmoid",     "Tanh",       "Exp",      "Log",  "Neg",
      "Abs",       "Sqrt",        "Reciprocal", "Erf",      "Clip", "LeakyRelu",
      "HardSwish", "HardSigmoid", "Gelu",       "Softplus", "Elu"};
  return kOps;
}

const std::set<std::string> &binary_ops() {
  static const std::set<std::string> kOps = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"};
  return kOps;
}

bool is_small_constant(const ir::Graph &g, const std::string &v, size_t rank) {
  const Tensor *t = constant_of(g, v);
  return t && t->numel() == 1 && static_cast<size_t>(t->rank()) <= rank;
}

struct Match {
  ir::Node *transpose;
  ir::Node *op;
  size_t slot;  // the input of `op` that reads the transpose
};

std::optional<Match> match(const ir::Graph &g, const GraphIndex &index, ir::Node &t) {
  if (!is_op(&t, "Transpose") || t.inputs.size() != 1 || t.outputs.size() != 1) return std::nullopt;
  const ir::Attribute *perm = t.attribute("perm");
  const ir::Value *in = g.find_value(t.inputs[0]);
  if (!perm || !in || !in->type.is_tensor() || !in->type.has_shape ||
      perm->ints.size() != in->type.dims.size())
    return std::nullopt;
  const size_t rank = perm->ints.size();
  ir::Node *e = index.sole_consumer(t.outputs[0]);
  if (!e || !e->domain.empty() || e->outputs.size() != 1 || has_subgraph(*e)) return std::nullopt;
  const std::string &y = t.outputs[0];
  if (unary_ops().count(e->op_type)) {
    if (e->inputs.empty() || e->inputs[0] != y) return std::nullopt;
    for (size_t i = 1; i < e->inputs.size(); ++i)  // Clip's bounds
      if (!e->inputs[i].empty() && !is_small_constant(g, e->inputs[i], rank)) return std::nullopt;
    return Match{&t, e, 0};
  }
  if (binary_ops().count(e->op_type) && e->inputs.size() == 2) {
    const size_t slot = e->inputs[0] == y ? 0 : 1;
    if (e->inputs[slot] != y || !is_small_constant(g, e->inputs[1 - slot], rank))
      return std::nullopt;
    return Match{&t, e, slot};
  }
  return std::nullopt;
}

// x -> T -> E -> z   becomes   x -> E -> z' -> T -> z   (z keeps its name and
// readers).
void rewrite(ir::Graph &g, const Match &m) {
  const std::string x = m.transpose->inputs[0];
  const std::string z = m.op->outputs[0];
  const std::string moved = fresh_name(g, z);
  const ir::Value *zv = g.find_value(z);
  const ir::Value *xv = g.find_value(x);
  if (zv && xv && zv->type.is_tensor())
    g.value(moved).type = ir::ValueType::tensor(zv->type.dtype, xv->type.dims);
  g.values.erase(m.transpose->outputs[0]);
  m.op->inputs[m.slot] = x;
  m.op->outputs[0] = moved;
  m.transpose->inputs[0] = moved;
  m.transpose->outputs[0] = z;
}

class MoveTransposes : public Pass {
 public:
  const char *name() const override { return "move_transposes"; }
  Expected<bool> run(ir::Graph &g) override {
    int n = rewrite_each_match(g, match, rewrite);
    count_rewrite(n);
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_move_transposes() { return std::make_unique<MoveTransposes>(); }

}  // namespace peregrine::passes
