// dead_code_elimination
//   Matches:  nodes none of whose outputs is read (by a node, a subgraph or as a
//             graph output); initializers and value entries nothing refers to.
//   Produces: the graph without them. Walks backwards so whole dead chains go at once.
//   Preconditions: none (ONNX ops have no side effects).
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

class DeadCodeElimination : public Pass {
 public:
  const char* name() const override { return "dead_code_elimination"; }
  Expected<bool> run(ir::Graph& g) override {
    GraphIndex index(g);
    // Live uses per value; decremented as dead readers go.
    std::map<std::string, size_t> live;
    for (const auto& n : g.nodes)
      for (const auto& o : n->outputs)
        if (!o.empty()) live[o] = index.uses(o).size() + (index.is_graph_output(o) ? 1 : 0);
    std::set<const ir::Node*> dead;
    for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
      ir::Node& n = **it;
      bool used = false;
      for (const auto& o : n.outputs) used |= !o.empty() && live[o] > 0;
      if (used) continue;
      dead.insert(&n);
      // Each input slot and each subgraph read was counted as one use.
      for (const auto& in : n.inputs)
        if (!in.empty() && live.count(in)) --live[in];
      for (const auto& u : uses_from_subgraphs(index, n))
        if (live.count(u)) --live[u];
    }
    remove_nodes(g, dead);
    count_rewrite(static_cast<int>(dead.size()));
    bool changed = !dead.empty();
    // Initializers and type entries nobody reads any more.
    GraphIndex after(g);
    std::set<std::string> produced(g.inputs.begin(), g.inputs.end());
    for (const auto& n : g.nodes)
      for (const auto& o : n->outputs) produced.insert(o);
    for (auto it = g.values.begin(); it != g.values.end();) {
      const std::string& name = it->first;
      bool referenced = after.is_graph_output(name) || !after.uses(name).empty() ||
                        produced.count(name);
      if (!referenced) {
        changed |= it->second.initializer.has_value();
        it = g.values.erase(it);
      } else {
        ++it;
      }
    }
    return changed;
  }

 private:
  // Values a node's subgraphs read from outside (each counted once per node by GraphIndex).
  static std::vector<std::string> uses_from_subgraphs(const GraphIndex& index, const ir::Node& n) {
    std::vector<std::string> out;
    if (!has_subgraph(n)) return out;
    for (const auto& [key, a] : n.attributes) {
      std::vector<const ir::Graph*> subs;
      if (a.g) subs.push_back(a.g.get());
      for (const auto& sg : a.graphs) subs.push_back(sg.get());
      for (const ir::Graph* sg : subs)
        for (const auto& fv : ir::free_variables(*sg)) out.push_back(fv);
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Pass> make_dead_code_elimination() {
  return std::make_unique<DeadCodeElimination>();
}

}  // namespace peregrine::passes
