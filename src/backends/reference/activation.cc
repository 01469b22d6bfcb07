// Reference kernels of the activation family.
#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <type_traits>

#include "backends/reference/elementwise_util.h"
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

namespace {

// log(1 + exp(x)) without overflow for large x.
double softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

// 1 / (1 + exp(-x)) without overflow for very negative x.
double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

Status relu_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  return visit_numeric(in.dtype(), [&]<typename T>() {
    // x < 0 rather than max(x, 0) so NaN passes through as numpy's maximum does.
    map_unary<T>(in, ctx.output(0), [](auto x) { return x < 0 ? decltype(x){0} : x; });
  });
}

// Reads float attribute `name` (or `fallback` when absent) as a double.
Status float_attr(KernelContext& ctx, const char* name, float fallback, double* value) {
  auto v = ctx.attrs().get_float(name, fallback);
  if (!v.is_ok()) return v.status();
  *value = *v;
  return Status::ok();
}

Status leaky_relu_kernel(KernelContext& ctx) {
  double alpha;
  PG_RETURN_IF_ERROR(float_attr(ctx, "alpha", 0.01f, &alpha));
  return unary_float_op(ctx, [alpha](double x) { return x < 0 ? alpha * x : x; });
}

Status thresholded_relu_kernel(KernelContext& ctx) {
  double alpha;
  PG_RETURN_IF_ERROR(float_attr(ctx, "alpha", 1.0f, &alpha));
  return unary_float_op(ctx, [alpha](double x) { return x > alpha ? x : 0.0; });
}

Status elu_kernel(KernelContext& ctx) {
  double alpha;
  PG_RETURN_IF_ERROR(float_attr(ctx, "alpha", 1.0f, &alpha));
  return unary_float_op(ctx, [alpha](double x) { return x < 0 ? alpha * std::expm1(x) : x; });
}

Status selu_kernel(KernelContext& ctx) {
  double alpha, gamma;
  PG_RETURN_IF_ERROR(float_attr(ctx, "alpha", 1.67326319217681884765625f, &alpha));
  PG_RETURN_IF_ERROR(float_attr(ctx, "gamma", 1.05070102214813232421875f, &gamma));
  return unary_float_op(ctx, [alpha, gamma](double x) {
    return x > 0 ? gamma * x : gamma * alpha * std::expm1(x);
  });
}

Status celu_kernel(KernelContext& ctx) {
  double alpha;
  PG_RETURN_IF_ERROR(float_attr(ctx, "alpha", 1.0f, &alpha));
  if (alpha == 0) return ctx.error("attribute 'alpha' must not be 0");
  return unary_float_op(ctx, [alpha](double x) {
    return std::max(0.0, x) + std::min(0.0, alpha * std::expm1(x / alpha));
  });
}

Status swish_kernel(KernelContext& ctx) {
  double alpha;
  PG_RETURN_IF_ERROR(float_attr(ctx, "alpha", 1.0f, &alpha));
  return unary_float_op(ctx, [alpha](double x) { return x / (1.0 + std::exp(-alpha * x)); });
}

// SwiGLU: Swish_alpha(A) * B, elementwise over two tensors of one shape.
Status swiglu_kernel(KernelContext& ctx) {
  double alpha;
  PG_RETURN_IF_ERROR(float_attr(ctx, "alpha", 1.0f, &alpha));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.shape() != b.shape())
    return ctx.error("A " + shape_to_string(a.shape()) + " and B " + shape_to_string(b.shape()) +
                     " must have one shape (SwiGLU does not broadcast)");
  Tensor& out = ctx.output(0);
  return visit_float(a.dtype(), [&]<typename T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* dst = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      const double x = static_cast<double>(static_cast<ComputeType<T>>(pa[i]));
      const double y = static_cast<double>(static_cast<ComputeType<T>>(pb[i]));
      dst[i] = from_double<T>(x / (1.0 + std::exp(-alpha * x)) * y);
    }
  });
}

Status hard_sigmoid_kernel(KernelContext& ctx) {
  double alpha, beta;
  PG_RETURN_IF_ERROR(float_attr(ctx, "alpha", 0.2f, &alpha));
  PG_RETURN_IF_ERROR(float_attr(ctx, "beta", 0.5f, &beta));
  return unary_float_op(ctx, [alpha, beta](double x) {
    return std::max(0.0, std::min(1.0, alpha * x + beta));
  });
}

Status shrink_kernel(KernelContext& ctx) {
  double lambd, bias;
  PG_RETURN_IF_ERROR(float_attr(ctx, "lambd", 0.5f, &lambd));
  PG_RETURN_IF_ERROR(float_attr(ctx, "bias", 0.0f, &bias));
  return unary_numeric_via_double(ctx, [lambd, bias](double x) {
    if (x < -lambd) return x + bias;
    if (x > lambd) return x - bias;
    return 0.0;
  });
}

Status gelu_kernel(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(std::string approximate, ctx.attrs().get_string("approximate", "none"));
  if (approximate == "none") {
    return unary_float_op(ctx, [](double x) {
      return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
    });
  }
  if (approximate == "tanh") {
    return unary_float_op(ctx, [](double x) {
      const double k = std::sqrt(2.0 / std::numbers::pi);
      return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
    });
  }
  return ctx.error("attribute 'approximate' must be \"none\" or \"tanh\", got \"" + approximate +
                   "\"");
}

// PRelu: y = x < 0 ? slope * x : x, slope broadcast to X.
Status prelu_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor slope = ctx.input(1);
  // Before opset 7 a 1-D slope of C values applied per channel (axis 1).
  if (ctx.opset() < 7 && slope.rank() == 1 && x.rank() > 2 && slope.dim(0) == x.dim(1) &&
      slope.dim(0) != 1) {
    Shape per_channel(static_cast<size_t>(x.rank() - 1), 1);
    per_channel[0] = slope.dim(0);
    slope = slope.reshaped(per_channel);
  }
  Tensor& out = ctx.output(0);
  return visit_numeric(x.dtype(), [&]<typename T>() {
    map_binary<T, T, T>(x, slope, out, [](auto v, auto s) -> ComputeType<T> {
      if constexpr (std::is_integral_v<T>) {
        // Through uint64_t: signed overflow would be undefined.
        return v < 0 ? static_cast<T>(static_cast<uint64_t>(v) * static_cast<uint64_t>(s)) : v;
      } else {
        return v < 0 ? s * v : v;
      }
    });
  });
}

// Clip: bounds from attributes (opset < 11) or optional scalar inputs; with min > max
// every element becomes max, as numpy's clip does.
Status clip_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  if (ctx.opset() < 11) {
    double lo, hi;
    PG_RETURN_IF_ERROR(float_attr(ctx, "min", std::numeric_limits<float>::lowest(), &lo));
    PG_RETURN_IF_ERROR(float_attr(ctx, "max", std::numeric_limits<float>::max(), &hi));
    return unary_float_op(ctx, [lo, hi](double x) {
      double v = x < lo ? lo : x;
      return v > hi ? hi : v;
    });
  }
  for (size_t i = 1; i < 3; ++i) {
    if (ctx.has_input(i) && ctx.input(i).numel() != 1)
      return ctx.error("input '" + ctx.node().inputs[i] + "' must be a scalar, has shape " +
                       shape_to_string(ctx.input(i).shape()));
  }
  return visit_numeric(in.dtype(), [&]<typename T>() {
    using C = ComputeType<T>;
    C lo = ctx.has_input(1) ? widen(ctx.input(1).data<T>()[0]) : std::numeric_limits<C>::lowest();
    C hi = ctx.has_input(2) ? widen(ctx.input(2).data<T>()[0]) : std::numeric_limits<C>::max();
    map_unary<T>(in, out, [lo, hi](C x) {
      C v = x < lo ? lo : x;
      return v > hi ? hi : v;
    });
  });
}

using UnaryFn = double (*)(double);

void add_float_unary(KernelRegistry& r, const char* op, UnaryFn fn) {
  r.add(kOnnxDomain, op, [fn](KernelContext& c) { return unary_float_op(c, fn); });
}

}  // namespace

void register_activation_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "Relu", relu_kernel);
  r.add(kOnnxDomain, "LeakyRelu", leaky_relu_kernel);
  r.add(kOnnxDomain, "ThresholdedRelu", thresholded_relu_kernel);
  r.add(kOnnxDomain, "Elu", elu_kernel);
  r.add(kOnnxDomain, "Selu", selu_kernel);
  r.add(kOnnxDomain, "Celu", celu_kernel);
  r.add(kOnnxDomain, "HardSigmoid", hard_sigmoid_kernel);
  r.add(kOnnxDomain, "Swish", swish_kernel);
  r.add(kOnnxDomain, "SwiGLU", swiglu_kernel);
  r.add(kOnnxDomain, "Shrink", shrink_kernel);
  r.add(kOnnxDomain, "Gelu", gelu_kernel);
  r.add(kOnnxDomain, "PRelu", prelu_kernel);
  r.add(kOnnxDomain, "Clip", clip_kernel);
  add_float_unary(r, "Sigmoid", sigmoid);
  add_float_unary(r, "Softplus", softplus);
  add_float_unary(r, "Tanh", [](double x) { return std::tanh(x); });
  add_float_unary(r, "Softsign", [](double x) { return x / (1.0 + std::fabs(x)); });
  add_float_unary(r, "HardSwish", [](double x) {
    return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5));
  });
  add_float_unary(r, "Mish", [](double x) { return x * std::tanh(softplus(x)); });
}

}  // namespace peregrine
