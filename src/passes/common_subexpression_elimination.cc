// common_subexpression_elimination
//   Matches:  two deterministic nodes with the same op, domain, inputs and
//             attributes (no subgraphs); also identical small initializers.
//   Produces: readers of the later node's outputs read the earlier node's; the later
//             node is left for dead_code_elimination.
//   Preconditions: the later node's outputs are not graph outputs and are not read
//             from inside subgraphs (renaming there is not attempted).
#include <map>

#include "ops/type_inference.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

// Constants up to this many elements are compared and merged.
constexpr int64_t kMaxMergeElements = 64;

bool same_computation(const ir::Node& a, const ir::Node& b) {
  if (a.op_type != b.op_type || a.domain != b.domain || a.opset != b.opset ||
      a.inputs != b.inputs || a.outputs.size() != b.outputs.size() ||
      a.attributes.size() != b.attributes.size())
    return false;
  for (const auto& [key, attr] : a.attributes) {
    const ir::Attribute* other = b.attribute(key);
    if (!other || !attributes_equal(attr, *other)) return false;
  }
  return true;
}

bool replaceable(const GraphIndex& index, const ir::Node& n) {
  for (const auto& o : n.outputs)
    if (!o.empty() && !index.only_local_uses(o)) return false;
  return true;
}

class CommonSubexpressionElimination : public Pass {
 public:
  const char* name() const override { return "common_subexpression_elimination"; }
  Expected<bool> run(ir::Graph& g) override {
    bool changed = merge_constants(g);
    GraphIndex index(g);
    // Candidates bucketed by (op, first input) to avoid comparing every pair.
    std::map<std::pair<std::string, std::string>, std::vector<ir::Node*>> seen;
    std::set<const ir::Node*> dead;
    for (auto& node_ptr : g.nodes) {
      ir::Node& n = *node_ptr;
      if (!is_deterministic_op(n) || has_subgraph(n) || n.outputs.empty()) continue;
      auto key = std::make_pair(n.domain + "::" + n.op_type, n.inputs.empty() ? "" : n.inputs[0]);
      ir::Node* twin = nullptr;
      for (ir::Node* c : seen[key])
        if (same_computation(*c, n)) {
          twin = c;
          break;
        }
      if (!twin) {
        seen[key].push_back(&n);
        continue;
      }
      bool outputs_match = true;
      for (size_t i = 0; i < n.outputs.size(); ++i)
        outputs_match &= n.outputs[i].empty() || !twin->outputs[i].empty();
      if (!outputs_match || !replaceable(index, n)) continue;
      for (size_t i = 0; i < n.outputs.size(); ++i)
        if (!n.outputs[i].empty()) replace_uses(g, n.outputs[i], twin->outputs[i]);
      dead.insert(&n);
      count_rewrite();
    }
    remove_nodes(g, dead);
    return changed || !dead.empty();
  }

 private:
  // Folded shape constants repeat a lot ([0, 0, 12, 64] per layer); merging them lets
  // the nodes reading them merge too.
  bool merge_constants(ir::Graph& g) {
    GraphIndex index(g);
    std::vector<std::string> kept;
    std::map<std::string, std::string> rename;
    for (const auto& [name, v] : g.values) {
      if (!v.initializer || v.initializer->numel() > kMaxMergeElements ||
          v.initializer->dtype() == DType::kString || !index.only_local_uses(name))
        continue;
      std::string twin;
      for (const auto& k : kept)
        if (tensors_equal(*g.values.at(k).initializer, *v.initializer)) {
          twin = k;
          break;
        }
      if (twin.empty()) kept.push_back(name);
      else rename[name] = twin;
    }
    if (rename.empty()) return false;
    for (auto& n : g.nodes)
      for (auto& in : n->inputs) {
        auto it = rename.find(in);
        if (it != rename.end()) in = it->second;
      }
    for (const auto& [from, to] : rename) g.values.erase(from);
    count_rewrite(static_cast<int>(rename.size()));
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_common_subexpression_elimination() {
  return std::make_unique<CommonSubexpressionElimination>();
}

}  // namespace peregrine::passes
