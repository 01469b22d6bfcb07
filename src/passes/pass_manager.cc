#include "passes/pass_manager.h"

#include <chrono>

#include "ir/verifier.h"

namespace peregrine::passes {

Expected<bool> run_pass_recursively(Pass& pass, ir::Graph& graph) {
  bool changed = false;
  if (pass.runs_on_subgraphs()) {
    for (auto& n : graph.nodes)
      for (auto& [key, a] : n->attributes) {
        if (a.g) {
          PG_ASSIGN_OR_RETURN(bool c, run_pass_recursively(pass, *a.g));
          changed |= c;
        }
        for (auto& sg : a.graphs) {
          PG_ASSIGN_OR_RETURN(bool c, run_pass_recursively(pass, *sg));
          changed |= c;
        }
      }
  }
  PG_ASSIGN_OR_RETURN(bool c, pass.run(graph));
  return changed || c;
}

Status PassManager::run(ir::Graph& graph, std::vector<PassStats>* stats) {
  for (auto& pass : passes_) {
    PassStats s;
    s.name = pass->name();
    s.nodes_before = graph.nodes.size();
    pass->reset_rewrites();
    const auto t0 = std::chrono::steady_clock::now();
    auto changed = run_pass_recursively(*pass, graph);
    if (!changed.is_ok()) return changed.status().with_context("pass " + s.name);
    // A broken graph here is a pass bug: name the pass.
    if (*changed) {
      Status st = ir::verify_and_sort(graph);
      if (!st.is_ok())
        return internal_error("pass " + s.name + " left an invalid graph: " + st.message());
    }
    s.millis = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                   .count();
    s.rewrites = pass->rewrites();
    s.nodes_after = graph.nodes.size();
    if (stats) stats->push_back(std::move(s));
  }
  return Status::ok();
}

}  // namespace peregrine::passes
