// The explicit list of op families. Each family file registers its schemas;
// adding a family means adding one line here and one in kernel_list.h.
#pragma once

#include "ops/op_schema.h"

namespace peregrine {

void register_elementwise_schemas(SchemaRegistry& r);
void register_activation_schemas(SchemaRegistry& r);
void register_cast_schemas(SchemaRegistry& r);
void register_quantize_schemas(SchemaRegistry& r);
void register_tensor_shape_schemas(SchemaRegistry& r);
void register_gather_scatter_schemas(SchemaRegistry& r);
void register_conv_schemas(SchemaRegistry& r);
void register_pool_schemas(SchemaRegistry& r);
void register_normalization_schemas(SchemaRegistry& r);
void register_matmul_schemas(SchemaRegistry& r);
void register_reduce_schemas(SchemaRegistry& r);
void register_softmax_schemas(SchemaRegistry& r);
void register_loss_schemas(SchemaRegistry& r);
void register_resize_schemas(SchemaRegistry& r);
void register_detection_schemas(SchemaRegistry& r);
void register_rnn_schemas(SchemaRegistry& r);
void register_string_schemas(SchemaRegistry& r);
void register_signal_schemas(SchemaRegistry& r);
void register_sequence_schemas(SchemaRegistry& r);
void register_training_schemas(SchemaRegistry& r);
void register_ml_schemas(SchemaRegistry& r);
void register_control_flow_schemas(SchemaRegistry& r);
void register_generator_schemas(SchemaRegistry& r);
void register_transformer_schemas(SchemaRegistry& r);
void register_fused_schemas(SchemaRegistry& r);

inline void register_all_schemas(SchemaRegistry& r) {
  register_elementwise_schemas(r);
  register_activation_schemas(r);
  register_cast_schemas(r);
  register_quantize_schemas(r);
  register_tensor_shape_schemas(r);
  register_gather_scatter_schemas(r);
  register_conv_schemas(r);
  register_pool_schemas(r);
  register_normalization_schemas(r);
  register_matmul_schemas(r);
  register_reduce_schemas(r);
  register_softmax_schemas(r);
  register_loss_schemas(r);
  register_resize_schemas(r);
  register_detection_schemas(r);
  register_rnn_schemas(r);
  register_string_schemas(r);
  register_signal_schemas(r);
  register_sequence_schemas(r);
  register_training_schemas(r);
  register_ml_schemas(r);
  register_control_flow_schemas(r);
  register_generator_schemas(r);
  register_transformer_schemas(r);
  register_fused_schemas(r);  // last: builds on the families above
}

}  // namespace peregrine
