// Factories of every pass (one pass per file). pipelines.cc orders them into levels. Passes that
// compute constants take the NodeEvaluator the pipeline was built with.
#pragma once

#include <memory>

#include "ops/node_evaluator.h"
#include "passes/pass.h"

namespace peregrine::passes {

// Cleanup.
std::unique_ptr<Pass> make_float16_to_float32();
std::unique_ptr<Pass> make_constant_folding(const NodeEvaluator& evaluator);
std::unique_ptr<Pass> make_dead_code_elimination();
std::unique_ptr<Pass> make_common_subexpression_elimination();
std::unique_ptr<Pass> make_remove_identity_ops();
std::unique_ptr<Pass> make_collapse_reshape_chains();
std::unique_ptr<Pass> make_collapse_transpose_chains();
std::unique_ptr<Pass> make_move_transposes();
// Quantized (QDQ) patterns, before folding.
std::unique_ptr<Pass> make_fuse_qdq_conv();
std::unique_ptr<Pass> make_fuse_qdq_add();
std::unique_ptr<Pass> make_fuse_qdq_max_pool();
std::unique_ptr<Pass> make_fuse_qdq_matmul();
std::unique_ptr<Pass> make_fuse_qdq_lookup_table(const NodeEvaluator& evaluator);
std::unique_ptr<Pass> make_fuse_quantize_dequantize();
std::unique_ptr<Pass> make_drop_repeated_fake_quantize();
std::unique_ptr<Pass> make_move_dequantize_after_gather();
// Fusion.
std::unique_ptr<Pass> make_conv_batchnorm_folding();
std::unique_ptr<Pass> make_matmul_add_to_gemm();
std::unique_ptr<Pass> make_matmul_transposed_weight();
std::unique_ptr<Pass> make_fuse_activation();
std::unique_ptr<Pass> make_layer_norm_fusion();
std::unique_ptr<Pass> make_rms_norm_fusion();
std::unique_ptr<Pass> make_gelu_fusion();
std::unique_ptr<Pass> make_fold_constant_adds();
std::unique_ptr<Pass> make_attention_fusion();
std::unique_ptr<Pass> make_onnx_attention_to_fused();
std::unique_ptr<Pass> make_elementwise_chain_fusion();
// Layout (-O3).
std::unique_ptr<Pass> make_layout_nhwc();

}  // namespace peregrine::passes
