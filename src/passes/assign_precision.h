// assign_precision: the session's compute precision, written onto the nodes that have a
// reduced-precision kernel. Not one of the optimization levels' passes: it runs whenever a
// session asks for a precision, after them (fused nodes exist by then), at every level.
//
// Matches:  GEMM-class nodes (kReducedPrecisionOps: Conv, ConvTranspose, MatMul, Gemm, the
//           fused forms and peregrine.Attention) of the graph and of its If / Loop / Scan
//           bodies.
// Produces: node.precision = `precision` on each, except nodes kept in float32 by name or by
//           op type (`keep_fp32`, e.g. "node_Conv_754" or "Conv" / "peregrine.FusedConv").
//           Everything else stays float32: normalization, softmax, elementwise and data
//           movement compute in float32 whatever the session's precision.
// Preconditions: none. A `keep_fp32` entry that names no node and no op type of the graph is an
//           error (a typo would otherwise silently keep nothing).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "peregrine/precision.h"

namespace peregrine::passes {

// Returns how many nodes now compute in `precision` (0 for float32).
Expected<int> assign_precision(ir::Graph& graph, Precision precision,
                               const std::vector<std::string>& keep_fp32);

}  // namespace peregrine::passes
