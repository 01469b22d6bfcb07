// Static shape and type inference over a whole graph, with constant propagation:
// a node whose inputs are all known (initializers, Shape of a static tensor, ...)
// and small is evaluated (by the caller's NodeEvaluator, the reference kernels), so the
// Shape -> Gather -> Concat -> Reshape chains of exported models end in static shapes.
#pragma once

#include <map>
#include <string>

#include "ir/graph.h"
#include "ops/node_evaluator.h"
#include "peregrine/runtime_value.h"

namespace peregrine {

struct InferenceResult {
  std::map<std::string, Tensor> known_values;  // values computed at load time
};

// Graph input types must already be set (declared or overridden by the user).
// `evaluator` computes the small nodes whose inputs are all known; `outer` maps names visible
// from enclosing graphs to their types.
Expected<InferenceResult> infer_graph_types(ir::Graph& graph, const NodeEvaluator& evaluator,
                                            const std::map<std::string, ir::ValueType>& outer = {});

// The type a concrete runtime value has.
ir::ValueType type_of(const RuntimeValue& v);

// Does the op produce the same output for the same inputs (safe to fold)?
bool is_deterministic_op(const ir::Node& node);

}  // namespace peregrine
