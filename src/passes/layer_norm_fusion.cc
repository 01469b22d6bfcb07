// layer_norm_fusion
//   Matches:  the decomposed layer norm torch exports over the trailing axes of x:
//               mean = ReduceMean(x); d = Sub(x, mean); v = ReduceMean(Pow(d, 2) | Mul(d, d));
//               y = Div(d, Sqrt(Add(v, eps))) [* gamma] [+ beta]
//   Produces: LayerNormalization(x, gamma, beta?, axis = first reduced axis, epsilon)
//             (the ONNX op from opset 17, else peregrine.LayerNormalization); a missing
//             gamma becomes an initializer of ones.
//   Preconditions: x float32 of known rank; both reductions over the same trailing
//             axes with keepdims = 1; eps, gamma and beta are constants, gamma and
//             beta shaped like the normalized dims; d is read only by the pattern and
//             every other intermediate only by the next node; none is a graph output.
#include "ops/op_schema.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

// Normalized axes of a ReduceMean with keepdims = 1, or nullopt.
std::optional<std::vector<int64_t>> reduce_axes(const ir::Graph& g, const ir::Node& n,
                                                int64_t rank) {
  if (const ir::Attribute* k = n.attribute("keepdims"); k && k->i == 0) return std::nullopt;
  std::vector<int64_t> axes;
  if (n.opset >= 18) {
    if (n.inputs.size() < 2) return std::nullopt;
    const Tensor* t = constant_of(g, n.inputs[1]);
    if (!t) return std::nullopt;
    axes = t->to_int64_vector();
  } else {
    const ir::Attribute* a = n.attribute("axes");
    if (!a) return std::nullopt;
    axes = a->ints;
  }
  for (auto& a : axes) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return std::nullopt;
  }
  std::sort(axes.begin(), axes.end());
  // Trailing and contiguous: [rank-k, rank).
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != rank - static_cast<int64_t>(axes.size() - i)) return std::nullopt;
  if (axes.empty()) return std::nullopt;
  return axes;
}

std::string other_operand(const ir::Node& n, const std::string& x) {
  if (n.inputs.size() != 2) return "";
  if (n.inputs[0] == x) return n.inputs[1];
  if (n.inputs[1] == x) return n.inputs[0];
  return "";
}

// A constant shaped like `dims` (leading 1s allowed).
bool param_fits(const Tensor* t, const Shape& dims) {
  if (!t || t->dtype() != DType::kFloat32) return false;
  Shape s = t->shape();
  while (s.size() > dims.size() && s.front() == 1) s.erase(s.begin());
  return s == dims;
}

struct Match {
  std::string x, gamma, beta, output;
  int64_t axis;
  float epsilon;
  Shape norm_dims;
  std::vector<ir::Node*> nodes;
};

std::optional<Match> match(const ir::Graph& g, const GraphIndex& index, ir::Node& mean) {
  if (!is_op(&mean, "ReduceMean") || mean.inputs.empty()) return std::nullopt;
  Match m;
  m.x = mean.inputs[0];
  const ir::ValueType* xt = float32_type(g, m.x);
  if (!xt || !xt->has_shape) return std::nullopt;
  const int64_t rank = xt->rank();
  auto axes = reduce_axes(g, mean, rank);
  if (!axes) return std::nullopt;
  ir::Node* sub = index.sole_consumer(mean.outputs[0]);
  if (!is_op(sub, "Sub") || sub->inputs[0] != m.x || sub->inputs[1] != mean.outputs[0])
    return std::nullopt;
  const std::string d = sub->outputs[0];
  // d feeds the square and the Div, nothing else.
  ir::Node *sq = nullptr, *div = nullptr;
  if (index.is_graph_output(d)) return std::nullopt;
  for (const auto& u : index.uses(d)) {
    if (u.input < 0) return std::nullopt;
    if (is_op(u.node, "Div") && u.input == 0) div = u.node;
    else if (is_op(u.node, "Pow") || is_op(u.node, "Mul")) sq = u.node;
    else return std::nullopt;
  }
  if (!sq || !div) return std::nullopt;
  size_t expected_uses = is_op(sq, "Mul") ? 3 : 2;
  if (index.uses(d).size() != expected_uses) return std::nullopt;
  if (is_op(sq, "Pow") && (sq->inputs[0] != d || scalar_constant(g, sq->inputs[1]) != 2.0))
    return std::nullopt;
  if (is_op(sq, "Mul") && (sq->inputs[0] != d || sq->inputs[1] != d)) return std::nullopt;
  ir::Node* var = index.sole_consumer(sq->outputs[0]);
  if (!is_op(var, "ReduceMean") || reduce_axes(g, *var, rank) != axes) return std::nullopt;
  ir::Node* add_eps = index.sole_consumer(var->outputs[0]);
  if (!is_op(add_eps, "Add")) return std::nullopt;
  auto eps = scalar_constant(g, other_operand(*add_eps, var->outputs[0]));
  if (!eps) return std::nullopt;
  ir::Node* sqrt = index.sole_consumer(add_eps->outputs[0]);
  if (!is_op(sqrt, "Sqrt") || index.sole_consumer(sqrt->outputs[0]) != div ||
      div->inputs[1] != sqrt->outputs[0])
    return std::nullopt;
  m.nodes = {&mean, sub, sq, var, add_eps, sqrt, div};
  m.axis = (*axes)[0];
  m.epsilon = static_cast<float>(*eps);
  for (int64_t a : *axes) {
    if (xt->dims[static_cast<size_t>(a)] < 0) return std::nullopt;
    m.norm_dims.push_back(xt->dims[static_cast<size_t>(a)]);
  }
  m.output = div->outputs[0];
  if (ir::Node* mul = index.sole_consumer(m.output); is_op(mul, "Mul")) {
    std::string gamma = other_operand(*mul, m.output);
    if (param_fits(constant_of(g, gamma), m.norm_dims)) {
      m.gamma = gamma;
      m.nodes.push_back(mul);
      m.output = mul->outputs[0];
      if (ir::Node* add = index.sole_consumer(m.output); is_op(add, "Add")) {
        std::string beta = other_operand(*add, m.output);
        if (param_fits(constant_of(g, beta), m.norm_dims)) {
          m.beta = beta;
          m.nodes.push_back(add);
          m.output = add->outputs[0];
        }
      }
    }
  }
  if (!is_float32(g, m.output)) return std::nullopt;
  return m;
}

void rewrite(ir::Graph& g, const Match& m) {
  int64_t n = 1;
  for (int64_t d : m.norm_dims) n *= d;
  auto reshaped = [&](const std::string& name, float fill) {
    Tensor t = Tensor::zeros(DType::kFloat32, m.norm_dims);
    if (name.empty()) {
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = fill;
    } else {
      const Tensor* c = constant_of(g, name);
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = c->data<float>()[i];
    }
    return t;
  };
  // LayerNormalization wants Scale/B shaped like the normalized dims exactly.
  std::string gamma = add_initializer(g, m.output + "_scale", reshaped(m.gamma, 1.0f));
  std::vector<std::string> inputs{m.x, gamma};
  if (!m.beta.empty()) inputs.push_back(add_initializer(g, m.output + "_bias", reshaped(m.beta, 0)));
  ir::Node* ln = add_node(g, "LayerNormalization", inputs, {m.output}, m.nodes[0]->name + "_ln");
  if (ln->opset < 17) {
    ln->domain = kPeregrineDomain;
    ln->opset = 1;
    import_peregrine_domain(g);
  }
  ln->attributes["axis"] = int_attr("axis", m.axis);
  ln->attributes["epsilon"] = float_attr("epsilon", m.epsilon);
  std::set<const ir::Node*> dead(m.nodes.begin(), m.nodes.end());
  for (const ir::Node* node : m.nodes)
    if (node->outputs[0] != m.output) g.values.erase(node->outputs[0]);
  remove_nodes(g, dead);
}

class LayerNormFusion : public Pass {
 public:
  const char* name() const override { return "layer_norm_fusion"; }
  Expected<bool> run(ir::Graph& g) override {
    int n = rewrite_each_match(g, match, rewrite);
    count_rewrite(n);
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_layer_norm_fusion() { return std::make_unique<LayerNormFusion>(); }

}  // namespace peregrine::passes
