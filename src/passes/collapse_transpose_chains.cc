// collapse_transpose_chains
//   Matches:  Transpose(Transpose(x, p1), p2).
//   Produces: Transpose(x, q) with q[i] = p1[p2[i]]; when q is the identity, readers of
//             the outer output read x and the outer node is removed (the transposes
//             cancel). The inner node stays for other readers (DCE removes it otherwise).
//             When the outer output is a graph output, the node producing x is renamed to
//             write it instead (x's readers follow), so the pair still cancels.
//   Preconditions: both perms known (attribute, or rank known for the default
//             reversal); for cancellation, the outer output is not a graph output
//             and not read from a subgraph, or else (renaming) x is made by a node of
//             this graph, is not a graph output and is read only by this graph's nodes.
#include <numeric>

#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

std::optional<std::vector<int64_t>> perm_of(const ir::Graph& g, const ir::Node& n) {
  if (const ir::Attribute* p = n.attribute("perm")) return p->ints;
  const ir::Value* in = g.find_value(n.inputs[0]);
  if (!in || !in->type.is_tensor() || !in->type.has_shape) return std::nullopt;
  std::vector<int64_t> perm(in->type.dims.size());
  std::iota(perm.rbegin(), perm.rend(), 0);  // default: reverse the dims
  return perm;
}

struct Match {
  ir::Node* outer;
  std::string source;
  std::vector<int64_t> perm;
  bool identity;
  bool rename_source;  // identity, outer output a graph output: x's producer writes it
};

std::optional<Match> match(const ir::Graph& g, const GraphIndex& index, ir::Node& n) {
  if (!is_op(&n, "Transpose") || n.inputs.empty()) return std::nullopt;
  ir::Node* inner = index.producer(n.inputs[0]);
  if (!is_op(inner, "Transpose")) return std::nullopt;
  auto p1 = perm_of(g, *inner), p2 = perm_of(g, n);
  if (!p1 || !p2 || p1->size() != p2->size()) return std::nullopt;
  std::vector<int64_t> q(p2->size());
  bool identity = true;
  for (size_t i = 0; i < q.size(); ++i) {
    int64_t j = (*p2)[i];
    if (j < 0 || j >= static_cast<int64_t>(p1->size())) return std::nullopt;
    q[i] = (*p1)[static_cast<size_t>(j)];
    identity &= q[i] == static_cast<int64_t>(i);
  }
  const std::string& source = inner->inputs[0];
  bool rename = false;
  if (identity && !index.only_local_uses(n.outputs[0])) {
    rename = index.producer(source) && index.only_local_uses(source);
    identity = rename;
  }
  return Match{&n, source, q, identity, rename};
}

class CollapseTransposeChains : public Pass {
 public:
  const char* name() const override { return "collapse_transpose_chains"; }
  Expected<bool> run(ir::Graph& g) override {
    auto collapse = [](ir::Graph& graph, const auto& m) {
      if (m.rename_source) {
        const std::string out = m.outer->outputs[0];
        for (auto& node : graph.nodes)
          for (auto& o : node->outputs)
            if (o == m.source) o = out;
        replace_uses(graph, m.source, out);
        remove_nodes(graph, {m.outer});
        graph.values.erase(m.source);
      } else if (m.identity) {
        replace_uses(graph, m.outer->outputs[0], m.source);
        remove_nodes(graph, {m.outer});
      } else {
        m.outer->inputs[0] = m.source;
        m.outer->attributes["perm"] = ints_attr("perm", m.perm);
      }
    };
    int n = rewrite_each_match(g, match, collapse);
    count_rewrite(n);
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_collapse_transpose_chains() {
  return std::make_unique<CollapseTransposeChains>();
}

}  // namespace peregrine::passes
