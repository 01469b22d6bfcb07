#include "backends/cpu/cpu_backend.h"

#include <limits>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/kernels/attention.h"
#include "backends/cpu/kernels/copy_ops.h"
#include "backends/cpu/kernels/vector_ops.h"
#include "backends/reference/reference_backend.h"
#include "ops/op_schema.h"

namespace peregrine {

namespace {

bool is_float32_or_unknown(const ir::ValueType& t) {
  return t.kind == ir::ValueType::Kind::kUnknown ||
         (t.is_tensor() && (t.dtype == DType::kFloat32 || t.dtype == DType::kUndefined));
}

}  // namespace

bool CpuBackend::supports(const ir::Node& node) const {
  // Vector ops (kernels/vector_ops.h): elementwise, Softmax, LayerNormalization, pooling.
  if (cpu::claims_vector_op(node)) return true;
  // Layout (-O3, layout_nhwc pass): conv on NHWC activations (kernels/conv_nhwc.cc) and the
  // NCHW <-> NHWC transposes at a chain's edges (kernels/transpose_nchw_nhwc.cc).
  if (node.domain == kPeregrineDomain && node.op_type == "ConvNhwc") return true;
  if (cpu::is_nchw_nhwc_transpose(node)) return true;
  // Data movement, any dtype (kernels/copy_ops.h): Concat, Split, Resize nearest, Transpose.
  if (cpu::claims_copy_op(node)) return true;
  // Fused attention (kernels/attention.h).
  if (node.domain == kPeregrineDomain && node.op_type == "Attention") return true;
  if (node.domain == kPeregrineDomain)
    return node.op_type == "FusedMatMul" || node.op_type == "FusedGemm" ||
           node.op_type == "FusedConv";
  if (!node.domain.empty() && node.domain != "ai.onnx") return false;
  return node.op_type == "MatMul" || node.op_type == "Gemm" || node.op_type == "Conv" ||
         node.op_type == "ConvTranspose";
}

Expected<std::unique_ptr<PreparedKernel>> CpuBackend::prepare(
    const ir::Node& node, const std::vector<ir::ValueType>& input_types) const {
  return prepare_with_constants(node, input_types,
                                std::vector<const Tensor*>(node.inputs.size(), nullptr));
}

Expected<std::unique_ptr<PreparedKernel>> CpuBackend::prepare_with_constants(
    const ir::Node& node, const std::vector<ir::ValueType>& input_types,
    const std::vector<const Tensor*>& constant_inputs) const {
  PG_RETURN_IF_ERROR(cpu::selected_isa().status());
  // Copies do not care about the dtype (kernels/copy_ops.h).
  if (cpu::claims_copy_op(node)) return cpu::prepare_copy_op(node);
  // A statically known non-float32 operand goes to the reference kernel right away.
  for (const auto& t : input_types)
    if (!is_float32_or_unknown(t)) return reference_backend().prepare(node, input_types);
  std::vector<const Tensor*> constants = constant_inputs;
  constants.resize(node.inputs.size(), nullptr);
  for (const Tensor*& c : constants)
    if (c && c->dtype() != DType::kFloat32) c = nullptr;
  // Vector ops (kernels/vector_ops.h): elementwise, Softmax, LayerNormalization, pooling.
  if (cpu::claims_vector_op(node)) return cpu::prepare_vector_op(node);
  // Fused attention (kernels/attention.h).
  if (node.domain == kPeregrineDomain && node.op_type == "Attention")
    return cpu::prepare_attention(node);
  PG_ASSIGN_OR_RETURN(cpu::FusedEpilogue fused, cpu::read_fused_epilogue(node));
  // Layout (-O3): NHWC conv and the NCHW <-> NHWC transposes.
  if (node.op_type == "ConvNhwc") return cpu::prepare_conv_nhwc(node, constants, fused);
  if (cpu::is_nchw_nhwc_transpose(node)) return cpu::prepare_transpose_nchw_nhwc(node);
  if (node.op_type == "MatMul" || node.op_type == "FusedMatMul")
    return cpu::prepare_matmul(node, constants, fused);
  if (node.op_type == "Gemm" || node.op_type == "FusedGemm")
    return cpu::prepare_gemm(node, constants, fused);
  if (node.op_type == "Conv" || node.op_type == "FusedConv")
    return cpu::prepare_conv(node, constants, fused);
  if (node.op_type == "ConvTranspose") return cpu::prepare_conv_transpose(node, constants);
  return unsupported(node.describe() + ": the cpu backend has no kernel for this op");
}

const CpuBackend& cpu_backend() {
  static const CpuBackend backend;
  return backend;
}

namespace cpu {

Expected<FusedEpilogue> read_fused_epilogue(const ir::Node& node) {
  FusedEpilogue f;
  if (node.domain != kPeregrineDomain) return f;
  f.z_input = node.op_type == "FusedMatMul" ? 2 : 3;
  ir::AttrView attrs(node);
  PG_ASSIGN_OR_RETURN(std::string act, attrs.get_string("activation", ""));
  PG_ASSIGN_OR_RETURN(std::vector<float> params, attrs.get_floats("activation_params"));
  auto param = [&](size_t i, float fallback) { return i < params.size() ? params[i] : fallback; };
  if (act.empty()) {
    f.activation = Activation::kNone;
  } else if (act == "Relu") {
    f.activation = Activation::kRelu;
  } else if (act == "Sigmoid") {
    f.activation = Activation::kSigmoid;
  } else if (act == "Tanh") {
    f.activation = Activation::kTanh;
  } else if (act == "HardSwish") {
    f.activation = Activation::kHardSwish;
  } else if (act == "LeakyRelu") {
    f.activation = Activation::kLeakyRelu;
    f.p0 = param(0, 0.01f);
  } else if (act == "Clip") {
    f.activation = Activation::kClip;
    f.p0 = param(0, -std::numeric_limits<float>::infinity());
    f.p1 = param(1, std::numeric_limits<float>::infinity());
  } else if (act == "Gelu") {
    f.activation = Activation::kGelu;
  } else if (act == "GeluTanh") {
    f.activation = Activation::kGeluTanh;
  } else if (act == "SiLU") {
    f.activation = Activation::kSilu;
  } else {
    return invalid_model(node.describe() + ": unknown activation '" + act + "'");
  }
  return f;
}

const Tensor* residual_input(const KernelContext& ctx, const FusedEpilogue& fused,
                             const Tensor& out, bool* other) {
  *other = false;
  if (fused.z_input < 0 || !ctx.has_input(static_cast<size_t>(fused.z_input))) return nullptr;
  const Tensor& z = ctx.input(static_cast<size_t>(fused.z_input));
  if (z.dtype() != DType::kFloat32 || z.shape() != out.shape()) {
    *other = true;
    return nullptr;
  }
  return &z;
}

Status run_reference(KernelContext& ctx) {
  const KernelFn* fn = reference_backend().kernels().find(ctx.node().domain, ctx.node().op_type);
  if (fn == nullptr) return unsupported(ctx.node().describe() + ": no reference kernel");
  return (*fn)(ctx);
}

Status run_reference_with_input(KernelContext& ctx, size_t i, Tensor value) {
  const RuntimeValue replacement = RuntimeValue::of(std::move(value));
  const RuntimeValue* given = &ctx.input_value(i);
  ctx.set_input(i, &replacement);
  Status st = run_reference(ctx);
  ctx.set_input(i, given);
  return st;
}

}  // namespace cpu
}  // namespace peregrine
