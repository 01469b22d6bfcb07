// The reduction micro-kernels' bodies (contract: f32_reduce_ukernels.h), included once per ISA
// file inside that ISA's namespace, so each copy is compiled with its own flags.
// Max / Min fold with "take v when v > acc or v is NaN", which keeps a NaN once it is seen.
// The including file includes <cmath>, <cstddef>, <cstdint> and <cstring> before opening its
// namespace.

namespace {

// Rows fold in 16-float vectors (GCC vector extensions: one zmm on AVX-512, two ymm on AVX2,
// scalar code at the scalar level), four of them in flight over long rows; the lanes are then
// folded by halving. Lane arrays left to the auto-vectorizer were folded one lane after another,
// a chain of dependent scalar steps per row that dominated short rows (ReduceMean over a 7x7
// map, bench: MnasNet's head in bench/compare.py).
// Passing these by value below AVX-512 changes no ABI that matters: every function taking them
// is internal to this file's namespace.
#pragma GCC diagnostic ignored "-Wpsabi"
using V16 = float __attribute__((vector_size(64)));
using V8 = float __attribute__((vector_size(32)));
using V4 = float __attribute__((vector_size(16)));
using I16 = int32_t __attribute__((vector_size(64)));
constexpr size_t kVector = 16, kVectors = 4;

template <typename V>
inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline float abs_of(float v) { return std::fabs(v); }
inline V16 abs_of(V16 v) {
  I16 bits;
  std::memcpy(&bits, &v, sizeof v);
  bits &= 0x7fffffff;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// Each op's map and fold for a float and for a vector of floats.
struct Sum {
  template <typename T>
  static T map(T v) {
    return v;
  }
  template <typename T>
  static T fold(T a, T v) {
    return a + v;
  }
};
struct SumAbs {
  template <typename T>
  static T map(T v) {
    return abs_of(v);
  }
  template <typename T>
  static T fold(T a, T v) {
    return a + v;
  }
};
struct SumSquare {
  template <typename T>
  static T map(T v) {
    return v * v;
  }
  template <typename T>
  static T fold(T a, T v) {
    return a + v;
  }
};
struct Max {
  template <typename T>
  static T map(T v) {
    return v;
  }
  template <typename T>
  static T fold(T a, T v) {
    return (v > a || v != v) ? v : a;
  }
};
struct Min {
  template <typename T>
  static T map(T v) {
    return v;
  }
  template <typename T>
  static T fold(T a, T v) {
    return (v < a || v != v) ? v : a;
  }
};
struct Prod {
  template <typename T>
  static T map(T v) {
    return v;
  }
  template <typename T>
  static T fold(T a, T v) {
    return a * v;
  }
};

// The fold of a vector's lanes, by halving.
template <typename Op>
inline float fold_lanes(V16 v) {
  const V8 lo = load<V8>(reinterpret_cast<const float*>(&v));
  const V8 hi = load<V8>(reinterpret_cast<const float*>(&v) + 8);
  const V8 h8 = Op::fold(lo, hi);
  const V4 h4 = Op::fold(load<V4>(reinterpret_cast<const float*>(&h8)),
                         load<V4>(reinterpret_cast<const float*>(&h8) + 4));
  const float a = Op::fold(h4[0], h4[2]), b = Op::fold(h4[1], h4[3]);
  return Op::fold(a, b);
}

template <typename Op>
inline float row_fold(const float* x, size_t n, float init) {
  const V16 identity = V16{} + init;
  V16 acc[kVectors] = {identity, identity, identity, identity};
  size_t i = 0;
  for (; i + kVector * kVectors <= n; i += kVector * kVectors)
    for (size_t l = 0; l < kVectors; ++l)
      acc[l] = Op::fold(acc[l], Op::map(load<V16>(x + i + l * kVector)));
  acc[0] = Op::fold(Op::fold(acc[0], acc[1]), Op::fold(acc[2], acc[3]));
  for (; i + kVector <= n; i += kVector) acc[0] = Op::fold(acc[0], Op::map(load<V16>(x + i)));
  if (i < n) {  // the tail in a vector of identities, whose map is the identity again
    float tail[kVector];
    for (size_t l = 0; l < kVector; ++l) tail[l] = i + l < n ? x[i + l] : init;
    acc[0] = Op::fold(acc[0], Op::map(load<V16>(tail)));
  }
  return fold_lanes<Op>(acc[0]);
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
