// Reference kernels of the softmax family: Softmax, LogSoftmax and Hardmax.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

namespace {

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

// One row of `len` values `stride` apart, in double, written back the same way.
template <typename T>
void softmax_row(SoftmaxKind kind, const T* x, T* y, int64_t len, int64_t stride) {
  double peak = -std::numeric_limits<double>::infinity();
  int64_t peak_at = 0;
  for (int64_t j = 0; j < len; ++j) {
    double v = static_cast<double>(x[j * stride]);
    if (v > peak) {  // first occurrence wins ties, as Hardmax requires
      peak = v;
      peak_at = j;
    }
  }
  if (kind == SoftmaxKind::kHardmax) {
    for (int64_t j = 0; j < len; ++j) y[j * stride] = static_cast<T>(j == peak_at ? 1.0f : 0.0f);
    return;
  }
  // Shift by the max so exp never overflows.
  double sum = 0;
  for (int64_t j = 0; j < len; ++j) sum += std::exp(static_cast<double>(x[j * stride]) - peak);
  double log_sum = std::log(sum);
  for (int64_t j = 0; j < len; ++j) {
    double shifted = static_cast<double>(x[j * stride]) - peak;
    double r = kind == SoftmaxKind::kSoftmax ? std::exp(shifted) / sum : shifted - log_sum;
    y[j * stride] = static_cast<T>(r);
  }
}

Status softmax_kernel(KernelContext& ctx, SoftmaxKind kind) {
  const Tensor& in = ctx.input(0);
  bool coerce_2d = ctx.opset() < 13;
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", coerce_2d ? 1 : -1));
  int64_t rank = in.rank();
  if (axis < -rank || axis >= rank)
    return ctx.error("axis " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(rank));
  if (axis < 0) axis += rank;
  // Rows of `len` elements, `inner` apart; `outer` blocks of them.
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= in.dim(d);
  if (coerce_2d) {
    for (int64_t d = axis; d < rank; ++d) len *= in.dim(d);
  } else {
    len = in.dim(axis);
    for (int64_t d = axis + 1; d < rank; ++d) inner *= in.dim(d);
  }
  Tensor& out = ctx.output(0);
  return visit_float(in.dtype(), [&]<typename T>() {
    const T* x = in.data<T>();
    T* y = out.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t base = o * len * inner + i;
        softmax_row<T>(kind, x + base, y + base, len, inner);
      }
  });
}

}  // namespace

void register_softmax_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "Softmax",
        [](KernelContext& c) { return softmax_kernel(c, SoftmaxKind::kSoftmax); });
  r.add(kOnnxDomain, "LogSoftmax",
        [](KernelContext& c) { return softmax_kernel(c, SoftmaxKind::kLogSoftmax); });
  r.add(kOnnxDomain, "Hardmax",
        [](KernelContext& c) { return softmax_kernel(c, SoftmaxKind::kHardmax); });
}

}  // namespace peregrine
