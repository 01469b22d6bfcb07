// CPU kernel of Cast between float32 and the 16-bit floats: float16 through AVX-512's
// conversion instructions (ukernels/f16_convert_ukernels.h), bfloat16 by its bit layout (the top
// half of a float32, rounded to nearest even), threaded over pieces. Other type pairs run the
// reference kernel. These are the casts a float16 model keeps at its inputs and outputs once
// float16_to_float32 has moved its arithmetic to float32, and the casts of mixed-precision graphs.
#include <algorithm>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/kernels/vector_ops.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/ukernels/f16_convert_ukernels.h"
#include "ir/attributes.h"
#include "peregrine/float_types.h"

namespace peregrine::cpu {

namespace {

void bf16_to_f32(const uint16_t* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = bits_float(static_cast<uint32_t>(x[i]) << 16);
}

// Round to nearest even, as the reference kernel.
void f32_to_bf16(const float* x, uint16_t* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = BFloat16::from_float(x[i]);
}

class CastKernel : public PreparedKernel {
 public:
  explicit CastKernel(DType to) : to_(to) {
    const bool avx512 = selected_isa().is_ok() && selected_isa().value() >= Isa::kAvx512;
    widen_f16_ = avx512 ? avx512::f16_to_f32 : scalar::f16_to_f32;
    narrow_f16_ = avx512 ? avx512::f32_to_f16 : scalar::f32_to_f16;
    isa_ = avx512 ? "avx512" : "scalar";
  }
  std::string name() const override { return "cpu/cast-" + isa_; }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const DType from = x.dtype();
    const bool widen = to_ == DType::kFloat32 && (from == DType::kFloat16 || from == DType::kBFloat16);
    const bool narrow = from == DType::kFloat32 && (to_ == DType::kFloat16 || to_ == DType::kBFloat16);
    if (!widen && !narrow) return run_reference(ctx);
    Tensor& y = ctx.allocate_output_for_overwrite(0, to_, x.shape());
    const int64_t n = x.numel();
    const int64_t tasks = std::max<int64_t>(1, (n + kElementsPerTask - 1) / kElementsPerTask);
    const int threads = n < kElementsPerTask ? 1 : ctx.num_threads();
    cpu_thread_pool().parallel_for(tasks, threads, [&](int64_t t, int) {
      const int64_t i0 = t * kElementsPerTask;
      const size_t len = static_cast<size_t>(std::min(kElementsPerTask, n - i0));
      if (i0 >= n) return;
      if (widen) {
        const uint16_t* src = x.data<uint16_t>() + i0;
        float* dst = y.data<float>() + i0;
        from == DType::kFloat16 ? widen_f16_(src, dst, len) : bf16_to_f32(src, dst, len);
      } else {
        const float* src = x.data<float>() + i0;
        uint16_t* dst = y.data<uint16_t>() + i0;
        to_ == DType::kFloat16 ? narrow_f16_(src, dst, len) : f32_to_bf16(src, dst, len);
      }
    });
    return Status::ok();
  }

 private:
  DType to_;
  F16ToF32Fn widen_f16_;
  F32ToF16Fn narrow_f16_;
  std::string isa_;
};

}  // namespace

Expected<std::unique_ptr<PreparedKernel>> prepare_cast(const ir::Node& node) {
  PG_ASSIGN_OR_RETURN(int64_t to, ir::AttrView(node).get_int("to"));
  return std::unique_ptr<PreparedKernel>(new CastKernel(static_cast<DType>(to)));
}

}  // namespace peregrine::cpu
