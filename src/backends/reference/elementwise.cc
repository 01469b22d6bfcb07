// Reference kernels of elementwise ops.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/reference/elementwise_util.h"
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

namespace {

// Integer arithmetic wraps like the hardware does: signed overflow is undefined in C++,
// so it goes through uint64_t, whose conversion back to T is modular.
template <typename T>
T wrap_add(T a, T b) { return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
template <typename T>
T wrap_sub(T a, T b) { return static_cast<T>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
template <typename T>
T wrap_mul(T a, T b) { return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

struct AddOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return wrap_add(a, b);
    else return a + b;
  }
};
struct SubOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return wrap_sub(a, b);
    else return a - b;
  }
};
struct MulOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return wrap_mul(a, b);
    else return a * b;
  }
};
// Max/Min propagate NaN like numpy's maximum/minimum.
struct MaxOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    }
    return a < b ? b : a;
  }
};
struct MinOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    }
    return b < a ? b : a;
  }
};

// Same-typed numeric binary op with broadcasting; `op` sees ComputeType<T> values.
template <typename Op>
Status binary_numeric(KernelContext& ctx, Op op) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& out = ctx.output(0);
  return visit_numeric(a.dtype(), [&]<typename T>() { map_binary<T, T, T>(a, b, out, op); });
}

// Integer division truncates toward zero like C; division by zero is an input error.
Status div_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& out = ctx.output(0);
  bool divided_by_zero = false;
  PG_RETURN_IF_ERROR(visit_numeric(a.dtype(), [&]<typename T>() {
    map_binary<T, T, T>(a, b, out, [&](auto x, auto y) -> ComputeType<T> {
      if constexpr (std::is_integral_v<T>) {
        if (y == 0) {
          divided_by_zero = true;
          return 0;
        }
        // min / -1 overflows; the wrapped result is min itself.
        if constexpr (std::is_signed_v<T>) {
          if (y == -1) return wrap_sub<T>(0, x);
        }
        return static_cast<T>(x / y);
      } else {
        return x / y;
      }
    });
  }));
  if (divided_by_zero) return ctx.error("integer division by zero");
  return Status::ok();
}

// fmod=1: C fmod / truncated remainder (sign of the dividend). fmod=0: Python's mod
// (sign of the divisor).
Status mod_kernel(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(int64_t fmod, ctx.attrs().get_int("fmod", 0));
  if (fmod != 0 && fmod != 1) return ctx.error("attribute 'fmod' must be 0 or 1");
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& out = ctx.output(0);
  bool divided_by_zero = false;
  PG_RETURN_IF_ERROR(visit_numeric(a.dtype(), [&]<typename T>() {
    map_binary<T, T, T>(a, b, out, [&](auto x, auto y) -> ComputeType<T> {
      using C = ComputeType<T>;
      C r;
      if constexpr (std::is_integral_v<T>) {
        if (y == 0) {
          divided_by_zero = true;
          return 0;
        }
        if constexpr (std::is_signed_v<T>) {
          if (y == -1) return 0;  // avoids min % -1, which traps
        }
        r = static_cast<C>(x % y);
        if constexpr (std::is_signed_v<T>) {
          if (fmod == 0 && r != 0 && ((r < 0) != (y < 0))) r = static_cast<C>(r + y);
        }
      } else {
        r = std::fmod(x, y);
        if (fmod == 0 && r != 0 && ((r < 0) != (y < 0))) r += y;
      }
      return r;
    });
  }));
  if (divided_by_zero) return ctx.error("integer modulo by zero");
  return Status::ok();
}

// Integer power by squaring, wrapping on overflow. Negative exponents truncate 1/x^n.
template <typename T>
T int_pow(T base, int64_t exponent) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if constexpr (std::is_signed_v<T>) {
      if (base == -1) return (exponent % 2 == 0) ? 1 : static_cast<T>(-1);
    }
    return 0;
  }
  T result = 1;
  T factor = base;
  while (exponent > 0) {
    if (exponent & 1) result = wrap_mul(result, factor);
    factor = wrap_mul(factor, factor);
    exponent >>= 1;
  }
  return result;
}

// Pow: output has the base's type; the exponent may be any numeric type.
Status pow_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& out = ctx.output(0);
  Status inner = Status::ok();
  PG_RETURN_IF_ERROR(visit_numeric(a.dtype(), [&]<typename TA>() {
    inner = visit_numeric(b.dtype(), [&]<typename TB>() {
      map_binary<TA, TB, TA>(a, b, out, [](auto x, auto y) -> ComputeType<TA> {
        if constexpr (std::is_integral_v<TA> && std::is_integral_v<TB>) {
          int64_t e;
          if constexpr (std::is_same_v<TB, uint64_t>) {
            // Beyond int64: keep the parity, which is all that matters for bases 0, 1, -1.
            constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
            e = y > static_cast<uint64_t>(kMax) ? kMax - 1 + static_cast<int64_t>(y & 1)
                                                : static_cast<int64_t>(y);
          } else {
            e = static_cast<int64_t>(y);
          }
          return int_pow<TA>(x, e);
        } else {
          double r = std::pow(static_cast<double>(x), static_cast<double>(y));
          if constexpr (std::is_integral_v<TA>) {
            return from_double<TA>(r);
          } else {
            return static_cast<ComputeType<TA>>(r);
          }
        }
      });
    });
  }));
  return inner;
}

Status bitshift_kernel(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(std::string direction, ctx.attrs().get_string("direction"));
  if (direction != "LEFT" && direction != "RIGHT")
    return ctx.error("attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"" + direction +
                     "\"");
  bool left = direction == "LEFT";
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& out = ctx.output(0);
  return visit_integer(a.dtype(), [&]<typename T>() {
    map_binary<T, T, T>(a, b, out, [left](T x, T y) -> T {
      using U = std::make_unsigned_t<T>;
      constexpr uint64_t kBits = sizeof(T) * 8;
      // Shifting by the width or more (or by a negative count) shifts every bit out: a signed
      // value shifted right keeps its sign (-1 or 0), anything else becomes 0.
      bool out_of_range = static_cast<uint64_t>(y) >= kBits;
      if constexpr (std::is_signed_v<T>) out_of_range |= y < 0;
      if (out_of_range) return !left && x < 0 ? T(-1) : T(0);
      // Left shifts as unsigned (no signed overflow); right shifts of signed values are
      // arithmetic (opset 28), of unsigned ones logical.
      if (left) return static_cast<T>(static_cast<U>(static_cast<U>(x) << y));
      return static_cast<T>(x >> y);
    });
  });
}

template <typename Op>
Status bitwise_kernel(KernelContext& ctx, Op op) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& out = ctx.output(0);
  return visit_integer(a.dtype(), [&]<typename T>() {
    map_binary<T, T, T>(a, b, out, [&](T x, T y) { return static_cast<T>(op(x, y)); });
  });
}

template <typename Op>
Status logical_kernel(KernelContext& ctx, Op op) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != DType::kBool) return ctx.error("expects bool inputs");
  map_binary<bool, bool, bool>(a, b, ctx.output(0), op);
  return Status::ok();
}

// Comparison into a bool tensor; Equal also takes bools and strings.
template <typename Op>
Status compare_kernel(KernelContext& ctx, Op op, bool allow_bool_and_string) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& out = ctx.output(0);
  if (allow_bool_and_string && a.dtype() == DType::kString) {
    BroadcastIndexer ia(a.shape(), out.shape()), ib(b.shape(), out.shape());
    bool* po = out.data<bool>();
    for (int64_t i = 0; i < out.numel(); ++i) po[i] = op(a.strings()[ia(i)], b.strings()[ib(i)]);
    return Status::ok();
  }
  auto compare_typed = [&]<typename T>() { map_binary<T, T, bool>(a, b, out, op); };
  if (allow_bool_and_string) return visit_numeric_or_bool(a.dtype(), compare_typed);
  return visit_numeric(a.dtype(), compare_typed);
}

// Sum/Mean/Max/Min: folds all inputs, each broadcast to the output shape.
template <typename Op>
Status variadic_kernel(KernelContext& ctx, Op op, bool mean) {
  Tensor& out = ctx.output(0);
  size_t n = ctx.num_inputs();
  return visit_numeric(out.dtype(), [&]<typename T>() {
    using C = ComputeType<T>;
    std::vector<C> acc(static_cast<size_t>(out.numel()));
    for (size_t k = 0; k < n; ++k) {
      const Tensor& in = ctx.input(k);
      BroadcastIndexer index(in.shape(), out.shape());
      const T* src = in.data<T>();
      for (int64_t i = 0; i < out.numel(); ++i) {
        C v = widen(src[index(i)]);
        acc[i] = k == 0 ? v : op(acc[i], v);
      }
    }
    T* dst = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i)
      dst[i] = static_cast<T>(mean ? static_cast<C>(acc[i] / static_cast<C>(n)) : acc[i]);
  });
}

Status where_kernel(KernelContext& ctx) {
  const Tensor& cond = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  if (cond.dtype() != DType::kBool) return ctx.error("condition must be bool");
  if (x.dtype() != y.dtype()) return ctx.error("X and Y have different element types");
  Tensor& out = ctx.output(0);
  BroadcastIndexer ic(cond.shape(), out.shape()), ix(x.shape(), out.shape()),
      iy(y.shape(), out.shape());
  const bool* pc = cond.data<bool>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (pc[ic(i)]) {
      copy_element(x, ix(i), out, i);
    } else {
      copy_element(y, iy(i), out, i);
    }
  }
  return Status::ok();
}

// ---- Unary ops ----

Status abs_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  return visit_numeric(in.dtype(), [&]<typename T>() {
    map_unary<T>(in, ctx.output(0), [](auto x) -> ComputeType<T> {
      if constexpr (std::is_unsigned_v<T>) return x;
      else if constexpr (std::is_integral_v<T>) return x < 0 ? wrap_sub<T>(0, x) : x;
      else return std::fabs(x);
    });
  });
}

Status neg_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  return visit_numeric(in.dtype(), [&]<typename T>() {
    map_unary<T>(in, ctx.output(0), [](auto x) -> ComputeType<T> {
      if constexpr (std::is_integral_v<T>) return wrap_sub<T>(0, x);
      else return -x;
    });
  });
}

Status sign_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  return visit_numeric(in.dtype(), [&]<typename T>() {
    map_unary<T>(in, ctx.output(0), [](auto x) -> ComputeType<T> {
      using C = ComputeType<T>;
      if constexpr (std::is_floating_point_v<C>) {
        if (std::isnan(x)) return x;
      }
      return static_cast<C>((C{0} < x) - (x < C{0}));
    });
  });
}

Status not_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  if (in.dtype() != DType::kBool) return ctx.error("expects a bool input");
  map_unary<bool>(in, ctx.output(0), [](bool x) { return !x; });
  return Status::ok();
}

Status bitwise_not_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  return visit_integer(in.dtype(), [&]<typename T>() {
    map_unary<T>(in, ctx.output(0), [](T x) { return static_cast<T>(~x); });
  });
}

// IsNaN / IsInf: float input, bool output.
template <typename Pred>
Status float_predicate(KernelContext& ctx, Pred pred) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  return visit_float(in.dtype(), [&]<typename T>() {
    const T* src = in.data<T>();
    bool* dst = out.data<bool>();
    for (int64_t i = 0; i < out.numel(); ++i) dst[i] = pred(static_cast<double>(widen(src[i])));
  });
}

Status isinf_kernel(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(int64_t positive, ctx.attrs().get_int("detect_positive", 1));
  PG_ASSIGN_OR_RETURN(int64_t negative, ctx.attrs().get_int("detect_negative", 1));
  return float_predicate(ctx, [&](double x) {
    return std::isinf(x) && ((x > 0 && positive != 0) || (x < 0 && negative != 0));
  });
}

using UnaryFn = double (*)(double);

void add_float_unary(KernelRegistry& r, const char* op, UnaryFn fn) {
  r.add(kOnnxDomain, op, [fn](KernelContext& c) { return unary_float_op(c, fn); });
}

}  // namespace

void register_elementwise_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "Add", [](KernelContext& c) { return binary_numeric(c, AddOp{}); });
  r.add(kOnnxDomain, "Sub", [](KernelContext& c) { return binary_numeric(c, SubOp{}); });
  r.add(kOnnxDomain, "Mul", [](KernelContext& c) { return binary_numeric(c, MulOp{}); });
  r.add(kOnnxDomain, "Div", div_kernel);
  r.add(kOnnxDomain, "Mod", mod_kernel);
  r.add(kOnnxDomain, "Pow", pow_kernel);
  r.add(kOnnxDomain, "BitShift", bitshift_kernel);
  r.add(kOnnxDomain, "BitwiseAnd",
        [](KernelContext& c) { return bitwise_kernel(c, [](auto x, auto y) { return x & y; }); });
  r.add(kOnnxDomain, "BitwiseOr",
        [](KernelContext& c) { return bitwise_kernel(c, [](auto x, auto y) { return x | y; }); });
  r.add(kOnnxDomain, "BitwiseXor",
        [](KernelContext& c) { return bitwise_kernel(c, [](auto x, auto y) { return x ^ y; }); });
  r.add(kOnnxDomain, "And",
        [](KernelContext& c) { return logical_kernel(c, [](bool x, bool y) { return x && y; }); });
  r.add(kOnnxDomain, "Or",
        [](KernelContext& c) { return logical_kernel(c, [](bool x, bool y) { return x || y; }); });
  r.add(kOnnxDomain, "Xor",
        [](KernelContext& c) { return logical_kernel(c, [](bool x, bool y) { return x != y; }); });

  r.add(kOnnxDomain, "Equal", [](KernelContext& c) {
    return compare_kernel(c, [](const auto& x, const auto& y) { return x == y; }, true);
  });
  r.add(kOnnxDomain, "Greater", [](KernelContext& c) {
    return compare_kernel(c, [](auto x, auto y) { return x > y; }, false);
  });
  r.add(kOnnxDomain, "Less", [](KernelContext& c) {
    return compare_kernel(c, [](auto x, auto y) { return x < y; }, false);
  });
  r.add(kOnnxDomain, "GreaterOrEqual", [](KernelContext& c) {
    return compare_kernel(c, [](auto x, auto y) { return x >= y; }, false);
  });
  r.add(kOnnxDomain, "LessOrEqual", [](KernelContext& c) {
    return compare_kernel(c, [](auto x, auto y) { return x <= y; }, false);
  });

  r.add(kOnnxDomain, "Sum", [](KernelContext& c) { return variadic_kernel(c, AddOp{}, false); });
  r.add(kOnnxDomain, "Mean", [](KernelContext& c) { return variadic_kernel(c, AddOp{}, true); });
  r.add(kOnnxDomain, "Max", [](KernelContext& c) { return variadic_kernel(c, MaxOp{}, false); });
  r.add(kOnnxDomain, "Min", [](KernelContext& c) { return variadic_kernel(c, MinOp{}, false); });
  r.add(kOnnxDomain, "Where", where_kernel);

  r.add(kOnnxDomain, "Abs", abs_kernel);
  r.add(kOnnxDomain, "Neg", neg_kernel);
  r.add(kOnnxDomain, "Sign", sign_kernel);
  r.add(kOnnxDomain, "Not", not_kernel);
  r.add(kOnnxDomain, "BitwiseNot", bitwise_not_kernel);
  r.add(kOnnxDomain, "IsNaN", [](KernelContext& c) {
    return float_predicate(c, [](double x) { return std::isnan(x); });
  });
  r.add(kOnnxDomain, "IsInf", isinf_kernel);

  add_float_unary(r, "Reciprocal", [](double x) { return 1.0 / x; });
  add_float_unary(r, "Floor", [](double x) { return std::floor(x); });
  add_float_unary(r, "Ceil", [](double x) { return std::ceil(x); });
  // Round half to even: nearbyint under the default rounding mode.
  add_float_unary(r, "Round", [](double x) { return std::nearbyint(x); });
  add_float_unary(r, "Sqrt", [](double x) { return std::sqrt(x); });
  add_float_unary(r, "Exp", [](double x) { return std::exp(x); });
  add_float_unary(r, "Log", [](double x) { return std::log(x); });
  add_float_unary(r, "Sin", [](double x) { return std::sin(x); });
  add_float_unary(r, "Cos", [](double x) { return std::cos(x); });
  add_float_unary(r, "Tan", [](double x) { return std::tan(x); });
  add_float_unary(r, "Asin", [](double x) { return std::asin(x); });
  add_float_unary(r, "Acos", [](double x) { return std::acos(x); });
  add_float_unary(r, "Atan", [](double x) { return std::atan(x); });
  add_float_unary(r, "Sinh", [](double x) { return std::sinh(x); });
  add_float_unary(r, "Cosh", [](double x) { return std::cosh(x); });
  add_float_unary(r, "Asinh", [](double x) { return std::asinh(x); });
  add_float_unary(r, "Acosh", [](double x) { return std::acosh(x); });
  add_float_unary(r, "Atanh", [](double x) { return std::atanh(x); });
  add_float_unary(r, "Erf", [](double x) { return std::erf(x); });
}

}  // namespace peregrine
