// gelu_fusion
//   Matches:  the erf form  x * 0.5 * (1 + Erf(x / sqrt(2)))   (x * 0.70710678 also), and
//             the tanh form x * 0.5 * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * Pow(x, 3)))),
//             with the three-way product x * 0.5 * t in any association.
//   Produces: Gelu(x) (approximate="tanh" for the tanh form): the ONNX op when the
//             graph imports opset >= 20, else peregrine.Gelu.
//   Preconditions: x is float32; constants match to 1e-4; every intermediate is read
//             only by the next node of the pattern and is not a graph output.
#include <cmath>

#include "ops/op_schema.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

bool near(std::optional<double> v, double want) {
  return v && std::fabs(*v - want) <= 1e-4 * std::max(1.0, std::fabs(want));
}

// Binary node `n` reading `x` on one side: the other operand, or "".
std::string other_operand(const ir::Node& n, const std::string& x) {
  if (n.inputs.size() != 2) return "";
  if (n.inputs[0] == x) return n.inputs[1];
  if (n.inputs[1] == x) return n.inputs[0];
  return "";
}

struct Match {
  std::string x;
  std::vector<ir::Node*> nodes;
  std::string output;
  bool tanh = false;
};

// From t = 1 + f(x) (`inner` is the node producing f(x)), the tail x * 0.5 * t.
bool match_tail(const ir::Graph& g, const GraphIndex& index, ir::Node* inner, Match* m) {
  ir::Node* add1 = index.sole_consumer(inner->outputs[0]);
  if (!is_op(add1, "Add") || !near(scalar_constant(g, other_operand(*add1, inner->outputs[0])), 1))
    return false;
  const std::string t = add1->outputs[0];
  ir::Node* mul = index.sole_consumer(t);
  if (!is_op(mul, "Mul")) return false;
  const std::string other = other_operand(*mul, t);
  m->nodes.insert(m->nodes.end(), {inner, add1, mul});
  if (other == m->x || near(scalar_constant(g, other), 0.5)) {
    ir::Node* mul2 = index.sole_consumer(mul->outputs[0]);
    if (!is_op(mul2, "Mul")) return false;
    const std::string last = other_operand(*mul2, mul->outputs[0]);
    bool ok = other == m->x ? near(scalar_constant(g, last), 0.5) : last == m->x;
    if (!ok) return false;
    m->nodes.push_back(mul2);
    m->output = mul2->outputs[0];
    return true;
  }
  ir::Node* half = index.producer(other);  // Mul(x, 0.5) feeding the last Mul
  if (!is_op(half, "Mul") || index.sole_consumer(other) != mul ||
      !near(scalar_constant(g, other_operand(*half, m->x)), 0.5))
    return false;
  m->nodes.push_back(half);
  m->output = mul->outputs[0];
  return true;
}

std::optional<Match> match_erf(const ir::Graph& g, const GraphIndex& index, ir::Node& erf) {
  if (!is_op(&erf, "Erf")) return std::nullopt;
  ir::Node* scale = index.producer(erf.inputs[0]);
  if (!scale || index.sole_consumer(scale->outputs[0]) != &erf || scale->inputs.size() != 2)
    return std::nullopt;
  Match m;
  m.x = scale->inputs[0];
  auto c = scalar_constant(g, scale->inputs[1]);
  if (is_op(scale, "Div") && near(c, std::sqrt(2.0))) {
  } else if (is_op(scale, "Mul") && (near(c, std::sqrt(0.5)) ||
                                     near(scalar_constant(g, scale->inputs[0]), std::sqrt(0.5)))) {
    if (!near(c, std::sqrt(0.5))) m.x = scale->inputs[1];
  } else {
    return std::nullopt;
  }
  if (!is_float32(g, m.x)) return std::nullopt;
  m.nodes.push_back(scale);
  if (!match_tail(g, index, &erf, &m)) return std::nullopt;
  return m;
}

std::optional<Match> match_tanh(const ir::Graph& g, const GraphIndex& index, ir::Node& th) {
  if (!is_op(&th, "Tanh")) return std::nullopt;
  ir::Node* scale = index.producer(th.inputs[0]);
  if (!is_op(scale, "Mul") || index.sole_consumer(scale->outputs[0]) != &th) return std::nullopt;
  const double k = std::sqrt(2.0 / M_PI);
  std::string inner_name;
  if (near(scalar_constant(g, scale->inputs[1]), k)) inner_name = scale->inputs[0];
  else if (near(scalar_constant(g, scale->inputs[0]), k)) inner_name = scale->inputs[1];
  else return std::nullopt;
  ir::Node* sum = index.producer(inner_name);  // x + 0.044715 * x^3
  if (!is_op(sum, "Add") || index.sole_consumer(inner_name) != scale) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    Match m;
    m.x = sum->inputs[static_cast<size_t>(side)];
    ir::Node* cube_scaled = index.producer(sum->inputs[static_cast<size_t>(1 - side)]);
    if (!is_op(cube_scaled, "Mul") || index.sole_consumer(cube_scaled->outputs[0]) != sum) continue;
    for (int s2 = 0; s2 < 2; ++s2) {
      ir::Node* pow = index.producer(cube_scaled->inputs[static_cast<size_t>(s2)]);
      if (!is_op(pow, "Pow") || pow->inputs[0] != m.x || !near(scalar_constant(g, pow->inputs[1]), 3) ||
          !near(scalar_constant(g, cube_scaled->inputs[static_cast<size_t>(1 - s2)]), 0.044715) ||
          index.sole_consumer(pow->outputs[0]) != cube_scaled || !is_float32(g, m.x))
        continue;
      m.nodes = {pow, cube_scaled, sum, scale};
      m.tanh = true;
      if (match_tail(g, index, &th, &m)) return m;
    }
  }
  return std::nullopt;
}

void rewrite(ir::Graph& g, const Match& m) {
  ir::Node* gelu = add_node(g, "Gelu", {m.x}, {m.output}, m.nodes.back()->name + "_gelu");
  if (gelu->opset < 20) {
    gelu->domain = kPeregrineDomain;
    gelu->opset = 1;
    import_peregrine_domain(g);
  }
  if (m.tanh) gelu->attributes["approximate"] = string_attr("approximate", "tanh");
  std::set<const ir::Node*> dead(m.nodes.begin(), m.nodes.end());
  for (const ir::Node* n : m.nodes)
    if (n->outputs[0] != m.output) g.values.erase(n->outputs[0]);
  remove_nodes(g, dead);
}

class GeluFusion : public Pass {
 public:
  const char* name() const override { return "gelu_fusion"; }
  Expected<bool> run(ir::Graph& g) override {
    auto match_either = [](const ir::Graph& graph, const GraphIndex& index, ir::Node& node) {
      auto m = match_erf(graph, index, node);
      return m ? m : match_tanh(graph, index, node);
    };
    int n = rewrite_each_match(g, match_either, rewrite);
    count_rewrite(n);
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_gelu_fusion() { return std::make_unique<GeluFusion>(); }

}  // namespace peregrine::passes
