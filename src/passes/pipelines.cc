#include "passes/pipelines.h"

#include <algorithm>
#include <functional>
#include <map>

#include "passes/pass_list.h"

namespace peregrine::passes {

namespace {

using Factory = std::function<std::unique_ptr<Pass>(const NodeEvaluator&)>;

// A factory of a pass that computes no constants.
template <std::unique_ptr<Pass> (*make)()>
std::unique_ptr<Pass> plain(const NodeEvaluator&) {
  return make();
}

const std::map<std::string, Factory>& factories() {
  static const std::map<std::string, Factory> kFactories = {
      {"constant_folding", make_constant_folding},
      {"dead_code_elimination", plain<make_dead_code_elimination>},
      {"common_subexpression_elimination", plain<make_common_subexpression_elimination>},
      {"float16_to_float32", plain<make_float16_to_float32>},
      {"remove_identity_ops", plain<make_remove_identity_ops>},
      {"collapse_reshape_chains", plain<make_collapse_reshape_chains>},
      {"collapse_transpose_chains", plain<make_collapse_transpose_chains>},
      {"move_transposes", plain<make_move_transposes>},
      {"conv_batchnorm_folding", plain<make_conv_batchnorm_folding>},
      {"matmul_add_to_gemm", plain<make_matmul_add_to_gemm>},
      {"matmul_transposed_weight", plain<make_matmul_transposed_weight>},
      {"fuse_activation", plain<make_fuse_activation>},
      {"layer_norm_fusion", plain<make_layer_norm_fusion>},
      {"rms_norm_fusion", plain<make_rms_norm_fusion>},
      {"gelu_fusion", plain<make_gelu_fusion>},
      {"fold_constant_adds", plain<make_fold_constant_adds>},
      {"attention_fusion", plain<make_attention_fusion>},
      {"onnx_attention_to_fused", plain<make_onnx_attention_to_fused>},
      {"elementwise_chain_fusion", plain<make_elementwise_chain_fusion>},
      {"layout_nhwc", plain<make_layout_nhwc>},
      {"fuse_qdq_conv", plain<make_fuse_qdq_conv>},
      {"fuse_qdq_add", plain<make_fuse_qdq_add>},
      {"fuse_qdq_max_pool", plain<make_fuse_qdq_max_pool>},
      {"fuse_qdq_matmul", plain<make_fuse_qdq_matmul>},
      {"fuse_qdq_lookup_table", make_fuse_qdq_lookup_table},
      {"fuse_quantize_dequantize", plain<make_fuse_quantize_dequantize>},
      {"drop_repeated_fake_quantize", plain<make_drop_repeated_fake_quantize>},
      {"move_dequantize_after_gather", plain<make_move_dequantize_after_gather>},
  };
  return kFactories;
}

const std::vector<std::string> kWiden = {"float16_to_float32"};

// Cleanup runs twice: folding exposes identities and dead code, and those expose
// more folding (Shape -> Gather -> Concat -> Reshape chains).
const std::vector<std::string> kCleanup = {
    "remove_identity_ops",  "constant_folding",          "collapse_reshape_chains",
    "collapse_transpose_chains", "common_subexpression_elimination", "dead_code_elimination",
    "remove_identity_ops",  "constant_folding",          "dead_code_elimination",
};

// Order matters: GELU and attention are matched before their MatMuls are fused with
// activations; constant adds fold into one (windowed attention's bias and mask) before attention
// is matched; BN folds into Conv before Conv takes an activation; RMS norm after layer norm
// (a layer norm's variance tail is an RMS norm of x - mean); transposes move down elementwise
// runs once attention has taken its own, so pairs meet and collapse and the runs they split
// reach fuse_activation and the elementwise chains; elementwise chains last, from what the
// pattern fusions and fuse_activation left.
const std::vector<std::string> kFusion = {
    "conv_batchnorm_folding",    "gelu_fusion",
    "layer_norm_fusion",         "rms_norm_fusion",
    "fold_constant_adds",        "attention_fusion",
    "onnx_attention_to_fused",   "move_transposes",
    "collapse_transpose_chains", "matmul_add_to_gemm",
    "matmul_transposed_weight",  "fuse_activation",
    "elementwise_chain_fusion",  "dead_code_elimination",
};

// -O2: QDQ patterns become integer ops first, while DequantizeLinear of the weights still
// shows them (cleanup's constant folding turns those into float32 weights); then the weights'
// DequantizeLinear nodes the fusions left without readers go, before folding would evaluate
// them.
const std::vector<std::string> kQuantized = {"fuse_qdq_conv",
                                             "fuse_qdq_matmul",
                                             "fuse_qdq_add",
                                             "fuse_qdq_max_pool",
                                             "fuse_qdq_lookup_table",
                                             "move_dequantize_after_gather",
                                             "fuse_quantize_dequantize",
                                             "drop_repeated_fake_quantize",
                                             "dead_code_elimination"};
// -O3: activation layout for the CPU conv kernels, after fusion has settled the convs.
const std::vector<std::string> kLayout = {"layout_nhwc"};

}  // namespace

std::vector<std::string> all_pass_names() {
  std::vector<std::string> names;
  for (const auto& [name, f] : factories()) names.push_back(name);
  return names;
}

Expected<std::vector<std::string>> pipeline_pass_names(int level,
                                                       const std::vector<std::string>& disabled) {
  if (level < 0 || level > 3)
    return invalid_input("optimization level must be 0..3, got " + std::to_string(level));
  for (const auto& d : disabled)
    if (!factories().count(d)) {
      std::string known;
      for (const auto& n : all_pass_names()) known += (known.empty() ? "" : ", ") + n;
      return invalid_input("--disable-pass: unknown pass '" + d + "' (known: " + known + ")");
    }
  std::vector<std::string> names;
  // 16-bit float models compute in float32 from -O1 on: everything after sees float32.
  if (level >= 1) names = kWiden;
  if (level >= 2) names.insert(names.end(), kQuantized.begin(), kQuantized.end());
  if (level >= 1) names.insert(names.end(), kCleanup.begin(), kCleanup.end());
  if (level >= 2) names.insert(names.end(), kFusion.begin(), kFusion.end());
  if (level >= 3) names.insert(names.end(), kLayout.begin(), kLayout.end());
  std::erase_if(names, [&](const std::string& n) {
    return std::find(disabled.begin(), disabled.end(), n) != disabled.end();
  });
  return names;
}

Expected<PassManager> make_pipeline(int level, const NodeEvaluator& evaluator,
                                    const std::vector<std::string>& disabled) {
  PG_ASSIGN_OR_RETURN(auto names, pipeline_pass_names(level, disabled));
  PassManager pm;
  for (const auto& n : names) pm.add(factories().at(n)(evaluator));
  return pm;
}

Status optimize_graph(ir::Graph& graph, int level, const NodeEvaluator& evaluator,
                      const std::vector<std::string>& disabled, std::vector<PassStats>* stats) {
  PG_ASSIGN_OR_RETURN(PassManager pm, make_pipeline(level, evaluator, disabled));
  return pm.run(graph, stats);
}

Status prepare_for_quantization(ir::Graph& graph, const NodeEvaluator& evaluator) {
  PassManager pm;
  for (const auto& n : kCleanup) pm.add(factories().at(n)(evaluator));
  for (const char* n : {"conv_batchnorm_folding", "dead_code_elimination"})
    pm.add(factories().at(n)(evaluator));
  return pm.run(graph, nullptr);
}

}  // namespace peregrine::passes
