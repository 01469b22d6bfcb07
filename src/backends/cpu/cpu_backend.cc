#include "backends/cpu/cpu_backend.h"

#include <limits>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/kernel_table.h"
#include "backends/reference/reference_backend.h"
#include "ops/op_schema.h"

namespace peregrine {

bool CpuBackend::supports(const ir::Node& node) const {
  return cpu::find_cpu_kernel(node) != nullptr;
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
  // The table (kernel_table.cc) decides; a statically known dtype no row takes goes to the
  // reference kernel right away.
  const cpu::CpuKernelEntry* entry = cpu::find_cpu_kernel(node, &input_types);
  if (!entry) {
    if (cpu::find_cpu_kernel(node)) return reference_backend().prepare(node, input_types);
    return unsupported(node.describe() + ": the cpu backend has no kernel for this op");
  }
  std::vector<const Tensor*> constants = constant_inputs;
  constants.resize(node.inputs.size(), nullptr);
  if (entry->dtypes != cpu::DTypeRule::kQuantized)
    for (const Tensor*& c : constants)
      if (c && c->dtype() != DType::kFloat32) c = nullptr;
  PG_ASSIGN_OR_RETURN(cpu::FusedEpilogue fused, cpu::read_fused_epilogue(node));
  return entry->prepare(cpu::CpuPrepareArgs{node, constants, fused});
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
  ctx.mark_reference_fallback();
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
