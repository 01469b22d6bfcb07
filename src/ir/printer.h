// A readable text form of a graph, one node per line:
//   %y: float32[1,64,56,56] = Conv(%x, %w) {kernel_shape=[3,3], pads=[1,1,1,1]}  # conv_12
// Subgraphs print indented under their node.
#pragma once

#include <string>

#include "ir/graph.h"

namespace peregrine::ir {

std::string print_graph(const Graph& graph, int indent = 0);

}  // namespace peregrine::ir
