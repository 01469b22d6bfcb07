// Runs an ordered list of passes over a graph and its subgraphs. After every pass
// that changed something the graph is verified and re-sorted (passes may append
// nodes out of order); the check is cheap, so it runs in every build.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace peregrine::passes {

// What one pass did, for `peregrine compile --verbose`.
struct PassStats {
  std::string name;
  int rewrites = 0;
  size_t nodes_before = 0;  // top-level graph
  size_t nodes_after = 0;
  double millis = 0;
};

class PassManager {
 public:
  void add(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }
  const std::vector<std::unique_ptr<Pass>>& passes() const { return passes_; }
  // Runs every pass once, in order. Stats get one entry per pass.
  Status run(ir::Graph& graph, std::vector<PassStats>* stats = nullptr);

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
};

// Runs one pass on `graph`, then on its subgraphs if the pass allows it.
Expected<bool> run_pass_recursively(Pass& pass, ir::Graph& graph);

}  // namespace peregrine::passes
