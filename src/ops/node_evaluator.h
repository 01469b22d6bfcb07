// Computing one node from concrete inputs, as the layers below the backends see it: type
// inference propagates constants and passes fold them through this interface, and whoever
// holds a backend (the session, the CLI, tests) hands them an implementation
// (backends/reference/evaluate.h: reference_evaluator()).
#pragma once

#include <vector>

#include "ir/graph.h"
#include "peregrine/runtime_value.h"
#include "peregrine/status.h"

namespace peregrine {

class NodeEvaluator {
 public:
  virtual ~NodeEvaluator() = default;
  // Whether evaluate() has a kernel for the node's op.
  virtual bool supports(const ir::Node& node) const = 0;
  // The node's outputs for `inputs` (nullptr: an omitted optional input). Nodes with subgraphs
  // are not supported (there is no scope to run them in).
  virtual Expected<std::vector<RuntimeValue>> evaluate(
      const ir::Node& node, const std::vector<const RuntimeValue*>& inputs) const = 0;
};

}  // namespace peregrine
