// layout_nhwc (-O3)
//   Matches:  chains of 2-D float32 Conv / FusedConv nodes (the CPU conv kernels are faster
//             with channels innermost: a 1x1 conv is one GEMM over all pixels with no im2col,
//             im2col copies whole channel vectors, depthwise vectorizes over channels), plus
//             the ops between them that do not care about layout: unary elementwise ops and
//             Add / Sub / Mul / Div whose activation inputs are all NHWC and of one shape (a
//             scalar constant operand is allowed); and Concat / Split of NHWC values, whose
//             `axis` is moved to the NHWC position (C: 1 -> 3, H: 2 -> 1, W: 3 -> 2).
//   Produces: peregrine.ConvNhwc (same attributes and inputs; X, Z and Y are NHWC); the
//             layout-free ops unchanged but on NHWC values. Transpose(perm 0,2,3,1) where an
//             NCHW value enters a chain and Transpose(perm 0,3,1,2) where an NHWC value leaves
//             it (a reader that needs NCHW, a subgraph, a graph output), one per value, so
//             graph inputs and outputs keep their names and layouts.
//   Preconditions: the conv's X and Y have static rank-4 shapes; W is a float32 initializer
//             (the CPU kernel packs it once); group 1 or depthwise (group == C_in == C_out); a
//             Z input has exactly Y's shape. A conv with no conv neighbour in NHWC (its input
//             comes from and its output goes to NCHW ops only) is left alone: two transposes
//             would cost more than the layout saves.
#include <map>
#include <set>

#include "ops/op_schema.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

const std::set<std::string> kUnaryLayoutFree = {
    "Relu", "Sigmoid", "Tanh", "Clip", "LeakyRelu", "HardSwish", "HardSigmoid", "Elu",
    "Selu", "Neg",     "Abs",  "Exp",  "Sqrt",      "Identity",  "Softplus",    "Erf"};
const std::set<std::string> kBinaryLayoutFree = {"Add", "Sub", "Mul", "Div"};
// Ops with an `axis` attribute over rank-4 activations (every activation input NHWC).
const std::set<std::string> kAxisOps = {"Concat", "Split"};

// The rank-4 axis attribute of `n` in 0..3 (default 0), or -1 when out of range.
int64_t rank4_axis(const ir::Node& n) {
  const ir::Attribute* a = n.attribute("axis");
  int64_t axis = a ? a->i : 0;
  if (axis < 0) axis += 4;
  return axis >= 0 && axis < 4 ? axis : -1;
}

bool is_static_rank4_float(const ir::Graph& g, const std::string& v) {
  const ir::ValueType* t = float32_type(g, v);
  return t && t->is_static() && t->dims.size() == 4;
}

// A conv that ConvNhwc and its CPU kernel handle.
bool is_convertible_conv(const ir::Graph& g, const ir::Node& n) {
  const bool fused = n.domain == kPeregrineDomain && n.op_type == "FusedConv";
  if (!fused && !is_op(&n, "Conv")) return false;
  if (n.inputs.size() < 2 || n.outputs.size() != 1 || has_subgraph(n)) return false;
  if (!is_static_rank4_float(g, n.inputs[0]) || !is_static_rank4_float(g, n.outputs[0]))
    return false;
  const Tensor* w = constant_of(g, n.inputs[1]);
  if (!w || w->dtype() != DType::kFloat32 || w->rank() != 4) return false;
  const int64_t in_c = g.find_value(n.inputs[0])->type.dims[1];
  int64_t group = 1;
  if (const ir::Attribute* a = n.attribute("group")) group = a->i;
  const bool depthwise = group > 1 && group == in_c && w->dim(0) == in_c && w->dim(1) == 1;
  if (group != 1 && !depthwise) return false;
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
    const Tensor* b = constant_of(g, n.inputs[2]);
    if (!b || b->dtype() != DType::kFloat32) return false;
  }
  if (n.inputs.size() > 3 && !n.inputs[3].empty()) {
    const ir::ValueType* z = float32_type(g, n.inputs[3]);
    const ir::ValueType& y = g.find_value(n.outputs[0])->type;
    if (!z || !z->is_static() || z->dims != y.dims) return false;
  }
  return true;
}

// The inputs of `n` that carry activations (and so change layout with it).
std::vector<size_t> activation_inputs(const ir::Node& n, bool conv) {
  if (conv)
    return n.inputs.size() > 3 && !n.inputs[3].empty() ? std::vector<size_t>{0, 3}
                                                       : std::vector<size_t>{0};
  if (kUnaryLayoutFree.count(n.op_type) || n.op_type == "Split") return {0};
  if (n.op_type == "Concat") {
    std::vector<size_t> all(n.inputs.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    return all;
  }
  return {0, 1};
}

// A layout-free op whose activation inputs are all NHWC values of one shape (a binary op may
// have one scalar constant operand instead).
bool is_layout_free_on(const ir::Graph& g, const ir::Node& n,
                       const std::map<std::string, std::string>& nhwc) {
  if (!n.domain.empty() || has_subgraph(n) || n.outputs.empty()) return false;
  if (kAxisOps.count(n.op_type)) {
    // Concat: every input NHWC; Split: X NHWC, split sizes (input 1) a constant if given.
    if (rank4_axis(n) < 0 || n.inputs.empty()) return false;
    const size_t activations = n.op_type == "Concat" ? n.inputs.size() : 1;
    for (size_t i = 0; i < activations; ++i)
      if (!nhwc.count(n.inputs[i])) return false;
    if (n.op_type == "Split" && n.inputs.size() > 1 && !n.inputs[1].empty() &&
        !constant_of(g, n.inputs[1]))
      return false;
    for (const auto& o : n.outputs)
      if (o.empty() || !is_static_rank4_float(g, o)) return false;
    return true;
  }
  if (n.outputs.size() != 1) return false;
  if (kUnaryLayoutFree.count(n.op_type)) {
    if (n.inputs.empty() || !nhwc.count(n.inputs[0])) return false;
    for (size_t i = 1; i < n.inputs.size(); ++i)  // Clip's min / max
      if (!n.inputs[i].empty() && !scalar_constant(g, n.inputs[i])) return false;
    return is_float32(g, n.outputs[0]);
  }
  if (!kBinaryLayoutFree.count(n.op_type) || n.inputs.size() != 2) return false;
  const bool a = nhwc.count(n.inputs[0]) > 0, b = nhwc.count(n.inputs[1]) > 0;
  if (!a && !b) return false;
  if (a && b) {
    const ir::ValueType* ta = float32_type(g, n.inputs[0]);
    const ir::ValueType* tb = float32_type(g, n.inputs[1]);
    if (!ta || !tb || ta->dims != tb->dims) return false;
  } else if (!scalar_constant(g, n.inputs[a ? 1 : 0])) {
    return false;
  }
  return is_static_rank4_float(g, n.outputs[0]);
}

ir::ValueType to_nhwc_type(const ir::ValueType& t) {
  ir::ValueType r = ir::ValueType::tensor(t.dtype, {t.dims[0], t.dims[2], t.dims[3], t.dims[1]});
  return r;
}

// Which nodes run in NHWC: convertible convs, minus isolated ones, then the layout-free ops
// they feed (in topological order). Returns the set of node pointers.
std::set<const ir::Node*> choose_nhwc_nodes(const ir::Graph& g, const GraphIndex& index) {
  std::set<const ir::Node*> convs;
  for (const auto& n : g.nodes)
    if (is_convertible_conv(g, *n)) convs.insert(n.get());
  // Neighbour test on the conv graph seen through layout-free ops: a conv stays when its X
  // comes from a conv (or a layout-free op that does) or one of its readers is a conv or a
  // layout-free op feeding one. One level of layout-free ops is enough for the CNNs we see
  // (Conv -> Relu -> Conv, residual Add -> Conv).
  auto leads_to_conv = [&](const std::string& v) {
    for (const auto& u : index.uses(v)) {
      if (u.node == nullptr || u.input < 0) continue;
      if (convs.count(u.node)) return true;
      if (u.node->domain.empty() &&
          (kUnaryLayoutFree.count(u.node->op_type) || kBinaryLayoutFree.count(u.node->op_type) ||
           kAxisOps.count(u.node->op_type)))
        for (const auto& o : u.node->outputs)
          for (const auto& u2 : index.uses(o))
            if (u2.input >= 0 && convs.count(u2.node)) return true;
    }
    return false;
  };
  auto comes_from_conv = [&](const std::string& v) {
    const ir::Node* p = index.producer(v);
    if (!p) return false;
    if (convs.count(p)) return true;
    if (!p->domain.empty()) return false;
    if (!kUnaryLayoutFree.count(p->op_type) && !kBinaryLayoutFree.count(p->op_type) &&
        !kAxisOps.count(p->op_type))
      return false;
    for (const auto& in : p->inputs)
      if (const ir::Node* pp = index.producer(in); pp && convs.count(pp)) return true;
    return false;
  };
  std::set<const ir::Node*> chosen;
  for (const ir::Node* c : convs)
    if (comes_from_conv(c->inputs[0]) || leads_to_conv(c->outputs[0])) chosen.insert(c);
  // Layout-free ops join when their inputs are already NHWC.
  std::map<std::string, std::string> nhwc;  // only keys matter here
  std::set<const ir::Node*> result;
  for (const auto& n : g.nodes) {
    const bool join = chosen.count(n.get()) || is_layout_free_on(g, *n, nhwc);
    if (!join) continue;
    // Values read by subgraphs keep their NCHW name via the transpose back; fine.
    result.insert(n.get());
    for (const auto& o : n->outputs) nhwc[o] = "";
  }
  return result;
}

class LayoutNhwc : public Pass {
 public:
  const char* name() const override { return "layout_nhwc"; }
  bool runs_on_subgraphs() const override { return false; }

  Expected<bool> run(ir::Graph& g) override {
    GraphIndex index(g);
    const std::set<const ir::Node*> chosen = choose_nhwc_nodes(g, index);
    if (chosen.empty()) return false;
    import_peregrine_domain(g);
    std::map<std::string, std::string> nhwc_of;  // NCHW value -> its NHWC twin
    std::vector<ir::Node*> order;
    for (const auto& n : g.nodes)
      if (chosen.count(n.get())) order.push_back(n.get());
    for (ir::Node* n : order) {
      const bool conv = n->op_type == "Conv" || n->op_type == "FusedConv";
      for (size_t i : activation_inputs(*n, conv)) {
        if (i >= n->inputs.size() || n->inputs[i].empty()) continue;
        const std::string v = n->inputs[i];
        if (scalar_constant(g, v) && !conv) continue;
        auto it = nhwc_of.find(v);
        if (it == nhwc_of.end()) {
          // An NCHW value entering the chain: one transpose in, shared by all readers.
          const std::string t = fresh_name(g, v + "_nhwc");
          g.value(t).type = to_nhwc_type(g.find_value(v)->type);
          ir::Node* tr = add_node(g, "Transpose", {v}, {t}, t + "/to_nhwc");
          tr->attributes["perm"] = ints_attr("perm", {0, 2, 3, 1});
          it = nhwc_of.emplace(v, t).first;
          count_rewrite();
        }
        n->inputs[i] = it->second;
      }
      if (conv) {
        n->op_type = "ConvNhwc";
        n->domain = kPeregrineDomain;
        n->opset = g.opsets[kPeregrineDomain];
      } else if (kAxisOps.count(n->op_type)) {
        constexpr int64_t kNhwcAxis[4] = {0, 3, 1, 2};  // NCHW axis -> its NHWC position
        n->attributes["axis"] = int_attr("axis", kNhwcAxis[rank4_axis(*n)]);
      }
      count_rewrite();
      for (std::string& out_ref : n->outputs) {
        const std::string out = out_ref;
        const std::string t = fresh_name(g, out + "_nhwc");
        g.value(t).type = to_nhwc_type(g.find_value(out)->type);
        out_ref = t;
        nhwc_of[out] = t;
        // An NHWC value leaving the chain: one transpose back, under the original name.
        bool leaves = index.is_graph_output(out);
        for (const auto& u : index.uses(out))
          if (u.input < 0 || !chosen.count(u.node)) leaves = true;
        if (leaves) {
          ir::Node* tr = add_node(g, "Transpose", {t}, {out}, t + "/to_nchw");
          tr->attributes["perm"] = ints_attr("perm", {0, 3, 1, 2});
          count_rewrite();
        } else {
          g.values.erase(out);
        }
      }
    }
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_layout_nhwc() { return std::make_unique<LayoutNhwc>(); }

}  // namespace peregrine::passes
