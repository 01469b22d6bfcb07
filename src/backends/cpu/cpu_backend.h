// The optimized CPU backend: claims the nodes its kernel table (kernel_table.h) lists; every
// other op falls back to the reference backend. Kernels for a dtype or rank they do not handle
// delegate to the reference kernel of the same op at run time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/gemm/f32_gemm.h"

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

// What a fused node adds to its base op: act(base(...) + Z).
struct FusedEpilogue {
  Activation activation = Activation::kNone;
  float p0 = 0.0f, p1 = 0.0f;  // LeakyRelu: alpha; Clip: min, max
  int z_input = -1;            // index of the optional Z input; -1 for the plain ONNX op
};

// The epilogue with `fused`'s activation (no bias, no residual yet).
inline GemmEpilogue activation_epilogue(const FusedEpilogue& fused) {
  GemmEpilogue ep;
  ep.activation = fused.activation;
  ep.act_alpha = fused.p0;
  ep.act_beta = fused.p1;
  return ep;
}

// Reads a peregrine.Fused* node's `activation` / `activation_params` (plain ops: none).
Expected<FusedEpilogue> read_fused_epilogue(const ir::Node& node);

// Kernel factories (kernels/<op>.cc). `constants[i]` is input i's value when it is an
// initializer, else nullptr.
Expected<std::unique_ptr<PreparedKernel>> prepare_matmul(
    const ir::Node& node, const std::vector<const Tensor*>& constants, const FusedEpilogue& fused);
Expected<std::unique_ptr<PreparedKernel>> prepare_gemm(const ir::Node& node,
                                                       const std::vector<const Tensor*>& constants,
                                                       const FusedEpilogue& fused);
Expected<std::unique_ptr<PreparedKernel>> prepare_conv(const ir::Node& node,
                                                       const std::vector<const Tensor*>& constants,
                                                       const FusedEpilogue& fused);
// 1-D and 3-D Conv with constant weights `w` (kernels/conv_nd.cc): per-slice im2col + GEMM.
Expected<std::unique_ptr<PreparedKernel>> prepare_conv_nd(const ir::Node& node, const Tensor* w,
                                                          const FusedEpilogue& fused);
// ConvTranspose (kernels/conv_transpose.cc): GEMM + col2im; constant W packed once.
Expected<std::unique_ptr<PreparedKernel>> prepare_conv_transpose(
    const ir::Node& node, const std::vector<const Tensor*>& constants);
// peregrine.ConvNhwc (kernels/conv_nhwc.cc): X, Z and Y in NHWC; constant W packed once.
Expected<std::unique_ptr<PreparedKernel>> prepare_conv_nhwc(
    const ir::Node& node, const std::vector<const Tensor*>& constants, const FusedEpilogue& fused);
// Transpose with perm (0, 2, 3, 1) or (0, 3, 1, 2) (kernels/transpose_nchw_nhwc.cc).
bool is_nchw_nhwc_transpose(const ir::Node& node);
Expected<std::unique_ptr<PreparedKernel>> prepare_transpose_nchw_nhwc(const ir::Node& node);

// The Z input of a fused node when it has exactly the output's shape (it is then the
// epilogue's residual); nullptr when absent. `*other` is set when Z is present but broadcast
// (the caller then runs the reference kernel).
const Tensor* residual_input(const KernelContext& ctx, const FusedEpilogue& fused,
                             const Tensor& out, bool* other);

// Runs the reference kernel of ctx's op (for cases a CPU kernel does not handle).
Status run_reference(KernelContext& ctx);
// The same with input `i` replaced by `value` for the call (a weight unpacked from a kernel's
// packed copy, its original freed).
Status run_reference_with_input(KernelContext& ctx, size_t i, Tensor value);

}  // namespace cpu
}  // namespace peregrine
