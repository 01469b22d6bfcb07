// Liveness of a graph's intermediate tensors: for every value a node of this graph produces
// that is neither a graph output nor an initializer, the steps (node indices) from its
// producer to its last reader. A value read by a subgraph of node i lives until node i ends.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace peregrine::planner {

struct ValueLifetime {
  std::string name;
  int first = 0;        // producer step
  int last = 0;         // last reader step (== first when nothing reads it)
  int64_t bytes = -1;   // size from the load-time type; -1 when not static (not plannable)
  DType dtype = DType::kUndefined;
  Shape dims;           // static shape when bytes >= 0
};

// In step order of the producers. Values with a static tensor type (and a numeric dtype) get
// their byte size; the rest (dynamic shapes, sequences, strings) keep bytes == -1.
std::vector<ValueLifetime> compute_liveness(const ir::Graph& graph);

}  // namespace peregrine::planner
