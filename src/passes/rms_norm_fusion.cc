// rms_norm_fusion
//   Matches:  the decomposed RMS norm (T5, LLaMA) over the trailing axes of x:
//               ms = ReduceMean(Pow(x, 2) | Mul(x, x)); s = Sqrt(Add(ms, eps));
//               y = Div(x, s) | Mul(x, Reciprocal(s)) | Mul(x, Div(1, s))   [*
//               gamma]
//             (torch's `x * torch.rsqrt(ms + eps)` exports as Sqrt ->
//             Reciprocal -> Mul).
//   Produces: peregrine.RMSNormalization(x, gamma, axis = first reduced axis -
//   rank, epsilon);
//             a missing gamma becomes an initializer of ones.
//   Preconditions: x float32 of known rank; ReduceMean over trailing contiguous
//   axes with
//             keepdims = 1 (axes an attribute before opset 18, a constant input
//             from 18); eps a scalar constant; gamma a float32 constant shaped
//             like the normalized dims (leading 1s allowed); every intermediate
//             is read only by the next node of the pattern and is not a graph
//             output (x itself may have other readers).
//   Order: after layer_norm_fusion, whose variance tail Pow(d, 2) ... Div(d, .)
//   is an RMS
//             norm of d = x - mean and would otherwise be taken here first.
#include <algorithm>

#include "ops/op_schema.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

// Sorted trailing contiguous axes of a ReduceMean with keepdims = 1, or
// nullopt.
std::optional<std::vector<int64_t>> trailing_reduce_axes(const ir::Graph &g, const ir::Node &n,
                                                         int64_t rank) {
  if (const ir::Attribute *k = n.attribute("keepdims"); k && k->i == 0) return std::nullopt;
  std::vector<int64_t> axes;
  if (n.opset >= 18) {
    if (n.inputs.size() < 2) return std::nullopt;
    const Tensor *t = constant_of(g, n.inputs[1]);
    if (!t) return std::nullopt;
    axes = t->to_int64_vector();
  } else {
    const ir::Attribute *a = n.attribute("axes");
    if (!a) return std::nullopt;
    axes = a->ints;
  }
  if (axes.empty()) return std::nullopt;
  for (auto &a : axes) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return std::nullopt;
  }
  std::sort(axes.begin(), axes.end());
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != rank - static_cast<int64_t>(axes.size() - i)) return std::nullopt;
  return axes;
}

std::string other_operand(const ir::Node &n, const std::string &x) {
  if (n.inputs.size() != 2) return "";
  if (n.inputs[0] == x) return n.inputs[1];
  if (n.inputs[1] == x) return n.inputs[0];
  return "";
}

// A float32 constant shaped like `dims` (leading 1s allowed).
bool param_fits(const Tensor *t, const Shape &dims) {
  if (!t || t->dtype() != DType::kFloat32) return false;
  Shape s = t->shape();
  while (s.size() > dims.size() && s.front() == 1) s.erase(s.begin());
  return s == dims;
}

struct Match {
  std::string x, gamma, output;
  int64_t axis;  // negative: counted from the end
  float epsilon;
  Shape norm_dims;
  std::vector<ir::Node *> nodes;
};

// Starts at the square: Pow(x, 2) or Mul(x, x).
std::optional<Match> match(const ir::Graph &g, const GraphIndex &index, ir::Node &sq) {
  Match m;
  if (is_op(&sq, "Pow") && sq.inputs.size() == 2 && scalar_constant(g, sq.inputs[1]) == 2.0) {
    m.x = sq.inputs[0];
  } else if (is_op(&sq, "Mul") && sq.inputs.size() == 2 && sq.inputs[0] == sq.inputs[1]) {
    m.x = sq.inputs[0];
  } else {
    return std::nullopt;
  }
  const ir::ValueType *xt = float32_type(g, m.x);
  if (!xt || !xt->has_shape) return std::nullopt;
  const int64_t rank = xt->rank();
  ir::Node *mean = index.sole_consumer(sq.outputs[0]);
  if (!is_op(mean, "ReduceMean") || mean->inputs[0] != sq.outputs[0]) return std::nullopt;
  auto axes = trailing_reduce_axes(g, *mean, rank);
  if (!axes) return std::nullopt;
  ir::Node *add_eps = index.sole_consumer(mean->outputs[0]);
  if (!is_op(add_eps, "Add")) return std::nullopt;
  auto eps = scalar_constant(g, other_operand(*add_eps, mean->outputs[0]));
  if (!eps) return std::nullopt;
  ir::Node *sqrt = index.sole_consumer(add_eps->outputs[0]);
  if (!is_op(sqrt, "Sqrt")) return std::nullopt;
  const std::string s = sqrt->outputs[0];
  m.nodes = {&sq, mean, add_eps, sqrt};
  ir::Node *next = index.sole_consumer(s);
  ir::Node *scale = nullptr;  // the node that produces the normalized x
  if (is_op(next, "Div") && next->inputs[0] == m.x && next->inputs[1] == s) {
    scale = next;
  } else {
    // 1 / s, then x * (1 / s).
    const bool reciprocal = is_op(next, "Reciprocal");
    const bool one_over =
        is_op(next, "Div") && next->inputs[1] == s && scalar_constant(g, next->inputs[0]) == 1.0;
    if (!reciprocal && !one_over) return std::nullopt;
    m.nodes.push_back(next);
    ir::Node *mul = index.sole_consumer(next->outputs[0]);
    if (!is_op(mul, "Mul") || other_operand(*mul, next->outputs[0]) != m.x) return std::nullopt;
    scale = mul;
  }
  m.nodes.push_back(scale);
  m.axis = (*axes)[0] - rank;
  m.epsilon = static_cast<float>(*eps);
  for (int64_t a : *axes) {
    if (xt->dims[static_cast<size_t>(a)] < 0) return std::nullopt;
    m.norm_dims.push_back(xt->dims[static_cast<size_t>(a)]);
  }
  m.output = scale->outputs[0];
  if (ir::Node *mul = index.sole_consumer(m.output); is_op(mul, "Mul")) {
    std::string gamma = other_operand(*mul, m.output);
    if (gamma != m.output && param_fits(constant_of(g, gamma), m.norm_dims)) {
      m.gamma = gamma;
      m.nodes.push_back(mul);
      m.output = mul->outputs[0];
    }
  }
  if (!is_float32(g, m.output)) return std::nullopt;
  return m;
}

void rewrite(ir::Graph &g, const Match &m) {
  int64_t n = 1;
  for (int64_t d : m.norm_dims) n *= d;
  // Scale shaped like the normalized dims exactly (as LayerNormalization wants
  // it).
  Tensor scale = Tensor::zeros(DType::kFloat32, m.norm_dims);
  const Tensor *c = m.gamma.empty() ? nullptr : constant_of(g, m.gamma);
  for (int64_t i = 0; i < n; ++i) scale.data<float>()[i] = c ? c->data<float>()[i] : 1.0f;
  std::string gamma = add_initializer(g, m.output + "_scale", std::move(scale));
  ir::Node *rms =
      add_node(g, "RMSNormalization", {m.x, gamma}, {m.output}, m.nodes[0]->name + "_rms");
  rms->domain = kPeregrineDomain;
  rms->opset = 1;
  import_peregrine_domain(g);
  rms->attributes["axis"] = int_attr("axis", m.axis);
  rms->attributes["epsilon"] = float_attr("epsilon", m.epsilon);
  std::set<const ir::Node *> dead(m.nodes.begin(), m.nodes.end());
  for (const ir::Node *node : m.nodes)
    if (node->outputs[0] != m.output) g.values.erase(node->outputs[0]);
  remove_nodes(g, dead);
}

class RmsNormFusion : public Pass {
 public:
  const char *name() const override { return "rms_norm_fusion"; }
  Expected<bool> run(ir::Graph &g) override {
    int n = rewrite_each_match(g, match, rewrite);
    count_rewrite(n);
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_rms_norm_fusion() { return std::make_unique<RmsNormFusion>(); }

}  // namespace peregrine::passes
