// The reduction micro-kernels' bodies (contract: f32_reduce_ukernels.h), included once per ISA
// file inside that ISA's namespace, so each copy is compiled with its own flags. kLanes
// independent accumulators: enough vectors in flight to hide the add latency at every level.
// Max / Min fold with "take v when v > acc or v is NaN", which keeps a NaN once it is seen.
// The including file includes <cmath> and <cstddef> before opening its namespace.

namespace {

constexpr size_t kLanes = 64;

struct Sum {
  static float map(float v) { return v; }
  static float fold(float a, float v) { return a + v; }
};
struct SumAbs {
  static float map(float v) { return std::fabs(v); }
  static float fold(float a, float v) { return a + v; }
};
struct SumSquare {
  static float map(float v) { return v * v; }
  static float fold(float a, float v) { return a + v; }
};
struct Max {
  static float map(float v) { return v; }
  static float fold(float a, float v) { return (v > a || v != v) ? v : a; }
};
struct Min {
  static float map(float v) { return v; }
  static float fold(float a, float v) { return (v < a || v != v) ? v : a; }
};
struct Prod {
  static float map(float v) { return v; }
  static float fold(float a, float v) { return a * v; }
};

// Short rows (a 7x7 plane) would never fill kLanes: the rest of a row folds kShortLanes at a
// time before the scalar tail.
constexpr size_t kShortLanes = 16;

template <typename Op>
inline float row_fold(const float* x, size_t n, float init) {
  float acc[kLanes];
  for (size_t l = 0; l < kLanes; ++l) acc[l] = init;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l) acc[l] = Op::fold(acc[l], Op::map(x[i + l]));
  for (; i + kShortLanes <= n; i += kShortLanes)
    for (size_t l = 0; l < kShortLanes; ++l) acc[l] = Op::fold(acc[l], Op::map(x[i + l]));
  float r = init;
  for (size_t l = 0; l < kLanes; ++l) r = Op::fold(r, acc[l]);
  for (; i < n; ++i) r = Op::fold(r, Op::map(x[i]));
  return r;
}

template <typename Op>
inline void accumulate(const float* __restrict x, float* __restrict acc, size_t n) {
  for (size_t j = 0; j < n; ++j) acc[j] = Op::fold(acc[j], Op::map(x[j]));
}

template <typename F>
inline auto with_op(ReduceOp op, F f) {
  switch (op) {
    case ReduceOp::kSum: return f(Sum{});
    case ReduceOp::kSumAbs: return f(SumAbs{});
    case ReduceOp::kSumSquare: return f(SumSquare{});
    case ReduceOp::kMax: return f(Max{});
    case ReduceOp::kMin: return f(Min{});
    case ReduceOp::kProd: break;
  }
  return f(Prod{});
}

}  // namespace

#define PG_REDUCE_DEFINE(SUFFIX)                                                           \
  float f32_reduce_row__##SUFFIX(ReduceOp op, const float* x, size_t n) {                  \
    const float init = reduce_identity(op);                                                \
    return with_op(op, [&]<typename Op>(Op) { return row_fold<Op>(x, n, init); });         \
  }                                                                                        \
  void f32_reduce_accumulate__##SUFFIX(ReduceOp op, const float* x, float* acc, size_t n) { \
    with_op(op, [&]<typename Op>(Op) { accumulate<Op>(x, acc, n); });                      \
  }
