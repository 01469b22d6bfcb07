// Structural rules of a graph: every input is defined before use (in this graph or
// an enclosing one), every value has one producer, no cycles. Sorts nodes
// topologically (ONNX asks exporters to, not all do).
#pragma once

#include <set>
#include <string>

#include "ir/graph.h"

namespace peregrine::ir {

// `outer` holds the names visible from enclosing graphs.
Status verify_and_sort(Graph& graph, const std::set<std::string>& outer = {});

// Names a graph reads that it does not define itself (its outer-scope references).
std::set<std::string> free_variables(const Graph& graph);

}  // namespace peregrine::ir
