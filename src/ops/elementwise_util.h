// Inference pieces shared by the elementwise and activation schemas: element
// type classes that ops accept, and unary / broadcast inference that checks them.
#pragma once

#include <string>

#include "ops/infer_helpers.h"

namespace peregrine {

// The element types an op accepts, as ONNX's type constraints group them.
enum class TypeClass {
  kFloat,          // float16, bfloat16, float32, float64
  kSignedOrFloat,  // floats and signed integers (Neg, Abs-like ops on signed data)
  kNumeric,        // floats and 8..64-bit integers
  kInteger,        // 8..64-bit integers
  kUnsigned,       // 8..64-bit unsigned integers
  kBool,
  kNumericOrBool,
  kAnyTensor,      // numeric, bool or string
};

inline bool is_plain_integer(DType t) {
  switch (t) {
    case DType::kInt8: case DType::kInt16: case DType::kInt32: case DType::kInt64:
    case DType::kUInt8: case DType::kUInt16: case DType::kUInt32: case DType::kUInt64:
      return true;
    default:
      return false;
  }
}

inline bool dtype_in_class(DType t, TypeClass c) {
  switch (c) {
    case TypeClass::kFloat: return dtype_is_float(t);
    case TypeClass::kSignedOrFloat:
      return dtype_is_float(t) || (is_plain_integer(t) && dtype_is_signed(t));
    case TypeClass::kNumeric: return dtype_is_float(t) || is_plain_integer(t);
    case TypeClass::kInteger: return is_plain_integer(t);
    case TypeClass::kUnsigned: return is_plain_integer(t) && !dtype_is_signed(t);
    case TypeClass::kBool: return t == DType::kBool;
    case TypeClass::kNumericOrBool:
      return t == DType::kBool || dtype_is_float(t) || is_plain_integer(t);
    case TypeClass::kAnyTensor:
      return t == DType::kBool || t == DType::kString || dtype_is_float(t) || is_plain_integer(t);
  }
  return false;
}

inline const char* type_class_name(TypeClass c) {
  switch (c) {
    case TypeClass::kFloat: return "a float type";
    case TypeClass::kSignedOrFloat: return "a float or signed integer type";
    case TypeClass::kNumeric: return "a numeric type";
    case TypeClass::kInteger: return "an integer type";
    case TypeClass::kUnsigned: return "an unsigned integer type";
    case TypeClass::kBool: return "bool";
    case TypeClass::kNumericOrBool: return "a numeric or bool type";
    case TypeClass::kAnyTensor: return "a numeric, bool or string type";
  }
  return "?";
}

// Input i is a tensor whose element type is in class c.
inline Status require_input_class(const InferContext& ctx, size_t i, TypeClass c) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  DType t = ctx.input_type(i).dtype;
  if (!dtype_in_class(t, c))
    return ctx.error("input '" + ctx.node().inputs[i] + "' has element type " +
                     std::string(dtype_name(t)) + ", expected " + type_class_name(c));
  return Status::ok();
}

// Unary op: output 0 has input 0's type, which must be in class c.
inline Status infer_unary_of_class(InferContext& ctx, TypeClass c) {
  PG_RETURN_IF_ERROR(require_input_class(ctx, 0, c));
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

// Inputs [first, first + count) present are tensors of class c sharing input `first`'s
// element type (absent optional inputs are skipped).
inline Status require_same_class_inputs(const InferContext& ctx, size_t first, size_t count,
                                        TypeClass c) {
  PG_RETURN_IF_ERROR(require_input_class(ctx, first, c));
  DType want = ctx.input_type(first).dtype;
  for (size_t i = first + 1; i < first + count && i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    PG_RETURN_IF_ERROR(require_input_class(ctx, i, c));
    DType got = ctx.input_type(i).dtype;
    if (got != want)
      return ctx.error("inputs have different element types (" + std::string(dtype_name(want)) +
                       " and " + std::string(dtype_name(got)) + ")");
  }
  return Status::ok();
}

}  // namespace peregrine
