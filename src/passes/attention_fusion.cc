// attention_fusion
//   Matches:  scaled dot-product attention around a Softmax over the last axis:
//               out = MatMul(G(Softmax([Add(] [Div|Mul(] MatMul(Q', Kt') [, c)] [, mask)])), V)
//             where Q' is Q or Mul(Q, cq), Kt' is Kt or Mul(Kt, ck) (torch's export scales both
//             by the square root of the scale), and G is nothing or torch's guard for rows that
//             saw no key, Where(IsNaN(P), 0, P); either MatMul may be the Einsum that writes it
//             over any batch letters ("...id,...jd->...ij" with K untransposed, and
//             "...ij,...jd->...id");
//             and, when present, the head split / merge around it:
//               Q = Transpose(Reshape(q, (B, S, H, D)), (0, 2, 1, 3)), V likewise,
//               Kt = Transpose(Reshape(k, (B, S, H, D)), (0, 2, 3, 1)),
//               result = Reshape(Transpose(out, (0, 2, 1, 3)), (B, S, H*D)).
//   Produces: peregrine.Attention(Q, Kt, V, mask?) with scale (1/c for Div, c for Mul, times
//             cq and ck), k_transposed = 1 and empty_rows_zero = 1 with the guard; with the head
//             pattern, Attention(q, k, v, mask?) with num_heads = H writing the final Reshape's
//             output.
//   Preconditions: float32; c, cq, ck are scalar constants; every intermediate is read only by
//             the next node of the pattern and is not a graph output; for the head
//             form, static shapes and Reshape targets that are constants.
#include <algorithm>
#include <cctype>

#include "ops/op_schema.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

struct Match {
  std::vector<std::string> inputs;  // Q, K, V, mask?
  float scale = 1.0f;
  int64_t num_heads = 0;
  bool empty_rows_zero = false;
  bool k_transposed = true;  // K given as (..., D, S); false: (..., S, D) (the Einsum form)
  std::string output;
  std::vector<ir::Node*> nodes;
};

std::vector<int64_t> perm_attr(const ir::Node* n) {
  const ir::Attribute* p = n ? n->attribute("perm") : nullptr;
  return p ? p->ints : std::vector<int64_t>{};
}

// x = Transpose(Reshape(src, (B, S, H, D)), perm): src and H, when single-use throughout.
struct Split {
  std::string src;
  int64_t heads;
  ir::Node* reshape;
  ir::Node* transpose;
};
std::optional<Split> match_split(const ir::Graph& g, const GraphIndex& index, const std::string& x,
                                 const std::vector<int64_t>& perm) {
  ir::Node* t = index.producer(x);
  if (!is_op(t, "Transpose") || perm_attr(t) != perm || !index.only_local_uses(x) ||
      index.uses(x).size() != 1)
    return std::nullopt;
  ir::Node* r = index.producer(t->inputs[0]);
  if (!is_op(r, "Reshape") || index.sole_consumer(r->outputs[0]) != t) return std::nullopt;
  const ir::ValueType* src = float32_type(g, r->inputs[0]);
  const ir::ValueType* split = float32_type(g, r->outputs[0]);
  if (!src || !split || !src->is_static() || !split->is_static() || src->dims.size() != 3 ||
      split->dims.size() != 4 || split->dims[0] != src->dims[0] || split->dims[1] != src->dims[1] ||
      split->dims[2] * split->dims[3] != src->dims[2])
    return std::nullopt;
  return Split{r->inputs[0], split->dims[2], r, t};
}

// The two products of attention as Einsum: Q K^T over any batch letters with K untransposed
// ("...id,...jd->...ij"), and P V ("...ij,...jd->...id").
enum class EinsumForm { kNone, kQueriesTimesKeys, kProbsTimesV };
EinsumForm einsum_form(const ir::Node* n) {
  if (!is_op(n, "Einsum") || n->inputs.size() != 2) return EinsumForm::kNone;
  const ir::Attribute* eq = n->attribute("equation");
  if (!eq) return EinsumForm::kNone;
  std::string e;
  for (char c : eq->s)
    if (c != ' ') e += c;
  const size_t comma = e.find(','), arrow = e.find("->");
  if (comma == std::string::npos || arrow == std::string::npos || arrow < comma)
    return EinsumForm::kNone;
  const std::string a = e.substr(0, comma), b = e.substr(comma + 1, arrow - comma - 1),
                    out = e.substr(arrow + 2);
  if (a.size() < 2 || a.size() != b.size() || a.size() != out.size()) return EinsumForm::kNone;
  const size_t r = a.size();
  const std::string batch = a.substr(0, r - 2);
  if (b.substr(0, r - 2) != batch || out.substr(0, r - 2) != batch) return EinsumForm::kNone;
  for (char c : batch)
    if (!std::isalpha(static_cast<unsigned char>(c)) ||
        std::count(batch.begin(), batch.end(), c) != 1)
      return EinsumForm::kNone;
  const char a0 = a[r - 2], a1 = a[r - 1], b0 = b[r - 2], b1 = b[r - 1], o0 = out[r - 2],
             o1 = out[r - 1];
  for (char c : {a0, a1, b0, b1})
    if (batch.find(c) != std::string::npos || !std::isalpha(static_cast<unsigned char>(c)))
      return EinsumForm::kNone;
  // id,jd->ij: i, j, d distinct.
  if (a1 == b1 && a0 != a1 && b0 != a1 && a0 != b0 && o0 == a0 && o1 == b0)
    return EinsumForm::kQueriesTimesKeys;
  // ij,jd->id: i, j, d distinct.
  if (a1 == b0 && a0 != a1 && b1 != a0 && b1 != a1 && o0 == a0 && o1 == b1)
    return EinsumForm::kProbsTimesV;
  return EinsumForm::kNone;
}

// torch's guard after the softmax, Where(IsNaN(P), 0, P), when P feeds only it: the Where.
ir::Node* nan_guard(const ir::Graph& g, const GraphIndex& index, const std::string& p) {
  const auto& uses = index.uses(p);
  if (uses.size() != 2 || !index.only_local_uses(p)) return nullptr;
  ir::Node* isnan = is_op(uses[0].node, "IsNaN") ? uses[0].node : uses[1].node;
  ir::Node* where = isnan == uses[0].node ? uses[1].node : uses[0].node;
  if (!is_op(isnan, "IsNaN") || !is_op(where, "Where") || where->inputs.size() != 3 ||
      isnan->outputs.empty() || where->inputs[0] != isnan->outputs[0] || where->inputs[2] != p ||
      index.sole_consumer(isnan->outputs[0]) != where || !index.only_local_uses(isnan->outputs[0]))
    return nullptr;
  const auto zero = scalar_constant(g, where->inputs[1]);
  if (!zero || *zero != 0.0) return nullptr;
  const ir::ValueType* pt = float32_type(g, p);
  const ir::ValueType* wt = float32_type(g, where->outputs[0]);
  if (!pt || !wt || !pt->is_static() || wt->dims != pt->dims) return nullptr;
  return where;
}

std::optional<Match> match_core(const ir::Graph& g, const GraphIndex& index, ir::Node& sm) {
  if (!is_op(&sm, "Softmax") || sm.inputs.empty()) return std::nullopt;
  const ir::ValueType* st = float32_type(g, sm.outputs[0]);
  if (!st || !st->has_shape || st->rank() < 2) return std::nullopt;
  const ir::Attribute* axis_attr = sm.attribute("axis");
  int64_t axis = axis_attr ? axis_attr->i : (sm.opset >= 13 ? -1 : 1);
  if (axis < 0) axis += st->rank();
  if (axis != st->rank() - 1) return std::nullopt;
  Match m;
  m.nodes = {&sm};
  std::string probs = sm.outputs[0];
  if (ir::Node* guard = nan_guard(g, index, probs)) {
    m.empty_rows_zero = true;
    m.nodes.push_back(index.producer(guard->inputs[0]));  // the IsNaN
    m.nodes.push_back(guard);
    probs = guard->outputs[0];
  }
  ir::Node* pv = index.sole_consumer(probs);
  if (!(is_op(pv, "MatMul") || einsum_form(pv) == EinsumForm::kProbsTimesV) ||
      pv->inputs.size() != 2 || pv->inputs[0] != probs)
    return std::nullopt;
  m.nodes.push_back(pv);
  std::string cur = sm.inputs[0];
  const ir::Node* reader = &sm;  // the pattern node reading `cur`
  std::string mask;
  ir::Node* p = index.producer(cur);
  if (is_op(p, "Add") && p->inputs.size() == 2 && index.sole_consumer(cur) == reader) {
    // The scores side is the one produced by a scale or the QK MatMul.
    for (int side = 0; side < 2; ++side) {
      ir::Node* q = index.producer(p->inputs[static_cast<size_t>(side)]);
      if (is_op(q, "Div") || is_op(q, "Mul") || is_op(q, "MatMul") || is_op(q, "Einsum")) {
        mask = p->inputs[static_cast<size_t>(1 - side)];
        cur = p->inputs[static_cast<size_t>(side)];
        break;
      }
    }
    if (mask.empty() || !is_float32(g, mask)) return std::nullopt;
    m.nodes.push_back(p);
    reader = p;
    p = index.producer(cur);
  }
  if ((is_op(p, "Div") || is_op(p, "Mul")) && p->inputs.size() == 2 &&
      index.sole_consumer(cur) == reader) {
    int c_side = is_op(p, "Mul") && scalar_constant(g, p->inputs[0]) ? 0 : 1;
    auto c = scalar_constant(g, p->inputs[static_cast<size_t>(c_side)]);
    if (!c || *c == 0) return std::nullopt;
    m.scale = is_op(p, "Div") ? static_cast<float>(1.0 / *c) : static_cast<float>(*c);
    m.nodes.push_back(p);
    reader = p;
    cur = p->inputs[static_cast<size_t>(1 - c_side)];
    p = index.producer(cur);
  }
  if (is_op(p, "Einsum") && einsum_form(p) == EinsumForm::kQueriesTimesKeys) {
    m.k_transposed = false;
  } else if (!is_op(p, "MatMul") || p->inputs.size() != 2) {
    return std::nullopt;
  }
  if (index.sole_consumer(cur) != reader) return std::nullopt;
  m.nodes.push_back(p);
  // Q and Kt, each possibly scaled by a constant of its own.
  std::string operands[2] = {p->inputs[0], p->inputs[1]};
  for (std::string& x : operands) {
    ir::Node* mul = index.producer(x);
    if (!is_op(mul, "Mul") || mul->inputs.size() != 2 || index.sole_consumer(x) != p ||
        !index.only_local_uses(x))
      continue;
    const int c_side = scalar_constant(g, mul->inputs[1])   ? 1
                       : scalar_constant(g, mul->inputs[0]) ? 0
                                                            : -1;
    if (c_side < 0) continue;
    const std::string& other = mul->inputs[static_cast<size_t>(1 - c_side)];
    const ir::ValueType* xt = float32_type(g, x);
    const ir::ValueType* ot = float32_type(g, other);
    if (!xt || !ot || !xt->is_static() || ot->dims != xt->dims) continue;  // no broadcasting
    m.scale *= static_cast<float>(*scalar_constant(g, mul->inputs[static_cast<size_t>(c_side)]));
    m.nodes.push_back(mul);
    x = other;
  }
  if (!is_float32(g, operands[0]) || !is_float32(g, operands[1]) || !is_float32(g, pv->inputs[1]))
    return std::nullopt;
  // The fused op's output is Q's shape with V's last dim: no batch broadcasting.
  const ir::ValueType* qt = float32_type(g, operands[0]);
  const ir::ValueType* vt = float32_type(g, pv->inputs[1]);
  const ir::ValueType* ot = float32_type(g, pv->outputs[0]);
  if (!qt->is_static() || !vt->is_static() || !ot || !ot->is_static()) return std::nullopt;
  Shape expect = qt->dims;
  expect.back() = vt->dims.back();
  if (expect != ot->dims) return std::nullopt;
  m.inputs = {operands[0], operands[1], pv->inputs[1]};
  if (!mask.empty()) m.inputs.push_back(mask);
  m.output = pv->outputs[0];
  return m;
}

// Widens a core match to take (B, S, H*D) inputs and produce the merged output.
void try_absorb_heads(const ir::Graph& g, const GraphIndex& index, Match* m) {
  if (!m->k_transposed) return;  // the head form takes K as the plain (B, S, H*D) input
  auto q = match_split(g, index, m->inputs[0], {0, 2, 1, 3});
  auto k = match_split(g, index, m->inputs[1], {0, 2, 3, 1});
  auto v = match_split(g, index, m->inputs[2], {0, 2, 1, 3});
  if (!q || !k || !v || q->heads != k->heads || q->heads != v->heads) return;
  ir::Node* t = index.sole_consumer(m->output);
  if (!is_op(t, "Transpose") || perm_attr(t) != std::vector<int64_t>{0, 2, 1, 3}) return;
  ir::Node* r = index.sole_consumer(t->outputs[0]);
  if (!is_op(r, "Reshape") || r->inputs[0] != t->outputs[0]) return;
  const ir::ValueType* out = float32_type(g, r->outputs[0]);
  const ir::ValueType* qs = float32_type(g, q->src);
  const ir::ValueType* vs = float32_type(g, v->src);
  if (!out || !out->is_static() || out->dims.size() != 3 || out->dims[0] != qs->dims[0] ||
      out->dims[1] != qs->dims[1] || out->dims[2] != vs->dims[2])
    return;
  m->inputs[0] = q->src;
  m->inputs[1] = k->src;
  m->inputs[2] = v->src;
  m->num_heads = q->heads;
  m->output = r->outputs[0];
  m->nodes.insert(m->nodes.end(), {q->reshape, q->transpose, k->reshape, k->transpose,
                                   v->reshape, v->transpose, t, r});
}

void rewrite(ir::Graph& g, const Match& m) {
  ir::Node* a = add_node(g, "Attention", m.inputs, {m.output}, m.nodes[0]->name + "_attention");
  a->domain = kPeregrineDomain;
  a->opset = 1;
  a->attributes["scale"] = float_attr("scale", m.scale);
  a->attributes["num_heads"] = int_attr("num_heads", m.num_heads);
  if (m.num_heads == 0)
    a->attributes["k_transposed"] = int_attr("k_transposed", m.k_transposed ? 1 : 0);
  if (m.empty_rows_zero) a->attributes["empty_rows_zero"] = int_attr("empty_rows_zero", 1);
  import_peregrine_domain(g);
  std::set<const ir::Node*> dead(m.nodes.begin(), m.nodes.end());
  for (const ir::Node* n : m.nodes)
    if (n->outputs[0] != m.output) g.values.erase(n->outputs[0]);
  remove_nodes(g, dead);
}

class AttentionFusion : public Pass {
 public:
  const char* name() const override { return "attention_fusion"; }
  Expected<bool> run(ir::Graph& g) override {
    auto match_with_heads = [](const ir::Graph& graph, const GraphIndex& index, ir::Node& node) {
      auto m = match_core(graph, index, node);
      if (m) try_absorb_heads(graph, index, &*m);
      return m;
    };
    int n = rewrite_each_match(g, match_with_heads, rewrite);
    count_rewrite(n);
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_attention_fusion() { return std::make_unique<AttentionFusion>(); }

}  // namespace peregrine::passes
