#include "backends/reference/reference_backend.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/reference/kernel_list.h"

namespace peregrine {

Tensor& KernelContext::output(size_t i) {
  RuntimeValue& v = outputs_[i];
  if (!v.is_tensor()) {
    const ir::ValueType& t = output_types_[i];
    Shape shape = t.is_static() ? t.dims : Shape{};
    // Kernels call output() only where the schema gives a static shape at run time;
    // an unknown shape here is a schema bug, caught by the executor's output check.
    v = RuntimeValue::of(Tensor::zeros(t.dtype == DType::kUndefined ? DType::kFloat32 : t.dtype, shape));
  } else if (bound_[i] == kBoundNeedsZero) {
    if (v.tensor.nbytes()) std::memset(v.tensor.raw(), 0, v.tensor.nbytes());
    bound_[i] = kBoundReady;
  }
  return v.tensor;
}

Tensor& KernelContext::output_for_overwrite(size_t i) {
  static const bool poison = [] {
    const char* v = std::getenv("PEREGRINE_POISON_OUTPUTS");
    return v != nullptr && std::string(v) == "1";
  }();
  RuntimeValue& v = outputs_[i];
  if (bound_[i] != kBoundNeedsZero || !v.is_tensor()) return output(i);
  if (poison && v.tensor.nbytes()) std::memset(v.tensor.raw(), 0xff, v.tensor.nbytes());  // NaNs
  return v.tensor;
}

Tensor& KernelContext::allocate_output(size_t i, DType dtype, const Shape& shape) {
  RuntimeValue& v = outputs_[i];
  if (bound_[i] == kBoundNeedsZero && v.is_tensor() && v.tensor.dtype() == dtype &&
      v.tensor.shape() == shape)
    return output(i);
  outputs_[i] = RuntimeValue::of(Tensor::zeros(dtype, shape));
  bound_[i] = kUnbound;
  return outputs_[i].tensor;
}

Tensor& KernelContext::allocate_output_for_overwrite(size_t i, DType dtype, const Shape& shape) {
  RuntimeValue& v = outputs_[i];
  if (bound_[i] == kBoundNeedsZero && v.is_tensor() && v.tensor.dtype() == dtype &&
      v.tensor.shape() == shape)
    return output_for_overwrite(i);
  return allocate_output(i, dtype, shape);
}

void KernelRegistry::add(const std::string& domain, const std::string& op_type, KernelFn fn) {
  kernels_[{domain, op_type}] = std::move(fn);
}

const KernelFn* KernelRegistry::find(const std::string& domain, const std::string& op_type) const {
  const std::string& d = domain == "ai.onnx" ? std::string() : domain;
  auto it = kernels_.find({d, op_type});
  return it == kernels_.end() ? nullptr : &it->second;
}

namespace {

class ReferenceKernel : public PreparedKernel {
 public:
  explicit ReferenceKernel(const KernelFn* fn) : fn_(fn) {}
  Status run(KernelContext& ctx) override { return (*fn_)(ctx); }
  std::string name() const override { return "reference"; }

 private:
  const KernelFn* fn_;
};

}  // namespace

ReferenceBackend::ReferenceBackend() { register_all_reference_kernels(kernels_); }

bool ReferenceBackend::supports(const ir::Node& node) const {
  return kernels_.find(node.domain, node.op_type) != nullptr;
}

Expected<std::unique_ptr<PreparedKernel>> ReferenceBackend::prepare(
    const ir::Node& node, const std::vector<ir::ValueType>&) const {
  const KernelFn* fn = kernels_.find(node.domain, node.op_type);
  if (!fn) return unsupported(node.describe() + ": no reference kernel");
  return std::unique_ptr<PreparedKernel>(std::make_unique<ReferenceKernel>(fn));
}

const ReferenceBackend& reference_backend() {
  static const ReferenceBackend backend;
  return backend;
}

}  // namespace peregrine
