// Runs a graph: a fixed list of (node, prepared kernel) steps in topological
// order. Before each step the schema recomputes output types from the real inputs
// (so data-dependent shapes work); after it the outputs are checked against them.
// Values are released after their last use.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ir/graph.h"

namespace peregrine {

// Names visible to a graph: its own values, then the enclosing graphs'.
struct Scope {
  const std::map<std::string, RuntimeValue>* values = nullptr;
  const Scope* parent = nullptr;
  const RuntimeValue* find(const std::string& name) const;
};

// Called after each node with its wall time; the profiler hooks in here.
struct NodeTiming {
  const ir::Node* node;
  double start_us;
  double duration_us;
  std::string kernel;
};

class GraphExecutor {
 public:
  // Prepares a kernel for every node (backends tried in order, reference last).
  static Expected<std::unique_ptr<GraphExecutor>> create(const ir::Graph& graph,
                                                         std::vector<const Backend*> backends,
                                                         int num_threads);

  // `inputs` holds the graph inputs by name; returns the graph outputs in order.
  Expected<std::vector<RuntimeValue>> run(const std::map<std::string, RuntimeValue>& inputs,
                                          const Scope* outer,
                                          std::vector<NodeTiming>* timings = nullptr);
  const ir::Graph& graph() const { return graph_; }

 private:
  GraphExecutor(const ir::Graph& graph, int num_threads) : graph_(graph), num_threads_(num_threads) {}
  Expected<std::vector<RuntimeValue>> run_subgraph(const ir::Graph& g,
                                                   const std::vector<RuntimeValue>& inputs,
                                                   const Scope* scope);

  const ir::Graph& graph_;
  int num_threads_;
  std::vector<const Backend*> backends_;
  std::vector<std::unique_ptr<PreparedKernel>> kernels_;  // one per node
  std::vector<std::vector<std::string>> release_after_;   // values dead after node i
  std::map<const ir::Graph*, std::unique_ptr<GraphExecutor>> subgraph_executors_;
};

}  // namespace peregrine
