#include "backends/cpu/kernel_table.h"

#include "backends/cpu/kernels/attention.h"
#include "backends/cpu/kernels/copy_ops.h"
#include "backends/cpu/kernels/vector_ops.h"
#include "ir/opset.h"
#include "ops/op_schema.h"

namespace peregrine::cpu {

namespace {

constexpr int kMax = kMaxOnnxOpset;

// Adapters from the families' prepare functions to the table's signature.
Expected<std::unique_ptr<PreparedKernel>> elementwise(const CpuPrepareArgs& a) {
  return prepare_elementwise(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> softmax_layernorm(const CpuPrepareArgs& a) {
  return prepare_softmax_layernorm(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> pool(const CpuPrepareArgs& a) {
  return prepare_pool(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> chain(const CpuPrepareArgs& a) {
  return prepare_elementwise_chain(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> reduce(const CpuPrepareArgs& a) {
  return prepare_reduce(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> elementwise_map(const CpuPrepareArgs& a) {
  return prepare_elementwise_map(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> concat_split(const CpuPrepareArgs& a) {
  return prepare_concat_split(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> resize_nearest(const CpuPrepareArgs& a) {
  return prepare_resize_nearest(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> resize_linear(const CpuPrepareArgs& a) {
  return prepare_resize_linear(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> recurrent(const CpuPrepareArgs& a) {
  return prepare_recurrent(a.node, a.constants);
}
Expected<std::unique_ptr<PreparedKernel>> plane_norm(const CpuPrepareArgs& a) {
  return prepare_plane_norm(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> rotary_embedding(const CpuPrepareArgs& a) {
  return prepare_rotary_embedding(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> einsum(const CpuPrepareArgs& a) {
  return prepare_einsum(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> grid_sample(const CpuPrepareArgs& a) {
  return prepare_grid_sample(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> transpose(const CpuPrepareArgs& a) {
  return prepare_transpose(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> transpose_nchw_nhwc(const CpuPrepareArgs& a) {
  return prepare_transpose_nchw_nhwc(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> map_copy(const CpuPrepareArgs& a) {
  return prepare_map_copy(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> view(const CpuPrepareArgs& a) {
  return prepare_view(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> attention(const CpuPrepareArgs& a) {
  return prepare_attention(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> cast(const CpuPrepareArgs& a) {
  return prepare_cast(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> quantize_linear(const CpuPrepareArgs& a) {
  return prepare_quantize_linear(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> qlinear_add(const CpuPrepareArgs& a) {
  return prepare_qlinear_add(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> quantize_dequantize(const CpuPrepareArgs& a) {
  return prepare_quantize_dequantize(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> table_lookup(const CpuPrepareArgs& a) {
  return prepare_table_lookup(a.node);
}
Expected<std::unique_ptr<PreparedKernel>> qgemm(const CpuPrepareArgs& a) {
  return prepare_qgemm(a.node, a.constants);
}
Expected<std::unique_ptr<PreparedKernel>> qlinear_conv(const CpuPrepareArgs& a) {
  return prepare_qlinear_conv(a.node, a.constants);
}
Expected<std::unique_ptr<PreparedKernel>> matmul(const CpuPrepareArgs& a) {
  return prepare_matmul(a.node, a.constants, a.fused);
}
Expected<std::unique_ptr<PreparedKernel>> gemm(const CpuPrepareArgs& a) {
  return prepare_gemm(a.node, a.constants, a.fused);
}
Expected<std::unique_ptr<PreparedKernel>> conv(const CpuPrepareArgs& a) {
  return prepare_conv(a.node, a.constants, a.fused);
}
Expected<std::unique_ptr<PreparedKernel>> conv_nhwc(const CpuPrepareArgs& a) {
  return prepare_conv_nhwc(a.node, a.constants, a.fused);
}
Expected<std::unique_ptr<PreparedKernel>> conv_transpose(const CpuPrepareArgs& a) {
  return prepare_conv_transpose(a.node, a.constants);
}

using R = DTypeRule;
constexpr std::string_view kPg = "peregrine";

// clang-format off
const CpuKernelEntry kCpuKernels[] = {
  // GEMM family: packed weights, fused epilogues (kernels/matmul.cc, conv*.cc).
  {"",  "MatMul",        1, kMax, R::kFloat32, nullptr, matmul, "kernels/matmul.cc"},
  {"",  "Gemm",          1, kMax, R::kFloat32, nullptr, gemm, "kernels/matmul.cc"},
  {kPg, "FusedMatMul",   1, 1,    R::kFloat32, nullptr, matmul, "kernels/matmul.cc"},
  {kPg, "FusedGemm",     1, 1,    R::kFloat32, nullptr, gemm, "kernels/matmul.cc"},
  {"",  "Conv",          1, kMax, R::kFloat32, nullptr, conv, "kernels/conv.cc"},
  {kPg, "FusedConv",     1, 1,    R::kFloat32, nullptr, conv, "kernels/conv.cc"},
  {kPg, "ConvNhwc",      1, 1,    R::kFloat32, nullptr, conv_nhwc, "kernels/conv_nhwc.cc"},
  {"",  "QLinearConv",   10, kMax, R::kQuantized, nullptr, qlinear_conv, "kernels/qlinear_conv.cc"},
  {kPg, "QGemm",         1, 1,    R::kQuantized, nullptr, qgemm, "kernels/qgemm.cc"},
  {"",  "ConvTranspose", 1, kMax, R::kFloat32, nullptr, conv_transpose, "kernels/conv_transpose.cc"},
  {kPg, "Attention",     1, 1,    R::kFloat32, nullptr, attention, "kernels/attention.cc"},
  {"",  "RotaryEmbedding", 23, kMax, R::kFloat32Data, nullptr, rotary_embedding, "kernels/rotary_embedding.cc"},
  {"",  "Einsum",        12, kMax, R::kFloat32, claims_einsum, einsum, "kernels/einsum.cc"},
  // Recurrent cells (kernels/rnn.cc).
  {"",  "LSTM",          7, kMax, R::kFloat32Data, claims_recurrent, recurrent, "kernels/rnn.cc"},
  {"",  "GRU",           7, kMax, R::kFloat32Data, claims_recurrent, recurrent, "kernels/rnn.cc"},
  {"",  "RNN",           7, kMax, R::kFloat32Data, claims_recurrent, recurrent, "kernels/rnn.cc"},
  // Elementwise on the vector micro-kernels (kernels/elementwise.cc).
  {"",  "Relu",          1, kMax, R::kFloat32, nullptr, elementwise, "kernels/elementwise.cc"},
  {"",  "Sigmoid",       1, kMax, R::kFloat32, nullptr, elementwise, "kernels/elementwise.cc"},
  {"",  "Tanh",          1, kMax, R::kFloat32, nullptr, elementwise, "kernels/elementwise.cc"},
  {"",  "Erf",           1, kMax, R::kFloat32, nullptr, elementwise, "kernels/elementwise.cc"},
  {"",  "Exp",           1, kMax, R::kFloat32, nullptr, elementwise, "kernels/elementwise.cc"},
  {"",  "Gelu",          1, kMax, R::kFloat32, claims_elementwise, elementwise, "kernels/elementwise.cc"},
  {kPg, "Gelu",          1, 1,    R::kFloat32, claims_elementwise, elementwise, "kernels/elementwise.cc"},
  {"",  "Add",           1, kMax, R::kFloat32, nullptr, elementwise, "kernels/elementwise.cc"},
  {"",  "Sub",           1, kMax, R::kFloat32, nullptr, elementwise, "kernels/elementwise.cc"},
  {"",  "Mul",           1, kMax, R::kFloat32, nullptr, elementwise, "kernels/elementwise.cc"},
  {"",  "Div",           1, kMax, R::kFloat32, nullptr, elementwise, "kernels/elementwise.cc"},
  {kPg, "ElementwiseChain", 1, 1, R::kFloat32, nullptr, chain, "kernels/elementwise_chain.cc"},
  // Elementwise maps, comparisons and selects with broadcasting (kernels/elementwise_map.cc).
  {"",  "Neg",           1, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Abs",           1, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Sqrt",          1, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Reciprocal",    1, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Floor",         1, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Ceil",          1, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Log",           1, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Softplus",      1, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Softsign",      1, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Mish",          1, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Swish",         24, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "HardSigmoid",   6, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "HardSwish",     1, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "LeakyRelu",     6, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Elu",           6, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Selu",          6, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Celu",          1, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Clip",          6, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Pow",           7, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Max",           8, kMax, R::kFloat32, claims_elementwise_map, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Min",           8, kMax, R::kFloat32, claims_elementwise_map, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "PRelu",         7, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Equal",         7, kMax, R::kAny,     nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Less",          7, kMax, R::kAny,     nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "LessOrEqual",   12, kMax, R::kAny,    nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Greater",       7, kMax, R::kAny,     nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "GreaterOrEqual", 12, kMax, R::kAny,   nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "And",           7, kMax, R::kAny,     nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Or",            7, kMax, R::kAny,     nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Not",           1, kMax, R::kAny,     nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "Where",         9, kMax, R::kAny,     nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  // Rows: Softmax, LayerNorm, RMSNorm (kernels/softmax_layernorm.cc).
  {"",  "Softmax",       1, kMax, R::kFloat32, nullptr, softmax_layernorm, "kernels/softmax_layernorm.cc"},
  {"",  "LayerNormalization", 1, kMax, R::kFloat32Data, nullptr, softmax_layernorm, "kernels/softmax_layernorm.cc"},
  {kPg, "LayerNormalization", 1, 1, R::kFloat32Data, nullptr, softmax_layernorm, "kernels/softmax_layernorm.cc"},
  {kPg, "RMSNormalization", 1, 1, R::kFloat32Data, nullptr, softmax_layernorm, "kernels/softmax_layernorm.cc"},
  {"",  "RMSNormalization", 23, kMax, R::kFloat32Data, nullptr, softmax_layernorm, "kernels/softmax_layernorm.cc"},
  {"",  "InstanceNormalization", 6, kMax, R::kFloat32, nullptr, plane_norm, "kernels/normalization.cc"},
  {"",  "BatchNormalization", 9, kMax, R::kFloat32, nullptr, plane_norm, "kernels/normalization.cc"},
  {"",  "IsNaN",         9, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  {"",  "IsInf",         10, kMax, R::kFloat32, nullptr, elementwise_map, "kernels/elementwise_map.cc"},
  // Pooling, 2-D windows and global (kernels/pool.cc).
  {"",  "MaxPool",       1, kMax, R::kFloat32Or8Bit, claims_pool, pool, "kernels/pool.cc"},
  {"",  "AveragePool",   1, kMax, R::kFloat32, claims_pool, pool, "kernels/pool.cc"},
  {"",  "GlobalAveragePool", 1, kMax, R::kFloat32, nullptr, pool, "kernels/pool.cc"},
  {"",  "GlobalMaxPool", 1, kMax, R::kFloat32, nullptr, pool, "kernels/pool.cc"},
  // Reductions over any axes (kernels/reduce.cc).
  {"",  "ReduceSum",     1, kMax, R::kFloat32Data, nullptr, reduce, "kernels/reduce.cc"},
  {"",  "ReduceMean",    1, kMax, R::kFloat32Data, nullptr, reduce, "kernels/reduce.cc"},
  {"",  "ReduceMax",     1, kMax, R::kFloat32Data, nullptr, reduce, "kernels/reduce.cc"},
  {"",  "ReduceMin",     1, kMax, R::kFloat32Data, nullptr, reduce, "kernels/reduce.cc"},
  {"",  "ReduceProd",    1, kMax, R::kFloat32Data, nullptr, reduce, "kernels/reduce.cc"},
  {"",  "ReduceL1",      1, kMax, R::kFloat32Data, nullptr, reduce, "kernels/reduce.cc"},
  {"",  "ReduceL2",      1, kMax, R::kFloat32Data, nullptr, reduce, "kernels/reduce.cc"},
  {"",  "ReduceSumSquare", 1, kMax, R::kFloat32Data, nullptr, reduce, "kernels/reduce.cc"},
  {"",  "ReduceLogSum",  1, kMax, R::kFloat32Data, nullptr, reduce, "kernels/reduce.cc"},
  // Cast between float32 and the 16-bit floats (kernels/cast.cc); other pairs: reference.
  {"",  "Cast",          6, kMax, R::kAny,    nullptr, cast, "kernels/cast.cc"},
  // Quantization maps between float32 and 8-bit integers (kernels/quantize_linear.cc).
  {"",  "QuantizeLinear", 10, kMax, R::kAny,    claims_quantize_linear, quantize_linear, "kernels/quantize_linear.cc"},
  {"",  "DequantizeLinear", 10, kMax, R::kAny,  claims_quantize_linear, quantize_linear, "kernels/quantize_linear.cc"},
  {kPg, "QLinearAdd",    1, 1,    R::kQuantized, nullptr, qlinear_add, "kernels/quantize_linear.cc"},
  {kPg, "TableLookup",   1, 1,    R::kQuantized, nullptr, table_lookup, "kernels/quantize_linear.cc"},
  {kPg, "QuantizeDequantize", 1, 1, R::kQuantized, nullptr, quantize_dequantize, "kernels/quantize_linear.cc"},
  // Data movement, any dtype (kernels/concat_split.cc, transpose*.cc, resize_nearest.cc,
  // data_movement.cc on the copy engine of index_map_copy.h).
  {"",  "Transpose",     1, kMax, R::kFloat32, is_nchw_nhwc_transpose, transpose_nchw_nhwc, "kernels/transpose_nchw_nhwc.cc"},
  {"",  "Transpose",     1, kMax, R::kAny,     nullptr, transpose, "kernels/transpose.cc"},
  {"",  "Concat",        1, kMax, R::kAny,     nullptr, concat_split, "kernels/concat_split.cc"},
  {"",  "Split",         1, kMax, R::kAny,     nullptr, concat_split, "kernels/concat_split.cc"},
  {"",  "Resize",        10, kMax, R::kAny,    claims_resize_nearest, resize_nearest, "kernels/resize_nearest.cc"},
  {"",  "Resize",        11, kMax, R::kFloat32Data, claims_resize_linear, resize_linear, "kernels/resize_linear.cc"},
  {"",  "GridSample",    16, kMax, R::kFloat32, claims_grid_sample, grid_sample, "kernels/grid_sample.cc"},
  {"",  "Slice",         1, kMax, R::kAny,     nullptr, map_copy, "kernels/data_movement.cc"},
  {"",  "Pad",           1, kMax, R::kAny,     nullptr, map_copy, "kernels/data_movement.cc"},
  {"",  "Tile",          6, kMax, R::kAny,     nullptr, map_copy, "kernels/data_movement.cc"},
  {"",  "Expand",        8, kMax, R::kAny,     nullptr, map_copy, "kernels/data_movement.cc"},
  {"",  "Gather",        1, kMax, R::kAny,     nullptr, map_copy, "kernels/data_movement.cc"},
  {"",  "Reshape",       5, kMax, R::kAny,     nullptr, view, "kernels/data_movement.cc"},
  {"",  "Flatten",       1, kMax, R::kAny,     nullptr, view, "kernels/data_movement.cc"},
  {"",  "Squeeze",       1, kMax, R::kAny,     nullptr, view, "kernels/data_movement.cc"},
  {"",  "Unsqueeze",     1, kMax, R::kAny,     nullptr, view, "kernels/data_movement.cc"},
  {"",  "Identity",      1, kMax, R::kAny,     nullptr, view, "kernels/data_movement.cc"},
};
// clang-format on

bool float32_or_unknown(const ir::ValueType& t) {
  return t.kind == ir::ValueType::Kind::kUnknown ||
         (t.is_tensor() && (t.dtype == DType::kFloat32 || t.dtype == DType::kUndefined));
}

bool dtypes_meet(DTypeRule rule, const std::vector<ir::ValueType>& types) {
  switch (rule) {
    case DTypeRule::kAny:
    case DTypeRule::kQuantized: return true;
    case DTypeRule::kFloat32Data: return types.empty() || float32_or_unknown(types[0]);
    case DTypeRule::kFloat32Or8Bit:
      return types.empty() || float32_or_unknown(types[0]) ||
             (types[0].is_tensor() &&
              (types[0].dtype == DType::kUInt8 || types[0].dtype == DType::kInt8));
    case DTypeRule::kFloat32: break;
  }
  for (const ir::ValueType& t : types)
    if (!float32_or_unknown(t)) return false;
  return true;
}

bool domain_matches(std::string_view row, const std::string& node) {
  if (row.empty()) return node.empty() || node == "ai.onnx";
  return node == row;
}

}  // namespace

std::span<const CpuKernelEntry> cpu_kernel_table() { return kCpuKernels; }

const CpuKernelEntry* find_cpu_kernel(const ir::Node& node,
                                      const std::vector<ir::ValueType>* input_types) {
  for (const CpuKernelEntry& e : kCpuKernels) {
    if (e.op != node.op_type || !domain_matches(e.domain, node.domain)) continue;
    const int opset = node.domain.empty() || node.domain == "ai.onnx" ? node.opset : 1;
    if (opset < e.min_opset || opset > e.max_opset) continue;
    if (e.claim && !e.claim(node)) continue;
    if (input_types && !dtypes_meet(e.dtypes, *input_types)) continue;
    return &e;
  }
  return nullptr;
}

}  // namespace peregrine::cpu
