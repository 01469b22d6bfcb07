#include "peregrine/dtype.h"

namespace peregrine {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32: case DType::kInt32: case DType::kUInt32: return 4;
    case DType::kFloat64: case DType::kInt64: case DType::kUInt64: case DType::kComplex64: return 8;
    case DType::kComplex128: return 16;
    case DType::kFloat16: case DType::kBFloat16: case DType::kInt16: case DType::kUInt16: return 2;
    case DType::kUInt8: case DType::kInt8: case DType::kBool: case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ: case DType::kFloat8E5M2: case DType::kFloat8E5M2FNUZ:
    case DType::kUInt4:
    case DType::kInt4:
    case DType::kFloat4E2M1:
    case DType::kFloat8E8M0:
    case DType::kUInt2:
    case DType::kInt2:
      return 1;
    case DType::kString: case DType::kUndefined: return 0;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kUndefined: return "undefined";
    case DType::kFloat32: return "float32";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kUInt16: return "uint16";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kString: return "string";
    case DType::kBool: return "bool";
    case DType::kFloat16: return "float16";
    case DType::kFloat64: return "float64";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kComplex64: return "complex64";
    case DType::kComplex128: return "complex128";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat8E4M3FN: return "float8e4m3fn";
    case DType::kFloat8E4M3FNUZ: return "float8e4m3fnuz";
    case DType::kFloat8E5M2: return "float8e5m2";
    case DType::kFloat8E5M2FNUZ: return "float8e5m2fnuz";
    case DType::kUInt4: return "uint4";
    case DType::kInt4: return "int4";
    case DType::kFloat4E2M1:
      return "float4e2m1";
    case DType::kFloat8E8M0:
      return "float8e8m0";
    case DType::kUInt2:
      return "uint2";
    case DType::kInt2:
      return "int2";
  }
  return "invalid";
}

int dtype_packed_bits(DType t) {
  switch (t) {
    case DType::kInt4:
    case DType::kUInt4:
    case DType::kFloat4E2M1:
      return 4;
    case DType::kInt2:
    case DType::kUInt2:
      return 2;
    default:
      return 0;
  }
}

bool dtype_is_valid(int32_t v) { return v >= 1 && v <= kMaxDTypeValue; }

bool dtype_is_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 ||
         t == DType::kBFloat16;
}

bool dtype_is_float8(DType t) {
  return t == DType::kFloat8E4M3FN || t == DType::kFloat8E4M3FNUZ || t == DType::kFloat8E5M2 ||
         t == DType::kFloat8E5M2FNUZ;
}

bool dtype_is_signed(DType t) {
  return t == DType::kInt8 || t == DType::kInt16 || t == DType::kInt32 || t == DType::kInt64 ||
         t == DType::kInt4 || t == DType::kInt2;
}

bool dtype_is_integer(DType t) {
  return dtype_is_signed(t) || t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kUInt32 ||
         t == DType::kUInt64 || t == DType::kUInt4 || t == DType::kUInt2;
}

}  // namespace peregrine
