// fuse_activation
//   Matches:  P = Conv | Gemm | MatMul, optionally followed by Add(P, Z) (a bias or a
//             residual), optionally followed by an activation: Relu, Sigmoid, Tanh,
//             LeakyRelu, Clip, HardSwish, Gelu (ONNX or peregrine), or SiLU written as
//             Mul(y, Sigmoid(y)). At least one of Add / activation must be present.
//   Produces: peregrine.FusedConv / FusedGemm / FusedMatMul(inputs of P..., Z?) with
//             P's attributes plus `activation` and `activation_params`, writing the
//             last matched node's output.
//   Preconditions: float32 throughout; every intermediate is read only by the next
//             node of the pattern (SiLU: by its Sigmoid and Mul) and is not a graph
//             output; Z broadcasts to P's static output shape without changing it;
//             Clip bounds are constants.
#include <cmath>
#include <limits>

#include "ops/op_schema.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

struct Activation {
  std::string name;
  std::vector<float> params;
  std::vector<ir::Node*> nodes;  // the nodes it replaces
  std::string output;
};

struct Match {
  ir::Node* producer = nullptr;
  ir::Node* add = nullptr;
  std::string z;
  std::optional<Activation> act;
  std::string output;
};

// The activation reading `x`, if it is the only use of x (SiLU: the two uses).
std::optional<Activation> match_activation(const ir::Graph& g, const GraphIndex& index,
                                           const std::string& x) {
  if (index.is_graph_output(x)) return std::nullopt;
  const auto& uses = index.uses(x);
  if (uses.size() == 2 && uses[0].input >= 0 && uses[1].input >= 0) {
    ir::Node* sig = is_op(uses[0].node, "Sigmoid") ? uses[0].node : uses[1].node;
    ir::Node* mul = sig == uses[0].node ? uses[1].node : uses[0].node;
    if (is_op(sig, "Sigmoid") && is_op(mul, "Mul") && index.sole_consumer(sig->outputs[0]) == mul &&
        ((mul->inputs[0] == x && mul->inputs[1] == sig->outputs[0]) ||
         (mul->inputs[1] == x && mul->inputs[0] == sig->outputs[0])) &&
        is_float32(g, mul->outputs[0]))
      return Activation{"SiLU", {}, {sig, mul}, mul->outputs[0]};
    return std::nullopt;
  }
  ir::Node* n = index.sole_consumer(x);
  if (!n || n->inputs.empty() || n->inputs[0] != x || !is_float32(g, n->outputs[0]) ||
      n->outputs.size() != 1)
    return std::nullopt;
  Activation a{"", {}, {n}, n->outputs[0]};
  if (n->domain.empty() && (n->op_type == "Relu" || n->op_type == "Sigmoid" ||
                            n->op_type == "Tanh" || n->op_type == "HardSwish")) {
    a.name = n->op_type;
  } else if (is_op(n, "LeakyRelu")) {
    a.name = "LeakyRelu";
    const ir::Attribute* alpha = n->attribute("alpha");
    a.params = {alpha ? alpha->f : 0.01f};
  } else if (is_op(n, "Clip")) {
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
    if (n->opset < 11) {
      if (const ir::Attribute* v = n->attribute("min")) lo = v->f;
      if (const ir::Attribute* v = n->attribute("max")) hi = v->f;
    } else {
      for (size_t i = 1; i < n->inputs.size(); ++i) {
        if (n->inputs[i].empty()) continue;
        auto v = scalar_constant(g, n->inputs[i]);
        if (!v) return std::nullopt;
        (i == 1 ? lo : hi) = static_cast<float>(*v);
      }
    }
    a.name = "Clip";
    a.params = {lo, hi};
  } else if (n->op_type == "Gelu" && (n->domain.empty() || n->domain == kPeregrineDomain)) {
    const ir::Attribute* approx = n->attribute("approximate");
    a.name = approx && approx->s == "tanh" ? "GeluTanh" : "Gelu";
  } else {
    return std::nullopt;
  }
  return a;
}

std::optional<Match> match(const ir::Graph& g, const GraphIndex& index, ir::Node& p) {
  if (!(is_op(&p, "Conv") || is_op(&p, "Gemm") || is_op(&p, "MatMul")) || p.outputs.size() != 1)
    return std::nullopt;
  const ir::ValueType* out = float32_type(g, p.outputs[0]);
  if (!out) return std::nullopt;
  Match m;
  m.producer = &p;
  std::string cur = p.outputs[0];
  ir::Node* add = index.sole_consumer(cur);
  if (is_op(add, "Add") && add->inputs.size() == 2 && out->is_static() &&
      is_float32(g, add->outputs[0])) {
    const std::string& z = add->inputs[0] == cur ? add->inputs[1] : add->inputs[0];
    const ir::ValueType* zt = float32_type(g, z);
    const ir::Value* sum = g.find_value(add->outputs[0]);
    // The sum must have P's shape: Z only broadcasts into it.
    if (zt && zt->has_shape && z != cur && sum && sum->type.is_static() &&
        sum->type.dims == out->dims) {
      m.add = add;
      m.z = z;
      cur = add->outputs[0];
    }
  }
  m.act = match_activation(g, index, cur);
  if (m.act) cur = m.act->output;
  if (!m.add && !m.act) return std::nullopt;
  m.output = cur;
  return m;
}

void rewrite(ir::Graph& g, const Match& m) {
  const ir::Node& p = *m.producer;
  std::vector<std::string> inputs = p.inputs;
  const size_t base_inputs = p.op_type == "MatMul" ? 2 : 3;
  inputs.resize(base_inputs);
  if (!m.z.empty()) inputs.push_back(m.z);
  else
    while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
  ir::Node* f = add_node(g, "Fused" + p.op_type, inputs, {m.output}, p.name);
  f->domain = kPeregrineDomain;
  f->opset = 1;
  f->attributes = p.attributes;
  f->attributes["activation"] = string_attr("activation", m.act ? m.act->name : "");
  if (m.act && !m.act->params.empty())
    f->attributes["activation_params"] = floats_attr("activation_params", m.act->params);
  import_peregrine_domain(g);
  std::set<const ir::Node*> dead{m.producer};
  g.values.erase(p.outputs[0]);
  if (m.add) {
    dead.insert(m.add);
    if (m.act) g.values.erase(m.add->outputs[0]);
  }
  if (m.act)
    for (ir::Node* n : m.act->nodes) {
      dead.insert(n);
      if (n->outputs[0] != m.output) g.values.erase(n->outputs[0]);
    }
  remove_nodes(g, dead);
}

class FuseActivation : public Pass {
 public:
  const char* name() const override { return "fuse_activation"; }
  Expected<bool> run(ir::Graph& g) override {
    int n = rewrite_each_match(g, match, rewrite);
    count_rewrite(n);
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_activation() { return std::make_unique<FuseActivation>(); }

}  // namespace peregrine::passes
