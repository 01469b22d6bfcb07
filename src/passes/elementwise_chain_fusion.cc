// elementwise_chain_fusion
//   Matches:  a chain of >= 2 float32 elementwise ops, each reading the
//   previous one's output:
//               unary  Relu Sigmoid Tanh Exp Neg Abs Sqrt Erf Clip LeakyRelu
//               HardSwish binary Add Sub Mul Div Max Min (two inputs), the
//               other operand a one-element
//                      float32 constant or a tensor shaped exactly like the
//                      chain value.
//   Produces: one peregrine.ElementwiseChain(X0, tensor operands...) whose
//   attributes hold the
//             steps as a program (ops/elementwise_chain.h): one pass over
//             memory instead of one per op.
//   Preconditions: every value in the chain has a static shape, the same for
//   all of them
//             (broadcasting is refused except for one-element constants of rank
//             <= the chain's); Clip bounds are constants; every intermediate
//             has the next step as its only reader and is not a graph output.
//   Order: last of the fusions, so what gelu_fusion, layer_norm_fusion,
//   rms_norm_fusion,
//             attention_fusion and fuse_activation take is gone before chains
//             are formed.
#include <limits>

#include "ops/elementwise_chain.h"
#include "ops/op_schema.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

// The static shape of a float32 value, or nullopt.
std::optional<Shape> static_float32_shape(const ir::Graph &g, const std::string &v) {
  const ir::ValueType *t = float32_type(g, v);
  if (!t || !t->is_static()) return std::nullopt;
  return t->dims;
}

// A one-element float32 constant of rank <= `rank` (so it never broadcasts the
// shape up).
std::optional<float> scalar_immediate(const ir::Graph &g, const std::string &v, size_t rank) {
  const Tensor *t = constant_of(g, v);
  if (!t || t->dtype() != DType::kFloat32 || t->numel() != 1 ||
      static_cast<size_t>(t->rank()) > rank)
    return std::nullopt;
  return t->data<float>()[0];
}

struct Link {
  ir::Node *node;
  ChainStep step;
  std::string acc;      // the chain value this step reads
  std::string operand;  // binary step with a tensor operand: its value name
};

// `n` as one step of a chain of `shape` whose current value is `acc`, or
// nullopt.
std::optional<Link> as_step(const ir::Graph &g, ir::Node &n, const std::string &acc,
                            const Shape &shape) {
  if (!n.domain.empty() || n.outputs.size() != 1 || has_subgraph(n)) return std::nullopt;
  auto op = chain_op_from_name(n.op_type);
  if (!op || static_float32_shape(g, n.outputs[0]) != shape) return std::nullopt;
  Link link{&n, ChainStep{*op}, acc, ""};
  ChainStep &s = link.step;
  if (!chain_op_is_binary(*op)) {
    if (n.inputs.empty() || n.inputs[0] != acc) return std::nullopt;
    if (*op == ChainOp::kLeakyRelu) {
      const ir::Attribute *a = n.attribute("alpha");
      s.p0 = a ? a->f : 0.01f;
    } else if (*op == ChainOp::kClip) {
      s.p0 = std::numeric_limits<float>::lowest();
      s.p1 = std::numeric_limits<float>::max();
      if (n.opset < 11) {
        if (const ir::Attribute *a = n.attribute("min")) s.p0 = a->f;
        if (const ir::Attribute *a = n.attribute("max")) s.p1 = a->f;
      } else {
        for (size_t i = 1; i < n.inputs.size() && i < 3; ++i) {
          if (n.inputs[i].empty()) continue;
          auto bound = scalar_immediate(g, n.inputs[i], shape.size());
          if (!bound) return std::nullopt;
          (i == 1 ? s.p0 : s.p1) = *bound;
        }
      }
    } else if (n.inputs.size() != 1) {
      return std::nullopt;
    }
    return link;
  }
  if (n.inputs.size() != 2 || (n.inputs[0] == acc) == (n.inputs[1] == acc)) return std::nullopt;
  const int slot = n.inputs[0] == acc ? 0 : 1;
  const std::string &other = n.inputs[static_cast<size_t>(1 - slot)];
  s.swapped = slot == 1;
  if (auto imm = scalar_immediate(g, other, shape.size())) {
    s.p0 = *imm;
  } else if (static_float32_shape(g, other) == shape) {
    link.operand = other;
  } else {
    return std::nullopt;  // a broadcast operand: refused
  }
  return link;
}

// `n` as the first step: it reads a chain value of its output's shape (input 0
// when it has that shape, else input 1 for a binary op).
std::optional<Link> as_head(const ir::Graph &g, ir::Node &n) {
  if (n.inputs.empty() || n.outputs.size() != 1) return std::nullopt;
  auto shape = static_float32_shape(g, n.outputs[0]);
  if (!shape) return std::nullopt;
  for (size_t slot = 0; slot < 2 && slot < n.inputs.size(); ++slot) {
    if (static_float32_shape(g, n.inputs[slot]) != *shape) continue;
    if (auto link = as_step(g, n, n.inputs[slot], *shape)) return link;
  }
  return std::nullopt;
}

std::optional<std::vector<Link>> match(const ir::Graph &g, const GraphIndex &index, ir::Node &n) {
  auto head = as_head(g, n);
  if (!head) return std::nullopt;
  // Not a start when the producer of its chain value is a step that would reach
  // it.
  if (ir::Node *p = index.producer(head->acc);
      p && index.sole_consumer(head->acc) == &n && as_head(g, *p))
    return std::nullopt;
  const Shape shape = *static_float32_shape(g, n.outputs[0]);
  std::vector<Link> chain = {*head};
  for (;;) {
    const std::string &value = chain.back().node->outputs[0];
    ir::Node *next = index.sole_consumer(value);
    if (!next) break;
    auto link = as_step(g, *next, value, shape);
    if (!link) break;
    chain.push_back(*link);
  }
  if (chain.size() < 2) return std::nullopt;
  return chain;
}

void rewrite(ir::Graph &g, const std::vector<Link> &chain) {
  std::vector<std::string> inputs = {chain.front().acc};
  std::vector<std::string> ops;
  std::vector<int64_t> operands, swapped;
  std::vector<float> params;
  for (const Link &l : chain) {
    int64_t operand = -1;
    if (!l.operand.empty()) {
      auto it = std::find(inputs.begin() + 1, inputs.end(), l.operand);
      operand = it - inputs.begin();
      if (it == inputs.end()) inputs.push_back(l.operand);
    }
    ops.push_back(chain_op_name(l.step.op));
    operands.push_back(operand);
    swapped.push_back(l.step.swapped ? 1 : 0);
    params.push_back(l.step.p0);
    params.push_back(l.step.p1);
  }
  const std::string output = chain.back().node->outputs[0];
  ir::Node *fused =
      add_node(g, "ElementwiseChain", inputs, {output}, chain.front().node->name + "_chain");
  fused->domain = kPeregrineDomain;
  fused->opset = 1;
  import_peregrine_domain(g);
  ir::Attribute ops_attr;
  ops_attr.name = "ops";
  ops_attr.type = ir::Attribute::Type::kStrings;
  ops_attr.strings = ops;
  fused->attributes["ops"] = ops_attr;
  fused->attributes["operands"] = ints_attr("operands", operands);
  fused->attributes["swapped"] = ints_attr("swapped", swapped);
  fused->attributes["params"] = floats_attr("params", params);
  std::set<const ir::Node *> dead;
  for (const Link &l : chain) {
    dead.insert(l.node);
    if (l.node->outputs[0] != output) g.values.erase(l.node->outputs[0]);
  }
  remove_nodes(g, dead);
}

class ElementwiseChainFusion : public Pass {
 public:
  const char *name() const override { return "elementwise_chain_fusion"; }
  Expected<bool> run(ir::Graph &g) override {
    int n = rewrite_each_match(g, match, rewrite);
    count_rewrite(n);
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_elementwise_chain_fusion() {
  return std::make_unique<ElementwiseChainFusion>();
}

}  // namespace peregrine::passes
