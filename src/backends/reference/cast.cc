// Reference kernels of the cast family: Cast and CastLike between every element
// type but complex, including float8, 4-bit integers, bool and string; BitCast.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"
#include "core/narrow_float.h"

namespace peregrine {

namespace {

// Types held as bytes in memory whose values are not plain integers.
template <DType D>
struct Float8Tag {};
struct Float8E8M0Tag {};
struct Float4E2M1Tag {};
template <int Bits, bool Signed>
struct SmallIntTag {};  // int4, uint4, int2, uint2 (unpacked)

template <typename T> struct StorageOf { using type = T; };
template <DType D> struct StorageOf<Float8Tag<D>> { using type = uint8_t; };
template <>
struct StorageOf<Float8E8M0Tag> {
  using type = uint8_t;
};
template <>
struct StorageOf<Float4E2M1Tag> {
  using type = uint8_t;
};
template <int Bits, bool Signed>
struct StorageOf<SmallIntTag<Bits, Signed>> {
  using type = std::conditional_t<Signed, int8_t, uint8_t>;
};
template <typename T> using Storage = typename StorageOf<T>::type;

template <typename T> inline constexpr bool kIsFloat8 = false;
template <DType D> inline constexpr bool kIsFloat8<Float8Tag<D>> = true;
template <typename T> inline constexpr DType kFloat8DType = DType::kUndefined;
template <DType D> inline constexpr DType kFloat8DType<Float8Tag<D>> = D;
template <typename T>
inline constexpr bool kIsSmallInt = false;
template <int Bits, bool Signed>
inline constexpr bool kIsSmallInt<SmallIntTag<Bits, Signed>> = true;
template <typename T>
struct SmallIntTraits;
template <int Bits, bool Signed>
struct SmallIntTraits<SmallIntTag<Bits, Signed>> {
  static constexpr int kBits = Bits;
  static constexpr bool kSigned = Signed;
};

template <typename T>
inline constexpr bool kIsNarrowFloat = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// Every non-string type Cast handles; strings take their own path.
template <typename F>
Status visit_castable(DType t, F&& fn) {
  switch (t) {
    case DType::kFloat8E4M3FN: fn.template operator()<Float8Tag<DType::kFloat8E4M3FN>>(); break;
    case DType::kFloat8E4M3FNUZ: fn.template operator()<Float8Tag<DType::kFloat8E4M3FNUZ>>(); break;
    case DType::kFloat8E5M2: fn.template operator()<Float8Tag<DType::kFloat8E5M2>>(); break;
    case DType::kFloat8E5M2FNUZ: fn.template operator()<Float8Tag<DType::kFloat8E5M2FNUZ>>(); break;
    case DType::kFloat8E8M0:
      fn.template operator()<Float8E8M0Tag>();
      break;
    case DType::kFloat4E2M1:
      fn.template operator()<Float4E2M1Tag>();
      break;
    case DType::kInt4:
      fn.template operator()<SmallIntTag<4, true>>();
      break;
    case DType::kUInt4:
      fn.template operator()<SmallIntTag<4, false>>();
      break;
    case DType::kInt2:
      fn.template operator()<SmallIntTag<2, true>>();
      break;
    case DType::kUInt2:
      fn.template operator()<SmallIntTag<2, false>>();
      break;
    default: return visit_numeric_or_bool(t, fn);
  }
  return Status::ok();
}

// The value of a stored element in a type C++ arithmetic understands.
template <typename T>
auto load_value(Storage<T> v) {
  if constexpr (kIsFloat8<T>) {
    return float8_to_float(v, float8_format(kFloat8DType<T>));
  } else if constexpr (std::is_same_v<T, Float8E8M0Tag>) {
    return float8e8m0_to_float(v);
  } else if constexpr (std::is_same_v<T, Float4E2M1Tag>) {
    return float4e2m1_to_float(v);
  } else if constexpr (kIsSmallInt<T>) {
    return static_cast<int64_t>(v);
  } else if constexpr (kIsNarrowFloat<T>) {
    return static_cast<float>(v);
  } else {
    return v;
  }
}

// Floating point to integer: truncates toward zero; NaN gives 0 and out-of-range
// values clamp (ONNX leaves both undefined; this keeps them deterministic).
template <typename U, typename V>
U float_to_integer(V v) {
  if (std::isnan(v)) return U(0);
  double t = std::trunc(static_cast<double>(v));
  const double lo = static_cast<double>(std::numeric_limits<U>::min());
  const double hi_exclusive = std::ldexp(1.0, std::numeric_limits<U>::digits);
  if (t < lo) return std::numeric_limits<U>::min();
  if (t >= hi_exclusive) return std::numeric_limits<U>::max();
  return static_cast<U>(t);
}

// The attributes that steer a conversion.
struct CastRules {
  bool saturate = true;                            // float8 targets (Cast-19)
  E8M0Rounding e8m0_rounding = E8M0Rounding::kUp;  // float8e8m0 targets (Cast-24's round_mode)
};

// Converts a loaded value to the storage of U by Cast's rules.
template <typename U, typename V>
Storage<U> store_value(V v, const CastRules& rules) {
  if constexpr (kIsFloat8<U>) {
    return float_to_float8(static_cast<float>(v), float8_format(kFloat8DType<U>), rules.saturate);
  } else if constexpr (std::is_same_v<U, Float8E8M0Tag>) {
    return float_to_float8e8m0(static_cast<float>(v), rules.saturate, rules.e8m0_rounding);
  } else if constexpr (std::is_same_v<U, Float4E2M1Tag>) {
    return float_to_float4e2m1(static_cast<float>(v));
  } else if constexpr (kIsSmallInt<U>) {
    constexpr int kBits = SmallIntTraits<U>::kBits;
    constexpr bool kSigned = SmallIntTraits<U>::kSigned;
    if constexpr (std::is_floating_point_v<V>) {
      return static_cast<Storage<U>>(float_to_small_int(static_cast<double>(v), kBits, kSigned));
    } else {
      return static_cast<Storage<U>>(wrap_small_int(static_cast<int64_t>(v), kBits, kSigned));
    }
  } else if constexpr (std::is_same_v<U, bool>) {
    return v != V(0);
  } else if constexpr (std::is_same_v<U, BFloat16>) {
    // Round to nearest even, as onnx's reference does since 1.18 (1.17's test data truncated).
    return BFloat16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<U, Float16>) {
    return U(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<U>) {
    return U(v);  // float or double: rounds to nearest
  } else if constexpr (std::is_floating_point_v<V>) {
    return float_to_integer<U>(v);
  } else {
    return static_cast<U>(v);  // integers wrap (two's complement), bool gives 0/1
  }
}

// ---- numbers to strings, formatted as numpy's str() does -------------------

// Shortest decimal that reads back as the same value of T, in scientific form
// ("d.ddde+XX"), split into its digits and decimal exponent.
template <typename T>
void shortest_digits(T value, std::string& digits, int& exponent) {
  char buf[64];
  std::string sci;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    auto res = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
    sci.assign(buf, res.ptr);
  } else {
    // Narrow formats: the fewest significant digits that round-trip through T.
    double v = static_cast<double>(static_cast<float>(value));
    for (int precision = 0; precision < 17; ++precision) {
      std::snprintf(buf, sizeof(buf), "%.*e", precision, v);
      float back = static_cast<float>(std::strtod(buf, nullptr));
      if (static_cast<float>(T(back)) == static_cast<float>(value)) break;
    }
    sci = buf;
  }
  size_t e = sci.find('e');
  exponent = std::atoi(sci.c_str() + e + 1);
  digits.clear();
  for (size_t i = 0; i < e; ++i)
    if (sci[i] >= '0' && sci[i] <= '9') digits.push_back(sci[i]);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
}

template <typename T>
std::string float_to_string(T value) {
  double v = static_cast<double>(value);
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  std::string sign = std::signbit(v) ? "-" : "";
  if (v == 0) return sign + "0.0";
  std::string digits;
  int exponent;
  shortest_digits(value, digits, exponent);  // the sign is not among the digits
  double magnitude = std::fabs(v);
  if (magnitude >= 1e-4 && magnitude < 1e16) {  // positional, like numpy
    std::string out;
    if (exponent >= 0) {
      std::string int_part = digits.substr(0, std::min<size_t>(digits.size(), exponent + 1));
      int_part.append(static_cast<size_t>(exponent + 1) - int_part.size(), '0');
      std::string frac = digits.size() > static_cast<size_t>(exponent) + 1
                             ? digits.substr(static_cast<size_t>(exponent) + 1)
                             : "0";
      out = int_part + "." + frac;
    } else {
      out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    }
    return sign + out;
  }
  std::string mantissa = digits.substr(0, 1);
  if (digits.size() > 1) mantissa += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return sign + mantissa + exp_buf;
}

template <typename T>
std::string value_to_string(Storage<T> stored) {
  auto v = load_value<T>(stored);
  using V = decltype(v);
  if constexpr (std::is_same_v<V, bool>) {
    return v ? "True" : "False";
  } else if constexpr (std::is_floating_point_v<V>) {
    if constexpr (kIsNarrowFloat<T>) return float_to_string<T>(stored);
    else return float_to_string<V>(v);
  } else {
    return std::to_string(v);
  }
}

// ---- strings to numbers ------------------------------------------------------

// Parses like onnx/numpy: decimal or scientific, "NaN", "INF", "+INF", "-INF" in any case.
double parse_double(const std::string& s) {
  const char* begin = s.c_str();
  char* end = nullptr;
  double v = std::strtod(begin, &end);
  if (end == begin) return std::nan("");
  return v;
}

template <typename U>
Storage<U> string_to_value(const std::string& s, const CastRules& rules) {
  if constexpr (std::is_integral_v<U> && !std::is_same_v<U, bool>) {
    // Whole integers parse exactly (int64 beyond 2^53 must not go through double).
    const char* begin = s.c_str();
    if (*begin == '+') ++begin;
    const char* end = s.c_str() + s.size();
    U parsed{};
    auto res = std::from_chars(begin, end, parsed);
    if (res.ec == std::errc() && res.ptr == end) return parsed;
  }
  return store_value<U>(parse_double(s), rules);
}

Status cast_tensor(KernelContext& ctx, const Tensor& in, Tensor& out, const CastRules& rules) {
  DType from = in.dtype(), to = out.dtype();
  const int64_t n = in.numel();
  if (from == to) {
    if (from == DType::kString) {
      out.strings() = in.strings();
    } else if (n > 0) {
      std::memcpy(out.raw(), in.raw(), in.nbytes());
    }
    return Status::ok();
  }
  if (from == DType::kString) {
    const std::vector<std::string>& src = in.strings();
    return visit_castable(to, [&]<typename U>() {
      Storage<U>* dst = out.data<Storage<U>>();
      for (int64_t i = 0; i < n; ++i) dst[i] = string_to_value<U>(src[i], rules);
    });
  }
  if (to == DType::kString) {
    std::vector<std::string>& dst = out.strings();
    return visit_castable(from, [&]<typename T>() {
      const Storage<T>* src = in.data<Storage<T>>();
      for (int64_t i = 0; i < n; ++i) dst[i] = value_to_string<T>(src[i]);
    });
  }
  Status inner = Status::ok();
  Status outer = visit_castable(from, [&]<typename T>() {
    inner = visit_castable(to, [&]<typename U>() {
      const Storage<T>* src = in.data<Storage<T>>();
      Storage<U>* dst = out.data<Storage<U>>();
      for (int64_t i = 0; i < n; ++i) dst[i] = store_value<U>(load_value<T>(src[i]), rules);
    });
  });
  PG_RETURN_IF_ERROR(outer);
  if (!inner.is_ok()) return ctx.error(inner.message());
  return Status::ok();
}

Status cast_kernel(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(int64_t saturate, ctx.attrs().get_int("saturate", 1));
  PG_ASSIGN_OR_RETURN(std::string round_mode, ctx.attrs().get_string("round_mode", "up"));
  CastRules rules;
  rules.saturate = saturate != 0;
  if (round_mode == "down")
    rules.e8m0_rounding = E8M0Rounding::kDown;
  else if (round_mode == "nearest")
    rules.e8m0_rounding = E8M0Rounding::kNearest;
  else if (round_mode != "up")
    return ctx.error("round_mode '" + round_mode + "' is not one of up, down, nearest");
  Status s = cast_tensor(ctx, ctx.input(0), ctx.output(0), rules);
  if (!s.is_ok() && s.message().find(ctx.node().describe()) == std::string::npos)
    return ctx.error(s.message());
  return s;
}

// BitCast: the input's bytes, unchanged, under the output's type (little endian, as the host).
Status bit_cast_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  if (y.nbytes() != x.nbytes()) return ctx.error("BitCast changes the byte size");
  if (x.nbytes() > 0) std::memcpy(y.raw(), x.raw(), x.nbytes());
  return Status::ok();
}

}  // namespace

void register_cast_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "Cast", cast_kernel);
  r.add(kOnnxDomain, "CastLike", cast_kernel);
  r.add(kOnnxDomain, "BitCast", bit_cast_kernel);
}

}  // namespace peregrine
