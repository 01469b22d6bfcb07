// The explicit list of reference kernel families (mirrors ops/op_list.h).
#pragma once

#include "backends/reference/reference_backend.h"

namespace peregrine {

void register_elementwise_kernels(KernelRegistry& r);
void register_activation_kernels(KernelRegistry& r);
void register_cast_kernels(KernelRegistry& r);
void register_quantize_kernels(KernelRegistry& r);
void register_tensor_shape_kernels(KernelRegistry& r);
void register_gather_scatter_kernels(KernelRegistry& r);
void register_conv_kernels(KernelRegistry& r);
void register_pool_kernels(KernelRegistry& r);
void register_normalization_kernels(KernelRegistry& r);
void register_matmul_kernels(KernelRegistry& r);
void register_reduce_kernels(KernelRegistry& r);
void register_softmax_kernels(KernelRegistry& r);
void register_loss_kernels(KernelRegistry& r);
void register_resize_kernels(KernelRegistry& r);
void register_detection_kernels(KernelRegistry& r);
void register_rnn_kernels(KernelRegistry& r);
void register_string_kernels(KernelRegistry& r);
void register_signal_kernels(KernelRegistry& r);
void register_sequence_kernels(KernelRegistry& r);
void register_training_kernels(KernelRegistry& r);
void register_ml_kernels(KernelRegistry& r);
void register_control_flow_kernels(KernelRegistry& r);
void register_generator_kernels(KernelRegistry& r);
void register_transformer_kernels(KernelRegistry& r);
void register_fused_kernels(KernelRegistry& r);

inline void register_all_reference_kernels(KernelRegistry& r) {
  register_elementwise_kernels(r);
  register_activation_kernels(r);
  register_cast_kernels(r);
  register_quantize_kernels(r);
  register_tensor_shape_kernels(r);
  register_gather_scatter_kernels(r);
  register_conv_kernels(r);
  register_pool_kernels(r);
  register_normalization_kernels(r);
  register_matmul_kernels(r);
  register_reduce_kernels(r);
  register_softmax_kernels(r);
  register_loss_kernels(r);
  register_resize_kernels(r);
  register_detection_kernels(r);
  register_rnn_kernels(r);
  register_string_kernels(r);
  register_signal_kernels(r);
  register_sequence_kernels(r);
  register_training_kernels(r);
  register_ml_kernels(r);
  register_control_flow_kernels(r);
  register_generator_kernels(r);
  register_transformer_kernels(r);
  register_fused_kernels(r);  // last: builds on the families above
}

}  // namespace peregrine
