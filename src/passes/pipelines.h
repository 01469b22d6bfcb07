// Optimization levels and the pass lists behind them (all in pipelines.cc):
//   O0: nothing.  O1: cleanup.  O2 (default): cleanup + fusion.  O3: O2 for now
//   (layout and measured choices will go here).
#pragma once

#include <string>
#include <vector>

#include "ops/node_evaluator.h"
#include "passes/pass_manager.h"

namespace peregrine::passes {

inline constexpr int kDefaultOptLevel = 2;

// Every pass name any level uses (for validating --disable-pass).
std::vector<std::string> all_pass_names();
// The pass names of a level, in order (disabled ones removed).
Expected<std::vector<std::string>> pipeline_pass_names(int opt_level,
                                                       const std::vector<std::string>& disabled);
// A manager with the level's passes; unknown disabled names are an error. Passes that fold
// constants compute them with `evaluator` (the caller's backend: reference_evaluator()), which
// must outlive the manager.
Expected<PassManager> make_pipeline(int opt_level, const NodeEvaluator& evaluator,
                                    const std::vector<std::string>& disabled = {});
// Builds the pipeline and runs it on the graph.
Status optimize_graph(ir::Graph& graph, int opt_level, const NodeEvaluator& evaluator,
                      const std::vector<std::string>& disabled = {},
                      std::vector<PassStats>* stats = nullptr);

// Before post-training quantization: the cleanup passes and batch-norm folding, which keep the
// graph in standard ONNX (no fused ops), so a BatchNormalization never sits between a conv and
// the quantization of its output.
Status prepare_for_quantization(ir::Graph& graph, const NodeEvaluator& evaluator);

}  // namespace peregrine::passes
