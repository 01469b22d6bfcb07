// Reference kernels of elementwise ops.
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

namespace {

// out[i] = f(a[bcast(i)], b[bcast(i)]) over the broadcast output shape.
template <typename F>
Status binary_arith(KernelContext& ctx, F f) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& out = ctx.output(0);
  return visit_numeric(a.dtype(), [&]<typename T>() {
    BroadcastIndexer ia(a.shape(), out.shape()), ib(b.shape(), out.shape());
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) po[i] = static_cast<T>(f(pa[ia(i)], pb[ib(i)]));
  });
}

}  // namespace

void register_elementwise_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "Add", [](KernelContext& c) { return binary_arith(c, [](auto x, auto y) { return x + y; }); });
  r.add(kOnnxDomain, "Sub", [](KernelContext& c) { return binary_arith(c, [](auto x, auto y) { return x - y; }); });
  r.add(kOnnxDomain, "Mul", [](KernelContext& c) { return binary_arith(c, [](auto x, auto y) { return x * y; }); });
}

}  // namespace peregrine
