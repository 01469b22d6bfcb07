// Schemas of elementwise ops: unary math, binary arithmetic with broadcasting,
// comparisons, logic, variadic (Sum/Mean/Max/Min) and Where.
#include <string>
#include <vector>

#include "ops/elementwise_util.h"
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

// Two inputs of one element type in class c, broadcast; output has `out` type or the inputs'.
Status infer_binary(InferContext& ctx, TypeClass c, DType out = DType::kUndefined) {
  if (ctx.num_inputs() != 2) return ctx.error("expects 2 inputs");
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  PG_RETURN_IF_ERROR(require_same_class_inputs(ctx, 0, 2, c));
  return infer_broadcast_output(ctx, out == DType::kUndefined ? ctx.input_type(0).dtype : out);
}

// Sum/Mean/Max/Min: one or more inputs of one type, all broadcast together.
Status infer_variadic(InferContext& ctx, TypeClass c) {
  if (ctx.num_inputs() < 1) return ctx.error("expects at least 1 input");
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is required");
  PG_RETURN_IF_ERROR(require_same_class_inputs(ctx, 0, ctx.num_inputs(), c));
  return infer_broadcast_output(ctx, ctx.input_type(0).dtype);
}

Status infer_pow(InferContext& ctx) {
  if (ctx.num_inputs() != 2) return ctx.error("expects 2 inputs");
  PG_RETURN_IF_ERROR(require_input_class(ctx, 0, TypeClass::kNumeric));
  PG_RETURN_IF_ERROR(require_input_class(ctx, 1, TypeClass::kNumeric));
  return infer_broadcast_output(ctx, ctx.input_type(0).dtype);
}

Status infer_bool_unary(InferContext& ctx, TypeClass c) {
  PG_RETURN_IF_ERROR(require_input_class(ctx, 0, c));
  const ir::ValueType& in = ctx.input_type(0);
  if (in.has_shape) {
    ctx.set_output_tensor(0, DType::kBool, in.dims);
  } else {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(DType::kBool));
  }
  return Status::ok();
}

Status infer_where(InferContext& ctx) {
  if (ctx.num_inputs() != 3) return ctx.error("expects 3 inputs (condition, X, Y)");
  PG_RETURN_IF_ERROR(require_input_class(ctx, 0, TypeClass::kBool));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 2));
  PG_RETURN_IF_ERROR(require_same_class_inputs(ctx, 1, 2, TypeClass::kAnyTensor));
  return infer_broadcast_output(ctx, ctx.input_type(1).dtype);
}

Status infer_mod(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(int64_t fmod, ctx.attrs().get_int("fmod", 0));
  if (fmod != 0 && fmod != 1) return ctx.error("attribute 'fmod' must be 0 or 1");
  return infer_binary(ctx, TypeClass::kNumeric);
}

Status infer_bitshift(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(std::string direction, ctx.attrs().get_string("direction"));
  if (direction != "LEFT" && direction != "RIGHT")
    return ctx.error("attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"" + direction +
                     "\"");
  // Signed integers since opset 28 (arithmetic right shift).
  return infer_binary(ctx, ctx.opset() >= 28 ? TypeClass::kInteger : TypeClass::kUnsigned);
}

void add_unary(SchemaRegistry& r, const char* op, TypeClass c, double flops) {
  r.add({kOnnxDomain, op, 1, [c](InferContext& ctx) { return infer_unary_of_class(ctx, c); },
         elementwise_cost(flops)});
}

void add_binary(SchemaRegistry& r, const char* op, TypeClass c, DType out, double flops) {
  r.add({kOnnxDomain, op, 1, [c, out](InferContext& ctx) { return infer_binary(ctx, c, out); },
         elementwise_cost(flops)});
}

}  // namespace

void register_elementwise_schemas(SchemaRegistry& r) {
  // Cheap unary ops: one operation per element.
  for (const char* op : {"Floor", "Ceil", "Round", "Reciprocal"})
    add_unary(r, op, TypeClass::kFloat, 1);
  for (const char* op : {"Abs", "Sign"}) add_unary(r, op, TypeClass::kNumeric, 1);
  add_unary(r, "Neg", TypeClass::kSignedOrFloat, 1);
  add_unary(r, "Not", TypeClass::kBool, 1);
  add_unary(r, "BitwiseNot", TypeClass::kInteger, 1);
  // Transcendental functions: a polynomial evaluation or so each.
  add_unary(r, "Sqrt", TypeClass::kFloat, 4);
  for (const char* op : {"Exp", "Log", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh",
                         "Cosh", "Asinh", "Acosh", "Atanh", "Erf"})
    add_unary(r, op, TypeClass::kFloat, 10);

  r.add({kOnnxDomain, "IsNaN", 1,
         [](InferContext& ctx) { return infer_bool_unary(ctx, TypeClass::kFloat); },
         elementwise_cost(1)});
  r.add({kOnnxDomain, "IsInf", 1,
         [](InferContext& ctx) { return infer_bool_unary(ctx, TypeClass::kFloat); },
         elementwise_cost(1)});

  const DType kSame = DType::kUndefined;
  for (const char* op : {"Add", "Sub", "Mul"}) add_binary(r, op, TypeClass::kNumeric, kSame, 1);
  add_binary(r, "Div", TypeClass::kNumeric, kSame, 4);
  r.add({kOnnxDomain, "Mod", 1, infer_mod, elementwise_cost(4)});
  r.add({kOnnxDomain, "Pow", 1, infer_pow, elementwise_cost(10)});
  r.add({kOnnxDomain, "BitShift", 1, infer_bitshift, elementwise_cost(1)});
  for (const char* op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"})
    add_binary(r, op, TypeClass::kInteger, kSame, 1);
  for (const char* op : {"And", "Or", "Xor"}) add_binary(r, op, TypeClass::kBool, kSame, 1);
  add_binary(r, "Equal", TypeClass::kAnyTensor, DType::kBool, 1);
  for (const char* op : {"Greater", "Less", "GreaterOrEqual", "LessOrEqual"})
    add_binary(r, op, TypeClass::kNumeric, DType::kBool, 1);

  // Variadic ops combine the inputs pairwise: (inputs - 1) operations per output element.
  CostFn variadic_cost = [](const ir::Node& node, const std::vector<ir::ValueType>& in,
                            const std::vector<ir::ValueType>& out) {
    double pairs = in.size() > 1 ? static_cast<double>(in.size() - 1) : 1.0;
    return elementwise_cost(pairs)(node, in, out);
  };
  for (const char* op : {"Sum", "Mean"}) {
    r.add({kOnnxDomain, op, 1,
           [](InferContext& ctx) { return infer_variadic(ctx, TypeClass::kFloat); },
           variadic_cost});
  }
  for (const char* op : {"Max", "Min"}) {
    r.add({kOnnxDomain, op, 1,
           [](InferContext& ctx) { return infer_variadic(ctx, TypeClass::kNumeric); },
           variadic_cost});
  }
  r.add({kOnnxDomain, "Where", 1, infer_where, elementwise_cost(1)});
}

}  // namespace peregrine
