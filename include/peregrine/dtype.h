// Element types. Values equal onnx::TensorProto::DataType so import is a cast.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "peregrine/float_types.h"

namespace peregrine {

enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUInt4 = 21,       // held unpacked, one element per byte, in memory
  kInt4 = 22,        // held unpacked, one element per byte, in memory
  kFloat4E2M1 = 23,  // held unpacked, one element per byte, in memory
  kFloat8E8M0 = 24,  // an exponent only: 2^(code - 127), 0xFF is NaN
  kUInt2 = 25,       // held unpacked, one element per byte, in memory
  kInt2 = 26,        // held unpacked, one element per byte, in memory
};

inline constexpr int32_t kMaxDTypeValue = 26;

// Bytes one element occupies in memory (sub-byte types unpacked: 1). 0 for string/undefined.
size_t dtype_size(DType t);
// Bits one element occupies in a serialized tensor where that is less than a byte (int4, uint4,
// float4e2m1: 4; int2, uint2: 2; elements packed from the low bits up), else 0.
int dtype_packed_bits(DType t);
std::string_view dtype_name(DType t);  // "float32", "int64", ...
bool dtype_is_valid(int32_t v);
bool dtype_is_float(DType t);    // float16/bfloat16/float32/float64 (not float8)
bool dtype_is_float8(DType t);   // the four E4M3 / E5M2 formats (not E8M0)
bool dtype_is_integer(DType t);  // signed or unsigned, incl. 4-bit and 2-bit
bool dtype_is_signed(DType t);

// Maps a C++ storage type to its DType.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kFloat64;
};
template <>
struct DTypeOf<Float16> {
  static constexpr DType value = DType::kFloat16;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::kBFloat16;
};
template <>
struct DTypeOf<int8_t> {
  static constexpr DType value = DType::kInt8;
};
template <>
struct DTypeOf<int16_t> {
  static constexpr DType value = DType::kInt16;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kInt64;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::kUInt8;
};
template <>
struct DTypeOf<uint16_t> {
  static constexpr DType value = DType::kUInt16;
};
template <>
struct DTypeOf<uint32_t> {
  static constexpr DType value = DType::kUInt32;
};
template <>
struct DTypeOf<uint64_t> {
  static constexpr DType value = DType::kUInt64;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::kBool;
};
template <>
struct DTypeOf<std::string> {
  static constexpr DType value = DType::kString;
};

}  // namespace peregrine
