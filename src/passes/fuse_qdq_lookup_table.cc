// fuse_qdq_lookup_table
//   Matches:  QuantizeLinear(f(x)) where x is an 8-bit value and f a graph of elementwise ops
//             whose every operand comes from x (through DequantizeLinear, float activations,
//             inner QuantizeLinear / DequantizeLinear pairs, earlier TableLookups) or is a
//             one-element constant: the QDQ form of a quantized activation (Sigmoid, SiLU's
//             x * DQ(Q(Sigmoid(x))), HardSwish, GELU's Erf chain, Tanh, LeakyRelu...).
//   Produces: peregrine.TableLookup(x, table) writing the QuantizeLinear's output: x has only
//             256 values, so the table holds f for each, computed once by running the matched
//             nodes on the reference backend (the same float32 operations as the unfused
//             graph, so outputs are equal to it). What the matched nodes computed for other
//             readers stays; dead_code_elimination removes the rest.
//   Preconditions: the QuantizeLinear's scale and zero point are one-element initializers;
//             every matched op is elementwise (the list below) with each operand either from
//             x or a one-element constant of rank <= x's, so nothing broadcasts; inner Q / DQ
//             nodes have one-element parameters; x's rank is known; at most kMaxNodes nodes.
//   Order: after fuse_qdq_conv / fuse_qdq_matmul / fuse_qdq_add, which take the DQ -> op -> Q
//             patterns that have integer kernels of their own.
#include <map>
#include <set>

#include "ops/node_evaluator.h"
#include "ops/op_schema.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"
#include "passes/qdq_util.h"

namespace peregrine::passes {

namespace {

constexpr size_t kMaxNodes = 32;

// Ops whose output element i depends only on element i of each operand.
const std::set<std::string>& elementwise_ops() {
  static const std::set<std::string> kOps = {
      "Abs",        "Add",      "Ceil",     "Celu",        "Clip",      "Div",
      "Elu",        "Erf",      "Exp",      "Floor",       "Gelu",      "HardSigmoid",
      "HardSwish",  "Identity", "LeakyRelu", "Log",        "Max",       "Min",
      "Mish",       "Mul",      "Neg",      "Pow",         "Reciprocal", "Relu",
      "Round",      "Selu",     "Sigmoid",  "Sign",        "Softplus",  "Softsign",
      "Sqrt",       "Sub",      "Tanh",     "ThresholdedRelu", "QuantizeLinear",
      "DequantizeLinear"};
  return kOps;
}

bool is_table_lookup(const ir::Node* n) {
  return n && n->domain == kPeregrineDomain && n->op_type == "TableLookup";
}

bool is_elementwise(const ir::Graph& g, const ir::Node* n) {
  if (!n || n->outputs.size() != 1 || has_subgraph(*n)) return false;
  if (is_table_lookup(n)) return true;
  if (!n->domain.empty() || !elementwise_ops().count(n->op_type)) return false;
  if (n->op_type == "QuantizeLinear" || n->op_type == "DequantizeLinear")
    return qdq_scalar_params(g, *n).has_value();
  return true;
}

// Is `v` a one-element constant that cannot raise an operand of rank `rank`?
bool scalar_constant_of_rank(const ir::Graph& g, const std::string& v, int64_t rank) {
  const Tensor* t = constant_of(g, v);
  return t && t->numel() == 1 && t->rank() <= rank;
}

struct Match {
  ir::Node* q;
  std::string source;               // the 8-bit value x
  std::vector<const ir::Node*> nodes;  // what computes q's output from x, q included
};

// The nodes computing `value` from `source` alone, collected into `nodes`; false when some
// operand comes from elsewhere.
bool collect(const ir::Graph& g, const GraphIndex& index, const std::string& value,
             const std::string& source, int64_t rank, std::set<const ir::Node*>& nodes) {
  if (value == source) return true;
  if (scalar_constant_of_rank(g, value, rank)) return true;
  const ir::Node* p = index.producer(value);
  if (!is_elementwise(g, p)) return false;
  if (nodes.count(p)) return true;
  if (nodes.size() >= kMaxNodes) return false;
  nodes.insert(p);
  const size_t operands = p->op_type == "QuantizeLinear" || p->op_type == "DequantizeLinear" ||
                                  is_table_lookup(p)
                              ? 1  // the rest are the checked parameters / the table
                              : p->inputs.size();
  for (size_t i = 0; i < operands; ++i) {
    if (p->inputs[i].empty()) continue;
    if (!collect(g, index, p->inputs[i], source, rank, nodes)) return false;
  }
  // Clip's bounds and the parameters past the operand: one-element constants.
  for (size_t i = operands; i < p->inputs.size(); ++i)
    if (!p->inputs[i].empty() && !is_table_lookup(p) && !constant_of(g, p->inputs[i]))
      return false;
  return true;
}

// 8-bit values read by DequantizeLinear / TableLookup nodes upstream of `value` through
// elementwise ops: the candidates for x, nearest first.
std::vector<std::string> candidate_sources(const ir::Graph& g, const GraphIndex& index,
                                           const std::string& value) {
  std::vector<std::string> found, frontier = {value};
  std::set<std::string> seen;
  for (size_t steps = 0; !frontier.empty() && steps < kMaxNodes; ++steps) {
    std::vector<std::string> next;
    for (const std::string& v : frontier) {
      const ir::Node* p = index.producer(v);
      if (!is_elementwise(g, p)) continue;
      const bool reads_8bit = p->op_type == "DequantizeLinear" || is_table_lookup(p);
      for (size_t i = 0; i < p->inputs.size(); ++i) {
        const std::string& in = p->inputs[i];
        if (in.empty() || constant_of(g, in) || !seen.insert(in).second) continue;
        if (reads_8bit && i == 0) found.push_back(in);
        next.push_back(in);
      }
    }
    frontier = std::move(next);
  }
  return found;
}

std::optional<Match> match(const ir::Graph& g, const GraphIndex& index, ir::Node& q) {
  if (!is_op(&q, "QuantizeLinear") || q.outputs.size() != 1 || q.inputs.empty() ||
      !qdq_scalar_params(g, q))
    return std::nullopt;
  // Farthest first: the largest function of one 8-bit value wins.
  std::vector<std::string> sources = candidate_sources(g, index, q.inputs[0]);
  for (auto it = sources.rbegin(); it != sources.rend(); ++it) {
    const ir::Value* x = g.find_value(*it);
    if (!x || !x->type.has_shape || !is_8bit(x->type.dtype)) continue;
    std::set<const ir::Node*> nodes = {&q};
    if (!collect(g, index, q.inputs[0], *it, x->type.rank(), nodes)) continue;
    // Order by dependence: a node after every matched producer of its inputs.
    std::vector<const ir::Node*> ordered;
    std::set<const ir::Node*> placed;
    while (ordered.size() < nodes.size()) {
      const size_t before = ordered.size();
      for (const ir::Node* n : nodes) {
        if (placed.count(n)) continue;
        bool ready = true;
        for (const std::string& in : n->inputs) {
          const ir::Node* p = in.empty() ? nullptr : index.producer(in);
          ready &= !p || !nodes.count(p) || placed.count(p);
        }
        if (ready) {
          ordered.push_back(n);
          placed.insert(n);
        }
      }
      if (ordered.size() == before) return std::nullopt;  // a cycle: not a valid graph
    }
    return Match{&q, *it, std::move(ordered)};
  }
  return std::nullopt;
}

// f at each of x's 256 values, by the evaluator; nullopt if one fails.
std::optional<Tensor> build_table(const ir::Graph& g, const Match& m, DType x_type,
                                  const NodeEvaluator& evaluator) {
  Tensor all = Tensor::zeros(x_type, {256});
  for (int i = 0; i < 256; ++i) static_cast<uint8_t*>(all.raw())[i] = static_cast<uint8_t>(i);
  std::map<std::string, RuntimeValue> values;
  values[m.source] = RuntimeValue::of(all);
  std::vector<RuntimeValue> constants;
  constants.reserve(64);
  for (const ir::Node* n : m.nodes) {
    std::vector<const RuntimeValue*> inputs;
    std::vector<RuntimeValue> held;
    held.reserve(n->inputs.size());
    for (const std::string& in : n->inputs) {
      if (in.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      auto it = values.find(in);
      if (it != values.end()) {
        inputs.push_back(&it->second);
        continue;
      }
      const Tensor* t = constant_of(g, in);
      if (!t) return std::nullopt;
      held.push_back(RuntimeValue::of(*t));
      inputs.push_back(&held.back());
    }
    auto out = evaluator.evaluate(*n, inputs);
    if (!out.is_ok() || out->size() != 1 || !(*out)[0].is_tensor()) return std::nullopt;
    values[n->outputs[0]] = (*out)[0];
  }
  const Tensor& table = values[m.q->outputs[0]].tensor;
  if (table.numel() != 256 || !is_8bit(table.dtype())) return std::nullopt;
  Tensor flat = Tensor::zeros(table.dtype(), {256});
  std::copy_n(static_cast<const uint8_t*>(table.raw()), 256, static_cast<uint8_t*>(flat.raw()));
  return flat;
}

class FuseQdqLookupTable : public Pass {
 public:
  explicit FuseQdqLookupTable(const NodeEvaluator& evaluator) : evaluator_(evaluator) {}
  const char* name() const override { return "fuse_qdq_lookup_table"; }
  Expected<bool> run(ir::Graph& g) override {
    int n = 0;
    // One rewrite per index: each changes producers. A match whose table cannot be built (a
    // reference kernel refused it) is skipped from then on.
    std::set<std::string> refused;
    for (bool again = true; again;) {
      again = false;
      GraphIndex index(g);
      for (auto& node : g.nodes) {
        if (refused.count(node->name + "/" + (node->outputs.empty() ? "" : node->outputs[0])))
          continue;
        auto m = match(g, index, *node);
        if (!m) continue;
        const ir::Value* x = g.find_value(m->source);
        auto table = build_table(g, *m, x->type.dtype, evaluator_);
        if (!table) {
          refused.insert(node->name + "/" + node->outputs[0]);
          continue;
        }
        const std::string output = m->q->outputs[0];
        const std::string base = m->q->name.empty() ? output : m->q->name;
        const std::string table_name = add_initializer(g, base + "_table", std::move(*table));
        remove_nodes(g, {m->q});
        import_peregrine_domain(g);
        ir::Node* lookup = add_node(g, "TableLookup", {m->source, table_name}, {output}, base);
        lookup->domain = kPeregrineDomain;
        lookup->opset = 1;
        ++n;
        again = true;
        break;
      }
    }
    count_rewrite(n);
    return n > 0;
  }

 private:
  const NodeEvaluator& evaluator_;
};

}  // namespace

std::unique_ptr<Pass> make_fuse_qdq_lookup_table(const NodeEvaluator& evaluator) {
  return std::make_unique<FuseQdqLookupTable>(evaluator);
}

}  // namespace peregrine::passes
