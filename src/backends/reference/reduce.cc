// Reference kernels of the reduce family: Reduce*, ArgMax/ArgMin, TopK, CumSum and CumProd.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

namespace {

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// For each flat index of `shape`, the flat index of the kept-dims output it reduces into
// (dims in `reduced` collapse to one element).
std::vector<int64_t> reduce_targets(const Shape& shape, const std::vector<bool>& reduced) {
  size_t rank = shape.size();
  // Strides of the output with reduced dims kept as 1; 0 for reduced dims.
  std::vector<int64_t> out_strides(rank, 0);
  int64_t stride = 1;
  for (size_t d = rank; d-- > 0;) {
    if (!reduced[d]) {
      out_strides[d] = stride;
      stride *= shape[d];
    }
  }
  int64_t numel = 1;
  for (int64_t dim : shape) numel *= dim;
  std::vector<int64_t> targets(static_cast<size_t>(numel));
  std::vector<int64_t> index(rank, 0);
  int64_t target = 0;
  for (int64_t i = 0; i < numel; ++i) {
    targets[static_cast<size_t>(i)] = target;
    // Advance the multi-index like an odometer, keeping `target` in step.
    for (size_t d = rank; d-- > 0;) {
      target += out_strides[d];
      if (++index[d] < shape[d]) break;
      target -= out_strides[d] * index[d];
      index[d] = 0;
    }
  }
  return targets;
}

template <typename T>
constexpr bool kIsFloat = !std::is_integral_v<T>;

// Where the running value lives: double for floats, 64-bit for integers (so sums of int8 do
// not wrap early; the result wraps on store like numpy's cast).
template <typename T>
using Accum = std::conditional_t<kIsFloat<T>, double,
                                 std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

// What values are compared as: floats (incl. Float16/BFloat16) as double, integers as themselves.
template <typename T>
using Compare = std::conditional_t<kIsFloat<T>, double, T>;

// A double result stored as T: for integer types NaN becomes 0 and values beyond the type's
// range its bound (a plain cast of -inf or 1e30 to an integer is undefined behaviour).
template <typename T>
T from_double(double r) {
  if constexpr (kIsFloat<T>) {
    return static_cast<T>(r);
  } else {
    if (std::isnan(r)) return T(0);
    if (r <= static_cast<double>(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    if (r >= static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return static_cast<T>(r);
  }
}

template <typename T>
void reduce_typed(ReduceKind kind, const Tensor& in, const std::vector<int64_t>& targets,
                  Tensor& out) {
  using A = Accum<T>;
  const T* x = in.data<T>();
  T* y = out.data<T>();
  size_t n_out = static_cast<size_t>(out.numel());
  int64_t per_output = out.numel() == 0 ? 0 : in.numel() / out.numel();

  if (kind == ReduceKind::kMax || kind == ReduceKind::kMin) {
    bool is_max = kind == ReduceKind::kMax;
    std::vector<T> best(n_out);
    T init;
    if constexpr (kIsFloat<T>) {
      init = static_cast<T>(is_max ? -std::numeric_limits<float>::infinity()
                                   : std::numeric_limits<float>::infinity());
    } else {
      init = is_max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    }
    std::fill(best.begin(), best.end(), init);
    for (int64_t i = 0; i < in.numel(); ++i) {
      T& b = best[static_cast<size_t>(targets[static_cast<size_t>(i)])];
      T v = x[i];
      if constexpr (kIsFloat<T>) {
        if (std::isnan(static_cast<double>(v))) {  // NaN propagates, as in numpy
          b = v;
          continue;
        }
        if (std::isnan(static_cast<double>(b))) continue;
      }
      A value = static_cast<A>(v), current = static_cast<A>(b);
      if (is_max ? value > current : value < current) b = v;
    }
    std::copy(best.begin(), best.end(), y);
    return;
  }

  if (kind == ReduceKind::kLogSumExp) {
    // Subtract each output's max before exponentiating so large inputs do not overflow.
    std::vector<double> peak(n_out, -std::numeric_limits<double>::infinity());
    for (int64_t i = 0; i < in.numel(); ++i) {
      double& p = peak[static_cast<size_t>(targets[static_cast<size_t>(i)])];
      p = std::max(p, static_cast<double>(x[i]));
    }
    std::vector<double> sum(n_out, 0.0);
    for (int64_t i = 0; i < in.numel(); ++i) {
      size_t t = static_cast<size_t>(targets[static_cast<size_t>(i)]);
      sum[t] += std::exp(static_cast<double>(x[i]) - peak[t]);
    }
    for (size_t t = 0; t < n_out; ++t) {
      // An empty or all -inf slice gives -inf; a +inf max gives +inf (inf - inf is NaN).
      double r = std::isinf(peak[t]) ? peak[t] : peak[t] + std::log(sum[t]);
      y[t] = from_double<T>(r);
    }
    return;
  }

  // The rest fold with + or *, starting from 0 or 1 (the value of an empty reduction).
  bool uses_double = kind == ReduceKind::kL2 || kind == ReduceKind::kLogSum;
  if (uses_double) {
    std::vector<double> acc(n_out, 0.0);
    for (int64_t i = 0; i < in.numel(); ++i) {
      double v = static_cast<double>(x[i]);
      acc[static_cast<size_t>(targets[static_cast<size_t>(i)])] +=
          kind == ReduceKind::kL2 ? v * v : v;
    }
    for (size_t t = 0; t < n_out; ++t)
      y[t] = from_double<T>(kind == ReduceKind::kL2 ? std::sqrt(acc[t]) : std::log(acc[t]));
    return;
  }
  A init = kind == ReduceKind::kProd ? A(1) : A(0);
  std::vector<A> acc(n_out, init);
  for (int64_t i = 0; i < in.numel(); ++i) {
    A v = static_cast<A>(x[i]);
    A& a = acc[static_cast<size_t>(targets[static_cast<size_t>(i)])];
    switch (kind) {
      case ReduceKind::kProd: a *= v; break;
      case ReduceKind::kSumSquare: a += v * v; break;
      case ReduceKind::kL1:
        if constexpr (std::is_unsigned_v<A>) {
          a += v;
        } else {
          a += v < 0 ? -v : v;
        }
        break;
      default: a += v; break;
    }
  }
  for (size_t t = 0; t < n_out; ++t) {
    A r = acc[t];
    if (kind == ReduceKind::kMean) {
      if (per_output == 0) {
        if constexpr (kIsFloat<T>) r = std::numeric_limits<double>::quiet_NaN();
      } else {
        r = r / static_cast<A>(per_output);
      }
    }
    y[t] = static_cast<T>(r);
  }
}

// max is "any", min is "all"; the empty reduction gives false and true.
void reduce_bool(ReduceKind kind, const Tensor& in, const std::vector<int64_t>& targets,
                 Tensor& out) {
  bool is_max = kind == ReduceKind::kMax;
  const bool* x = in.data<bool>();
  bool* y = out.data<bool>();
  std::fill(y, y + out.numel(), !is_max);
  for (int64_t i = 0; i < in.numel(); ++i) {
    bool& r = y[targets[static_cast<size_t>(i)]];
    r = is_max ? (r || x[i]) : (r && x[i]);
  }
}

Status reduce_kernel(KernelContext& ctx, ReduceKind kind) {
  const Tensor& in = ctx.input(0);
  PG_ASSIGN_OR_RETURN(int64_t noop, ctx.attrs().get_int("noop_with_empty_axes", 0));
  int axes_input_since = ctx.node().op_type == "ReduceSum" ? 13 : 18;
  std::vector<int64_t> axes;
  if (ctx.opset() >= axes_input_since) {
    if (ctx.has_input(1)) axes = ctx.input(1).to_int64_vector();
  } else {
    PG_ASSIGN_OR_RETURN(axes, ctx.attrs().get_ints("axes", {}));
  }
  int64_t rank = in.rank();
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty() && noop == 0);
  for (int64_t axis : axes) {
    if (axis < -rank || axis >= rank)
      return ctx.error("axes entry " + std::to_string(axis) + " is out of range for rank " +
                       std::to_string(rank));
    reduced[static_cast<size_t>(axis < 0 ? axis + rank : axis)] = true;
  }
  std::vector<int64_t> targets = reduce_targets(in.shape(), reduced);
  Tensor& out = ctx.output(0);
  // The output's inferred shape must hold every reduced group (a model whose attributes and
  // inputs disagree could make them differ).
  for (int64_t t : targets)
    if (t >= out.numel())
      return ctx.error("the reduction gives more outputs than the inferred shape " +
                       shape_to_string(out.shape()) + " holds");
  if (in.dtype() == DType::kBool) {
    if (kind != ReduceKind::kMax && kind != ReduceKind::kMin)
      return ctx.error("bool input is only allowed for ReduceMax and ReduceMin");
    reduce_bool(kind, in, targets, out);
    return Status::ok();
  }
  return visit_numeric(in.dtype(), [&]<typename T>() { reduce_typed<T>(kind, in, targets, out); });
}

// Splits `shape` around `axis` into the products of the dims before and after it.
void split_at_axis(const Shape& shape, int64_t axis, int64_t& outer, int64_t& inner) {
  outer = 1;
  inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
}

Status arg_reduce_kernel(KernelContext& ctx, bool is_max) {
  const Tensor& in = ctx.input(0);
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  PG_ASSIGN_OR_RETURN(int64_t select_last, ctx.attrs().get_int("select_last_index", 0));
  int64_t rank = in.rank();
  if (axis < -rank || axis >= rank)
    return ctx.error("axis " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(rank));
  if (axis < 0) axis += rank;
  int64_t len = in.dim(axis);
  if (len == 0) return ctx.error("cannot take ArgMax/ArgMin over an empty axis");
  int64_t outer, inner;
  split_at_axis(in.shape(), axis, outer, inner);
  Tensor& out = ctx.output(0);
  int64_t* y = out.data<int64_t>();
  return visit_numeric(in.dtype(), [&]<typename T>() {
    const T* x = in.data<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const T* row = x + o * len * inner + i;
        int64_t best = 0;
        for (int64_t j = 1; j < len; ++j) {
          auto v = static_cast<Compare<T>>(row[j * inner]);
          auto b = static_cast<Compare<T>>(row[best * inner]);
          bool better = is_max ? v > b : v < b;
          bool tie = v == b;
          if (better || (tie && select_last != 0)) best = j;
        }
        y[o * inner + i] = best;
      }
    }
  });
}

Status topk_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
  PG_ASSIGN_OR_RETURN(int64_t largest, ctx.attrs().get_int("largest", 1));
  int64_t rank = in.rank();
  if (axis < -rank || axis >= rank)
    return ctx.error("axis " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(rank));
  if (axis < 0) axis += rank;
  int64_t k;
  if (ctx.opset() < 10) {
    PG_ASSIGN_OR_RETURN(k, ctx.attrs().get_int("k"));
  } else {
    if (!ctx.has_input(1) || ctx.input(1).numel() != 1 || !dtype_is_integer(ctx.input(1).dtype()))
      return ctx.error("input 'K' must hold one integer");
    k = ctx.input(1).get_as_int64(0);
  }
  int64_t len = in.dim(axis);
  if (k < 0 || k > len)
    return ctx.error("k " + std::to_string(k) + " is outside [0, " + std::to_string(len) + "]");
  int64_t outer, inner;
  split_at_axis(in.shape(), axis, outer, inner);
  Tensor& values = ctx.output(0);
  Tensor& indices = ctx.output(1);
  int64_t* idx_out = indices.data<int64_t>();
  return visit_numeric(in.dtype(), [&]<typename T>() {
    const T* x = in.data<T>();
    T* v_out = values.data<T>();
    std::vector<int64_t> order(static_cast<size_t>(len));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const T* row = x + o * len * inner + i;
        std::iota(order.begin(), order.end(), 0);
        // Always sorted (allowed when sorted=0); equal values keep the lower index first.
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          auto va = static_cast<Compare<T>>(row[a * inner]);
          auto vb = static_cast<Compare<T>>(row[b * inner]);
          if (largest != 0) std::swap(va, vb);
          // A strict weak order even with NaN: NaN ranks above every number, as in numpy.
          if constexpr (kIsFloat<T>) {
            if (std::isnan(va) || std::isnan(vb)) return !std::isnan(va) && std::isnan(vb);
          }
          return va < vb;
        });
        for (int64_t j = 0; j < k; ++j) {
          int64_t dst = (o * k + j) * inner + i;
          v_out[dst] = row[order[static_cast<size_t>(j)] * inner];
          idx_out[dst] = order[static_cast<size_t>(j)];
        }
      }
    }
  });
}

// CumSum, and CumProd (opset 26) with `product`: the running sum or product along one axis.
Status cumulative_kernel(KernelContext& ctx, bool product) {
  const Tensor& in = ctx.input(0);
  const Tensor& axis_t = ctx.input(1);
  PG_ASSIGN_OR_RETURN(int64_t exclusive, ctx.attrs().get_int("exclusive", 0));
  PG_ASSIGN_OR_RETURN(int64_t reverse, ctx.attrs().get_int("reverse", 0));
  if (axis_t.numel() != 1 || !dtype_is_integer(axis_t.dtype()))
    return ctx.error("input 'axis' must hold one integer");
  int64_t axis = axis_t.get_as_int64(0);
  int64_t rank = in.rank();
  if (axis < -rank || axis >= rank)
    return ctx.error("axis " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(rank));
  if (axis < 0) axis += rank;
  int64_t len = in.dim(axis);
  int64_t outer, inner;
  split_at_axis(in.shape(), axis, outer, inner);
  Tensor& out = ctx.output(0);
  return visit_numeric(in.dtype(), [&]<typename T>() {
    using A = Accum<T>;
    const T* x = in.data<T>();
    T* y = out.data<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        int64_t base = o * len * inner + i;
        A running = product ? 1 : 0;
        for (int64_t step = 0; step < len; ++step) {
          int64_t j = reverse != 0 ? len - 1 - step : step;
          int64_t at = base + j * inner;
          A v = static_cast<A>(x[at]);
          if (exclusive != 0) y[at] = static_cast<T>(running);
          running = product ? static_cast<A>(running * v) : static_cast<A>(running + v);
          if (exclusive == 0) y[at] = static_cast<T>(running);
        }
      }
    }
  });
}

}  // namespace

void register_reduce_kernels(KernelRegistry& r) {
  struct Entry {
    const char* op;
    ReduceKind kind;
  };
  for (Entry e : {Entry{"ReduceSum", ReduceKind::kSum}, Entry{"ReduceMean", ReduceKind::kMean},
                  Entry{"ReduceMax", ReduceKind::kMax}, Entry{"ReduceMin", ReduceKind::kMin},
                  Entry{"ReduceProd", ReduceKind::kProd}, Entry{"ReduceL1", ReduceKind::kL1},
                  Entry{"ReduceL2", ReduceKind::kL2}, Entry{"ReduceLogSum", ReduceKind::kLogSum},
                  Entry{"ReduceLogSumExp", ReduceKind::kLogSumExp},
                  Entry{"ReduceSumSquare", ReduceKind::kSumSquare}}) {
    ReduceKind kind = e.kind;
    r.add(kOnnxDomain, e.op, [kind](KernelContext& c) { return reduce_kernel(c, kind); });
  }
  r.add(kOnnxDomain, "ArgMax", [](KernelContext& c) { return arg_reduce_kernel(c, true); });
  r.add(kOnnxDomain, "ArgMin", [](KernelContext& c) { return arg_reduce_kernel(c, false); });
  r.add(kOnnxDomain, "TopK", topk_kernel);
  r.add(kOnnxDomain, "CumSum", [](KernelContext& c) { return cumulative_kernel(c, false); });
  r.add(kOnnxDomain, "CumProd", [](KernelContext& c) { return cumulative_kernel(c, true); });
}

}  // namespace peregrine
