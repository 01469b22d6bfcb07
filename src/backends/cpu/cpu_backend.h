// The optimized CPU backend: claims the nodes it runs fast (float32 MatMul, Gemm and 2-D
// Conv); every other op falls back to the reference backend. Kernels for a dtype or rank they
// do not handle delegate to the reference kernel of the same op at run time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace peregrine {

class CpuBackend : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  bool supports(const ir::Node& node) const override;
  Expected<std::unique_ptr<PreparedKernel>> prepare(
      const ir::Node& node, const std::vector<ir::ValueType>& input_types) const override;
  Expected<std::unique_ptr<PreparedKernel>> prepare_with_constants(
      const ir::Node& node, const std::vector<ir::ValueType>& input_types,
      const std::vector<const Tensor*>& constant_inputs) const override;
};

const CpuBackend& cpu_backend();

namespace cpu {

// Kernel factories (kernels/<op>.cc). `constants[i]` is input i's value when it is an
// initializer, else nullptr.
Expected<std::unique_ptr<PreparedKernel>> prepare_matmul(
    const ir::Node& node, const std::vector<const Tensor*>& constants);
Expected<std::unique_ptr<PreparedKernel>> prepare_gemm(const ir::Node& node,
                                                       const std::vector<const Tensor*>& constants);
Expected<std::unique_ptr<PreparedKernel>> prepare_conv(const ir::Node& node,
                                                       const std::vector<const Tensor*>& constants);

// Runs the reference kernel of ctx's op (for cases a CPU kernel does not handle).
Status run_reference(KernelContext& ctx);

}  // namespace cpu
}  // namespace peregrine
