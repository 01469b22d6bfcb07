// Schemas of the cast family: Cast and CastLike.
#include <iterator>
#include <string>

#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

// Types Cast can produce or read: everything but complex and undefined.
bool castable(DType t) {
  return t != DType::kUndefined && t != DType::kComplex64 && t != DType::kComplex128;
}

// Output 0: input 0's shape with element type `to`.
Status infer_cast_to(InferContext& ctx, DType to) {
  DType from = ctx.input_type(0).dtype;
  if (!castable(from))
    return ctx.error("cannot cast from element type " + std::string(dtype_name(from)));
  if (!castable(to))
    return ctx.error("cannot cast to element type " + std::string(dtype_name(to)));
  const ir::ValueType& in = ctx.input_type(0);
  if (in.has_shape) {
    ir::ValueType out = in;
    out.dtype = to;
    ctx.set_output(0, out);
  } else {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(to));
  }
  return Status::ok();
}

// Cast-24's round_mode (for float8e8m0 targets).
Status check_round_mode(const InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(std::string mode, ctx.attrs().get_string("round_mode", "up"));
  if (mode != "up" && mode != "down" && mode != "nearest")
    return ctx.error("attribute 'round_mode' = '" + mode + "' is not one of up, down, nearest");
  return Status::ok();
}

// Cast-1 names the type with a string ("FLOAT"); later versions use the enum value.
Expected<int64_t> cast_target(const InferContext& ctx) {
  if (ctx.opset() >= 6) return ctx.attrs().get_int("to");
  PG_ASSIGN_OR_RETURN(std::string name, ctx.attrs().get_string("to"));
  static const char* const kNames[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",   "UINT16",
                                       "INT16",     "INT32",  "INT64",     "STRING", "BOOL",
                                       "FLOAT16",   "DOUBLE", "UINT32",    "UINT64"};
  for (int64_t i = 1; i < static_cast<int64_t>(std::size(kNames)); ++i)
    if (name == kNames[i]) return i;
  return ctx.error("attribute 'to' = '" + name + "' is not a known element type");
}

Status infer_cast(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_ASSIGN_OR_RETURN(int64_t to, cast_target(ctx));
  if (to < 0 || to > kMaxDTypeValue || !dtype_is_valid(static_cast<int32_t>(to)))
    return ctx.error("attribute 'to' = " + std::to_string(to) + " is not a valid element type");
  PG_RETURN_IF_ERROR(check_round_mode(ctx));
  return infer_cast_to(ctx, static_cast<DType>(to));
}

Status infer_cast_like(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  PG_RETURN_IF_ERROR(check_round_mode(ctx));
  return infer_cast_to(ctx, ctx.input_type(1).dtype);
}

// BitCast (opset 26): the same bytes read as `to`, which must have the input's bit width.
Status infer_bit_cast(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_ASSIGN_OR_RETURN(int64_t to, ctx.attrs().get_int("to"));
  if (to < 0 || to > kMaxDTypeValue || !dtype_is_valid(static_cast<int32_t>(to)))
    return ctx.error("attribute 'to' = " + std::to_string(to) + " is not a valid element type");
  const DType from = ctx.input_type(0).dtype, target = static_cast<DType>(to);
  auto whole_bytes = [](DType t) {
    return t != DType::kString && dtype_packed_bits(t) == 0 && t != DType::kUndefined;
  };
  if (!whole_bytes(from) || !whole_bytes(target))
    return ctx.error("BitCast between " + std::string(dtype_name(from)) + " and " +
                     std::string(dtype_name(target)) +
                     " is not supported (strings and sub-byte types)");
  if (dtype_size(from) != dtype_size(target))
    return ctx.error("BitCast from " + std::string(dtype_name(from)) + " to " +
                     std::string(dtype_name(target)) + ": the bit widths differ");
  return infer_cast_to(ctx, target);
}

}  // namespace

void register_cast_schemas(SchemaRegistry& r) {
  r.add({kOnnxDomain, "Cast", 1, infer_cast, elementwise_cost(1)});
  r.add({kOnnxDomain, "CastLike", 15, infer_cast_like, elementwise_cost(1)});
  r.add({kOnnxDomain, "BitCast", 26, infer_bit_cast, elementwise_cost(0)});
}

}  // namespace peregrine
