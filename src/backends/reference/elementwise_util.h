// Loops shared by the elementwise and activation reference kernels: unary maps,
// broadcast binary maps, and the conversions they compute through.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/reference/kernel_helpers.h"

namespace peregrine {

template <typename T>
inline constexpr bool kIsNarrowFloat = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

template <typename T>
inline constexpr bool kIsFloatLike = kIsNarrowFloat<T> || std::is_floating_point_v<T>;

// The type arithmetic on T happens in: narrow floats compute in float.
template <typename T>
using ComputeType = std::conditional_t<kIsNarrowFloat<T>, float, T>;

template <typename T>
ComputeType<T> widen(T v) {
  return static_cast<ComputeType<T>>(v);
}

// double -> T without undefined behaviour: integers saturate, NaN becomes 0.
template <typename T>
T from_double(double v) {
  if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_same_v<T, bool>) {
      return v != 0;
    } else {
      if (std::isnan(v)) return T{0};
      constexpr T kLowest = std::numeric_limits<T>::min();
      constexpr T kHighest = std::numeric_limits<T>::max();
      if (v <= static_cast<double>(kLowest)) return kLowest;
      if (v >= static_cast<double>(kHighest)) return kHighest;
      return static_cast<T>(v);
    }
  } else {
    return static_cast<T>(static_cast<float>(v));
  }
}

template <>
inline double from_double<double>(double v) {
  return v;
}

// out[i] = f(in[i]) with in and out of the same element type T (already dispatched).
template <typename T, typename F>
void map_unary(const Tensor& in, Tensor& out, F f) {
  const T* src = in.data<T>();
  T* dst = out.data<T>();
  for (int64_t i = 0; i < out.numel(); ++i) dst[i] = static_cast<T>(f(widen(src[i])));
}

// out[i] = f(a[bcast(i)], b[bcast(i)]); element types given explicitly, f sees widened values.
template <typename TA, typename TB, typename TOut, typename F>
void map_binary(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  BroadcastIndexer ia(a.shape(), out.shape()), ib(b.shape(), out.shape());
  const TA* pa = a.data<TA>();
  const TB* pb = b.data<TB>();
  TOut* po = out.data<TOut>();
  for (int64_t i = 0; i < out.numel(); ++i)
    po[i] = static_cast<TOut>(f(widen(pa[ia(i)]), widen(pb[ib(i)])));
}

// Float-only unary op computed in double: out = f(x).
template <typename F>
Status unary_float_op(KernelContext& ctx, F f) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  return visit_float(in.dtype(), [&]<typename T>() {
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i)
      dst[i] = from_double<T>(f(static_cast<double>(static_cast<ComputeType<T>>(src[i]))));
  });
}

// Numeric unary op computed in double and converted back (ints saturate): out = f(x).
template <typename F>
Status unary_numeric_via_double(KernelContext& ctx, F f) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  return visit_numeric(in.dtype(), [&]<typename T>() {
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i)
      dst[i] = from_double<T>(f(static_cast<double>(static_cast<ComputeType<T>>(src[i]))));
  });
}

}  // namespace peregrine
