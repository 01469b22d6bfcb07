#include "backends/cpu/cpu_backend.h"

#include "backends/cpu/cpu_features.h"
#include "backends/reference/reference_backend.h"

namespace peregrine {

namespace {

bool is_float32_or_unknown(const ir::ValueType& t) {
  return t.kind == ir::ValueType::Kind::kUnknown ||
         (t.is_tensor() && (t.dtype == DType::kFloat32 || t.dtype == DType::kUndefined));
}

}  // namespace

bool CpuBackend::supports(const ir::Node& node) const {
  if (!node.domain.empty() && node.domain != "ai.onnx") return false;
  return node.op_type == "MatMul" || node.op_type == "Gemm" || node.op_type == "Conv";
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
  // A statically known non-float32 operand goes to the reference kernel right away.
  for (const auto& t : input_types)
    if (!is_float32_or_unknown(t)) return reference_backend().prepare(node, input_types);
  std::vector<const Tensor*> constants = constant_inputs;
  constants.resize(node.inputs.size(), nullptr);
  for (const Tensor*& c : constants)
    if (c && c->dtype() != DType::kFloat32) c = nullptr;
  if (node.op_type == "MatMul") return cpu::prepare_matmul(node, constants);
  if (node.op_type == "Gemm") return cpu::prepare_gemm(node, constants);
  if (node.op_type == "Conv") return cpu::prepare_conv(node, constants);
  return unsupported(node.describe() + ": the cpu backend has no kernel for this op");
}

const CpuBackend& cpu_backend() {
  static const CpuBackend backend;
  return backend;
}

namespace cpu {

Status run_reference(KernelContext& ctx) {
  const KernelFn* fn = reference_backend().kernels().find(ctx.node().domain, ctx.node().op_type);
  if (fn == nullptr) return unsupported(ctx.node().describe() + ": no reference kernel");
  return (*fn)(ctx);
}

}  // namespace cpu
}  // namespace peregrine
