// The CPU backend's memory-bound float32 ops, on the vector micro-kernels of
// ukernels/f32_vector_ukernels.h (chosen from selected_isa() when the kernel is prepared):
//   kernels/elementwise.cc        Add Sub Mul Div (broadcasting), Relu Sigmoid Tanh Erf Exp Gelu
//   kernels/softmax_layernorm.cc  Softmax (contiguous rows), LayerNormalization (also the
//                                 peregrine-domain Gelu / LayerNormalization aliases),
//                                 peregrine.RMSNormalization
//   kernels/elementwise_chain.cc  peregrine.ElementwiseChain (a fused elementwise program)
//   kernels/pool.cc               2-D MaxPool / AveragePool, GlobalAveragePool, GlobalMaxPool
//   kernels/reduce.cc             Reduce* over any axes
//   kernels/elementwise_map.cc    the other unary maps, Pow Max Min PRelu, comparisons, Where
// Which node runs which kernel: kernel_table.cc.
// claims_*() looks only at the node (op, domain, static attributes); at run time a kernel that
// meets a case it does not handle (another dtype, rank, an Indices output) runs the reference.
#pragma once

#include <memory>
#include <vector>

#include "backends/backend.h"

namespace peregrine::cpu {

bool claims_elementwise(const ir::Node& node);
Expected<std::unique_ptr<PreparedKernel>> prepare_elementwise(const ir::Node& node);
bool claims_softmax_layernorm(const ir::Node& node);
Expected<std::unique_ptr<PreparedKernel>> prepare_softmax_layernorm(const ir::Node& node);
bool claims_pool(const ir::Node& node);
Expected<std::unique_ptr<PreparedKernel>> prepare_pool(const ir::Node& node);
bool claims_elementwise_chain(const ir::Node& node);
Expected<std::unique_ptr<PreparedKernel>> prepare_elementwise_chain(const ir::Node& node);

// Reductions (kernels/reduce.cc).
bool claims_reduce(const ir::Node& node);
Expected<std::unique_ptr<PreparedKernel>> prepare_reduce(const ir::Node& node);
// Resize mode=linear on the two trailing axes of a 4-D tensor (kernels/resize_linear.cc).
bool claims_resize_linear(const ir::Node& node);
Expected<std::unique_ptr<PreparedKernel>> prepare_resize_linear(const ir::Node& node);
// LSTM / GRU / RNN: the sequence's input projection as one GEMM, packed recurrent weights
// (kernels/rnn.cc).
bool claims_recurrent(const ir::Node& node);
Expected<std::unique_ptr<PreparedKernel>> prepare_recurrent(
    const ir::Node& node, const std::vector<const Tensor*>& constants);
// InstanceNormalization, inference BatchNormalization (kernels/normalization.cc).
bool claims_plane_norm(const ir::Node& node);
Expected<std::unique_ptr<PreparedKernel>> prepare_plane_norm(const ir::Node& node);
// RotaryEmbedding (ONNX 23), float32 (kernels/rotary_embedding.cc).
Expected<std::unique_ptr<PreparedKernel>> prepare_rotary_embedding(const ir::Node& node);
// Two-operand Einsum as batched GEMM (kernels/einsum.cc).
bool claims_einsum(const ir::Node& node);
Expected<std::unique_ptr<PreparedKernel>> prepare_einsum(const ir::Node& node);
// GridSample, 4-D, linear / nearest (kernels/grid_sample.cc).
bool claims_grid_sample(const ir::Node& node);
Expected<std::unique_ptr<PreparedKernel>> prepare_grid_sample(const ir::Node& node);
// Unary maps with parameters, Pow / Max / Min / PRelu, comparisons, logic and Where, with
// broadcasting (kernels/elementwise_map.cc).
bool claims_elementwise_map(const ir::Node& node);
Expected<std::unique_ptr<PreparedKernel>> prepare_elementwise_map(const ir::Node& node);

// Cast between float32 and float16 / bfloat16; other pairs run the reference (kernels/cast.cc).
Expected<std::unique_ptr<PreparedKernel>> prepare_cast(const ir::Node& node);

// QuantizeLinear / DequantizeLinear between float32 and 8-bit integers, per tensor or per
// axis (kernels/quantize_linear.cc).
bool claims_quantize_linear(const ir::Node& node);
Expected<std::unique_ptr<PreparedKernel>> prepare_quantize_linear(const ir::Node& node);
// peregrine.QLinearAdd (kernels/quantize_linear.cc).
Expected<std::unique_ptr<PreparedKernel>> prepare_qlinear_add(const ir::Node& node);
// peregrine.QuantizeDequantize, float32 to float32 (kernels/quantize_linear.cc).
Expected<std::unique_ptr<PreparedKernel>> prepare_quantize_dequantize(const ir::Node& node);
// peregrine.TableLookup, 8-bit to 8-bit through a 256-byte table (kernels/quantize_linear.cc).
Expected<std::unique_ptr<PreparedKernel>> prepare_table_lookup(const ir::Node& node);

// QLinearConv, 2-D, uint8 x int8 on the integer GEMM (kernels/qlinear_conv.cc). `constants`
// holds every initializer input, of any dtype.
Expected<std::unique_ptr<PreparedKernel>> prepare_qlinear_conv(
    const ir::Node& node, const std::vector<const Tensor*>& constants);

// peregrine.QGemm, uint8 x int8 on the integer GEMM (kernels/qgemm.cc); `constants` as for
// QLinearConv.
Expected<std::unique_ptr<PreparedKernel>> prepare_qgemm(
    const ir::Node& node, const std::vector<const Tensor*>& constants);

// Elements per thread-pool task for streaming kernels: big enough to amortize a task claim,
// small enough to balance a few threads over one activation tensor.
inline constexpr int64_t kElementsPerTask = 16384;

}  // namespace peregrine::cpu
