// CPU kernels of the elementwise ops that exporters emit around the GEMM-class nodes, beyond
// the vector micro-kernels of kernels/elementwise.cc:
//   float32 unary maps: Neg Abs Sqrt Reciprocal Floor Ceil Log Softplus Softsign Mish Swish
//     HardSigmoid HardSwish LeakyRelu Elu Selu Celu Clip (bounds as attributes or inputs);
//   float32 binary with broadcasting: Pow Max Min (two inputs) PRelu;
//   comparisons Equal Less LessOrEqual Greater GreaterOrEqual on float32 / int32 / int64 (and
//     bool for Equal), And Or on bool, Not, IsNaN IsInf, and Where on any fixed-size dtype.
// Maps are plain loops over contiguous runs, written so the compiler vectorizes the cheap ones
// for the baseline ISA; transcendental ones call std:: in float. Broadcasting merges the output
// dims into groups where every operand is full or broadcast alike (as kernels/elementwise.cc
// does for two operands, here for up to three): the innermost group is one loop with each
// operand's step 1 or 0, the outer groups an odometer over rows; tasks are runs of rows or
// pieces of one long row (kernels/broadcast_rows.h). Cases not handled (other dtypes, more than kMaxBroadcastGroups groups) run the
// reference kernel.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/broadcast_rows.h"
#include "backends/cpu/kernels/vector_ops.h"
#include "backends/cpu/thread_pool.h"
#include "ops/op_schema.h"

namespace peregrine::cpu {

namespace {

enum class MapOp {
  kNeg, kAbs, kSqrt, kReciprocal, kFloor, kCeil, kLog, kSoftplus, kSoftsign, kMish, kSwish,
  kHardSigmoid, kHardSwish, kLeakyRelu, kElu, kSelu, kCelu, kClip,                // unary
  kPow, kMax, kMin, kPRelu,                                                       // binary f32
  kEqual, kLess, kLessOrEqual, kGreater, kGreaterOrEqual, kAnd, kOr, kNot,        // to bool
  kWhere, kIsNaN, kIsInf,
};

struct MapOpName {
  const char* name;
  MapOp op;
};

constexpr MapOpName kMapOps[] = {
    {"Neg", MapOp::kNeg}, {"Abs", MapOp::kAbs}, {"Sqrt", MapOp::kSqrt},
    {"Reciprocal", MapOp::kReciprocal}, {"Floor", MapOp::kFloor}, {"Ceil", MapOp::kCeil},
    {"Log", MapOp::kLog}, {"Softplus", MapOp::kSoftplus}, {"Softsign", MapOp::kSoftsign},
    {"Mish", MapOp::kMish}, {"Swish", MapOp::kSwish}, {"HardSigmoid", MapOp::kHardSigmoid},
    {"HardSwish", MapOp::kHardSwish}, {"LeakyRelu", MapOp::kLeakyRelu}, {"Elu", MapOp::kElu},
    {"Selu", MapOp::kSelu}, {"Celu", MapOp::kCelu}, {"Clip", MapOp::kClip},
    {"Pow", MapOp::kPow}, {"Max", MapOp::kMax}, {"Min", MapOp::kMin}, {"PRelu", MapOp::kPRelu},
    {"Equal", MapOp::kEqual}, {"Less", MapOp::kLess}, {"LessOrEqual", MapOp::kLessOrEqual},
    {"Greater", MapOp::kGreater}, {"GreaterOrEqual", MapOp::kGreaterOrEqual},
    {"And", MapOp::kAnd}, {"Or", MapOp::kOr}, {"Not", MapOp::kNot}, {"Where", MapOp::kWhere},
    {"IsNaN", MapOp::kIsNaN}, {"IsInf", MapOp::kIsInf},
};

bool map_op_of(const ir::Node& node, MapOp* op) {
  if (!node.domain.empty() && node.domain != "ai.onnx") return false;
  for (const MapOpName& m : kMapOps)
    if (node.op_type == m.name) {
      *op = m.op;
      // Max / Min are variadic; the kernel takes the two-input form.
      if ((m.op == MapOp::kMax || m.op == MapOp::kMin) && node.inputs.size() != 2) return false;
      return true;
    }
  return false;
}

bool is_unary_f32(MapOp op) { return op <= MapOp::kClip; }
bool is_binary_f32(MapOp op) { return op >= MapOp::kPow && op <= MapOp::kPRelu; }

// y[i] = f(a[i * as], b[i * bs]); the all-contiguous case separate so it vectorizes.
template <typename A, typename B, typename Y, typename F>
inline void map2(const A* a, int64_t as, const B* b, int64_t bs, Y* y, int64_t n, F f) {
  if (as == 1 && bs == 1) {
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], b[i]);
  } else if (as == 1) {
    const B v = b[0];
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], v);
  } else if (bs == 1) {
    const A v = a[0];
    for (int64_t i = 0; i < n; ++i) y[i] = f(v, b[i]);
  } else {
    const Y v = f(a[0], b[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = v;
  }
}

// ---- the float32 unary maps -----------------------------------------------------------------

struct UnaryParams {
  float alpha = 0, beta = 0, gamma = 0;  // per op: see run_unary
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
};

template <typename F>
inline void map1(const float* x, float* y, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

inline float softplus(float v) {
  return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
}

void run_unary(MapOp op, const UnaryParams& p, const float* x, float* y, int64_t n) {
  const float alpha = p.alpha, beta = p.beta, gamma = p.gamma, lo = p.lo, hi = p.hi;
  switch (op) {
    case MapOp::kNeg: return map1(x, y, n, [](float v) { return -v; });
    case MapOp::kAbs: return map1(x, y, n, [](float v) { return std::fabs(v); });
    case MapOp::kSqrt: return map1(x, y, n, [](float v) { return std::sqrt(v); });
    case MapOp::kReciprocal: return map1(x, y, n, [](float v) { return 1.0f / v; });
    case MapOp::kFloor: return map1(x, y, n, [](float v) { return std::floor(v); });
    case MapOp::kCeil: return map1(x, y, n, [](float v) { return std::ceil(v); });
    case MapOp::kLog: return map1(x, y, n, [](float v) { return std::log(v); });
    case MapOp::kSoftplus: return map1(x, y, n, softplus);
    case MapOp::kSoftsign: return map1(x, y, n, [](float v) { return v / (1.0f + std::fabs(v)); });
    case MapOp::kMish: return map1(x, y, n, [](float v) { return v * std::tanh(softplus(v)); });
    case MapOp::kSwish:
      return map1(x, y, n, [=](float v) { return v / (1.0f + std::exp(-alpha * v)); });
    case MapOp::kHardSigmoid:
      return map1(x, y, n, [=](float v) { return std::max(0.0f, std::min(1.0f, alpha * v + beta)); });
    case MapOp::kHardSwish:
      return map1(x, y, n, [](float v) {
        return v * std::max(0.0f, std::min(1.0f, v * (1.0f / 6.0f) + 0.5f));
      });
    case MapOp::kLeakyRelu: return map1(x, y, n, [=](float v) { return v < 0 ? alpha * v : v; });
    case MapOp::kElu:
      return map1(x, y, n, [=](float v) { return v < 0 ? alpha * std::expm1(v) : v; });
    case MapOp::kSelu:
      return map1(x, y, n, [=](float v) {
        return v > 0 ? gamma * v : gamma * (alpha * std::exp(v) - alpha);
      });
    case MapOp::kCelu:
      return map1(x, y, n, [=](float v) {
        return std::max(0.0f, v) + std::min(0.0f, alpha * std::expm1(v / alpha));
      });
    case MapOp::kClip:
      return map1(x, y, n, [=](float v) {
        v = v < lo ? lo : v;
        return v > hi ? hi : v;
      });
    default: return;
  }
}

// ---- the kernel -----------------------------------------------------------------------------

class ElementwiseMapKernel : public PreparedKernel {
 public:
  ElementwiseMapKernel(MapOp op, UnaryParams params) : op_(op), params_(params) {}
  std::string name() const override { return "cpu/elementwise-map"; }

  Status run(KernelContext& ctx) override {
    if (is_unary_f32(op_)) return run_unary_op(ctx);
    if (op_ == MapOp::kNot) return run_not(ctx);
    if (op_ == MapOp::kWhere) return run_where(ctx);
    if (op_ == MapOp::kIsNaN || op_ == MapOp::kIsInf) return run_classify(ctx);
    return run_binary_op(ctx);
  }

 private:
  Status run_unary_op(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kFloat32) return run_reference(ctx);
    UnaryParams p = params_;
    if (op_ == MapOp::kClip && ctx.opset() >= 11) {
      for (size_t i = 1; i < 3; ++i) {
        if (!ctx.has_input(i)) continue;
        const Tensor& t = ctx.input(i);
        if (t.dtype() != DType::kFloat32 || t.numel() != 1) return run_reference(ctx);
        (i == 1 ? p.lo : p.hi) = t.data<float>()[0];
      }
    }
    Tensor& y = ctx.output_for_overwrite(0);
    const int64_t n = x.numel();
    if (n == 0) return Status::ok();
    const float* px = x.data<float>();
    float* py = y.data<float>();
    const int64_t chunk = kElementsPerTask / 4;
    cpu_thread_pool().parallel_for((n + chunk - 1) / chunk, ctx.num_threads(), [&](int64_t t, int) {
      const int64_t i0 = t * chunk;
      run_unary(op_, p, px + i0, py + i0, std::min(chunk, n - i0));
    });
    return Status::ok();
  }

  // IsNaN, IsInf (detect_negative / detect_positive in params_.lo / hi as 0 or 1).
  Status run_classify(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kFloat32) return run_reference(ctx);
    Tensor& y = ctx.output_for_overwrite(0);
    const float* px = x.data<float>();
    bool* py = y.data<bool>();
    const int64_t n = x.numel();
    if (op_ == MapOp::kIsNaN) {
      for (int64_t i = 0; i < n; ++i) py[i] = px[i] != px[i];
      return Status::ok();
    }
    const bool neg = params_.lo != 0, pos = params_.hi != 0;
    const float inf = std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) py[i] = (pos && px[i] == inf) || (neg && px[i] == -inf);
    return Status::ok();
  }

  Status run_not(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kBool) return run_reference(ctx);
    Tensor& y = ctx.output_for_overwrite(0);
    const bool* px = x.data<bool>();
    bool* py = y.data<bool>();
    for (int64_t i = 0; i < x.numel(); ++i) py[i] = !px[i];
    return Status::ok();
  }

  Status run_binary_op(KernelContext& ctx) {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    Tensor& y = ctx.output_for_overwrite(0);
    if (y.numel() == 0) return Status::ok();
    const Shape* shapes[] = {&a.shape(), &b.shape()};
    Broadcast g;
    if (!group_broadcast(shapes, 2, y.shape(), &g)) return run_reference(ctx);
    if (is_binary_f32(op_)) {
      if (a.dtype() != DType::kFloat32 || b.dtype() != DType::kFloat32 ||
          y.dtype() != DType::kFloat32)
        return run_reference(ctx);
      binary_f32(g, a.data<float>(), b.data<float>(), y.data<float>(), y.numel(),
                 ctx.num_threads());
      return Status::ok();
    }
    if (y.dtype() != DType::kBool || a.dtype() != b.dtype()) return run_reference(ctx);
    bool* py = y.data<bool>();
    if (op_ == MapOp::kAnd || op_ == MapOp::kOr) {
      if (a.dtype() != DType::kBool) return run_reference(ctx);
      const bool is_and = op_ == MapOp::kAnd;
      const bool* pa = a.data<bool>();
      const bool* pb = b.data<bool>();
      for_each_row(g, y.numel(), ctx.num_threads(),
                   [&](const int64_t* off, int64_t yo, int64_t len, const int64_t* st) {
                     if (is_and)
                       map2(pa + off[0], st[0], pb + off[1], st[1], py + yo, len,
                            [](bool p, bool q) { return p && q; });
                     else
                       map2(pa + off[0], st[0], pb + off[1], st[1], py + yo, len,
                            [](bool p, bool q) { return p || q; });
                   });
      return Status::ok();
    }
    auto compare = [&]<typename T>() {
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      for_each_row(g, y.numel(), ctx.num_threads(),
                   [&](const int64_t* off, int64_t yo, int64_t len, const int64_t* st) {
                     const T* x0 = pa + off[0];
                     const T* x1 = pb + off[1];
                     bool* out = py + yo;
                     switch (op_) {
                       case MapOp::kEqual:
                         return map2(x0, st[0], x1, st[1], out, len, [](T p, T q) { return p == q; });
                       case MapOp::kLess:
                         return map2(x0, st[0], x1, st[1], out, len, [](T p, T q) { return p < q; });
                       case MapOp::kLessOrEqual:
                         return map2(x0, st[0], x1, st[1], out, len, [](T p, T q) { return p <= q; });
                       case MapOp::kGreater:
                         return map2(x0, st[0], x1, st[1], out, len, [](T p, T q) { return p > q; });
                       default:
                         return map2(x0, st[0], x1, st[1], out, len, [](T p, T q) { return p >= q; });
                     }
                   });
    };
    switch (a.dtype()) {
      case DType::kFloat32: compare.operator()<float>(); break;
      case DType::kInt64: compare.operator()<int64_t>(); break;
      case DType::kInt32: compare.operator()<int32_t>(); break;
      case DType::kBool:
        if (op_ != MapOp::kEqual) return run_reference(ctx);
        compare.operator()<bool>();
        break;
      default: return run_reference(ctx);
    }
    return Status::ok();
  }

  void binary_f32(const Broadcast& g, const float* pa, const float* pb, float* py, int64_t n,
                  int threads) {
    const MapOp op = op_;
    for_each_row(g, n, threads, [&](const int64_t* off, int64_t yo, int64_t len, const int64_t* st) {
      const float* x0 = pa + off[0];
      const float* x1 = pb + off[1];
      float* out = py + yo;
      switch (op) {
        case MapOp::kPow:
          if (st[0] == 1 && st[1] == 0 && x1[0] == 2.0f)  // x^2 is exact as x * x
            return map1(x0, out, len, [](float v) { return v * v; });
          return map2(x0, st[0], x1, st[1], out, len, [](float p, float q) { return std::pow(p, q); });
        case MapOp::kMax:
          return map2(x0, st[0], x1, st[1], out, len, [](float p, float q) {
            return (p != p || q != q) ? std::numeric_limits<float>::quiet_NaN() : (p < q ? q : p);
          });
        case MapOp::kMin:
          return map2(x0, st[0], x1, st[1], out, len, [](float p, float q) {
            return (p != p || q != q) ? std::numeric_limits<float>::quiet_NaN() : (q < p ? q : p);
          });
        default:  // PRelu: x, slope
          return map2(x0, st[0], x1, st[1], out, len, [](float v, float s) { return v < 0 ? s * v : v; });
      }
    });
  }

  // out[i] = c[i * st[0]] ? a[i * st[1]] : b[i * st[2]]. Strides of 0 (a broadcast operand) and
  // 1 as constants, so the compiler vectorizes the common rows (attention masks: a condition
  // and one operand per element, a scalar fill).
  template <typename T>
  static void select_row(const bool* c, const T* a, const T* b, T* out, int64_t len,
                         const int64_t* st) {
    // Branch-free (the bool as an all-ones or all-zeros mask), which the compiler vectorizes.
    auto rows = [&]<int C, int A, int B>() {
      const uint8_t* cb = reinterpret_cast<const uint8_t*>(c);
      for (int64_t i = 0; i < len; ++i) {
        const T mask = static_cast<T>(T{0} - static_cast<T>(cb[i * C] != 0));
        out[i] = static_cast<T>((a[i * A] & mask) | (b[i * B] & static_cast<T>(~mask)));
      }
    };
    const int key = (st[0] == 1 ? 1 : 0) | (st[1] == 1 ? 2 : 0) | (st[2] == 1 ? 4 : 0);
    const bool unit_or_zero = (st[0] == 0 || st[0] == 1) && (st[1] == 0 || st[1] == 1) &&
                              (st[2] == 0 || st[2] == 1);
    if (unit_or_zero) {
      switch (key) {
        case 7: return rows.template operator()<1, 1, 1>();
        case 1: return rows.template operator()<1, 0, 0>();
        case 3: return rows.template operator()<1, 1, 0>();
        case 5: return rows.template operator()<1, 0, 1>();
        default: break;
      }
    }
    for (int64_t i = 0; i < len; ++i) out[i] = c[i * st[0]] ? a[i * st[1]] : b[i * st[2]];
  }

  Status run_where(KernelContext& ctx) {
    const Tensor& c = ctx.input(0);
    const Tensor& a = ctx.input(1);
    const Tensor& b = ctx.input(2);
    Tensor& y = ctx.output_for_overwrite(0);
    if (y.numel() == 0) return Status::ok();
    if (c.dtype() != DType::kBool || a.dtype() != b.dtype() || y.dtype() != a.dtype() ||
        a.dtype() == DType::kString)
      return run_reference(ctx);
    const Shape* shapes[] = {&c.shape(), &a.shape(), &b.shape()};
    Broadcast g;
    if (!group_broadcast(shapes, 3, y.shape(), &g)) return run_reference(ctx);
    const bool* pc = c.data<bool>();
    auto select = [&]<typename T>() {
      const T* pa = static_cast<const T*>(a.raw());
      const T* pb = static_cast<const T*>(b.raw());
      T* py = static_cast<T*>(y.raw());
      for_each_row(g, y.numel(), ctx.num_threads(),
                   [&](const int64_t* off, int64_t yo, int64_t len, const int64_t* st) {
                     select_row<T>(pc + off[0], pa + off[1], pb + off[2], py + yo, len, st);
                   });
    };
    switch (dtype_size(a.dtype())) {
      case 1: select.operator()<uint8_t>(); break;
      case 2: select.operator()<uint16_t>(); break;
      case 4: select.operator()<uint32_t>(); break;
      case 8: select.operator()<uint64_t>(); break;
      default: return run_reference(ctx);
    }
    return Status::ok();
  }

  MapOp op_;
  UnaryParams params_;
};

}  // namespace

bool claims_elementwise_map(const ir::Node& node) {
  MapOp op;
  return map_op_of(node, &op);
}

Expected<std::unique_ptr<PreparedKernel>> prepare_elementwise_map(const ir::Node& node) {
  MapOp op;
  if (!map_op_of(node, &op)) return unsupported(node.describe() + ": not an elementwise map");
  ir::AttrView attrs(node);
  UnaryParams p;
  switch (op) {
    case MapOp::kHardSigmoid: {
      PG_ASSIGN_OR_RETURN(p.alpha, attrs.get_float("alpha", 0.2f));
      PG_ASSIGN_OR_RETURN(p.beta, attrs.get_float("beta", 0.5f));
      break;
    }
    case MapOp::kLeakyRelu: {
      PG_ASSIGN_OR_RETURN(p.alpha, attrs.get_float("alpha", 0.01f));
      break;
    }
    case MapOp::kElu:
    case MapOp::kSwish:
    case MapOp::kCelu: {
      PG_ASSIGN_OR_RETURN(p.alpha, attrs.get_float("alpha", 1.0f));
      break;
    }
    case MapOp::kSelu: {
      PG_ASSIGN_OR_RETURN(p.alpha, attrs.get_float("alpha", 1.67326319217681884765625f));
      PG_ASSIGN_OR_RETURN(p.gamma, attrs.get_float("gamma", 1.05070102214813232421875f));
      break;
    }
    case MapOp::kIsInf: {
      PG_ASSIGN_OR_RETURN(int64_t neg, attrs.get_int("detect_negative", 1));
      PG_ASSIGN_OR_RETURN(int64_t pos, attrs.get_int("detect_positive", 1));
      p.lo = neg != 0 ? 1.0f : 0.0f;
      p.hi = pos != 0 ? 1.0f : 0.0f;
      break;
    }
    case MapOp::kClip:
      if (node.opset < 11) {
        PG_ASSIGN_OR_RETURN(p.lo, attrs.get_float("min", -std::numeric_limits<float>::max()));
        PG_ASSIGN_OR_RETURN(p.hi, attrs.get_float("max", std::numeric_limits<float>::max()));
      }
      break;
    default:
      break;
  }
  return std::unique_ptr<PreparedKernel>(new ElementwiseMapKernel(op, p));
}

}  // namespace peregrine::cpu
