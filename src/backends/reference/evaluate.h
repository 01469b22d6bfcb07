// Runs one node on the reference backend outside any plan: output types come from
// the op's schema applied to the concrete inputs, then the reference kernel runs.
// Used by constant folding and by fused-op reference kernels (which compose the
// unfused ops, so a fused op computes exactly what the graph it replaced did).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "ops/node_evaluator.h"
#include "peregrine/runtime_value.h"

namespace peregrine {

// `inputs[i]` may be nullptr for an omitted optional input. Nodes with subgraphs
// are not supported (there is no scope to run them in).
Expected<std::vector<RuntimeValue>> evaluate_on_reference(
    const ir::Node& node, const std::vector<const RuntimeValue*>& inputs);

// The reference kernels as the NodeEvaluator type inference and constant folding take.
const NodeEvaluator& reference_evaluator();

// A default-domain node for evaluate_tensor (opset 18 unless given).
ir::Node make_eval_node(const std::string& op_type, int opset = 18);

// Tensor convenience: evaluates `node` and returns its first output.
Expected<Tensor> evaluate_tensor(const ir::Node& node, const std::vector<const Tensor*>& inputs);

}  // namespace peregrine
