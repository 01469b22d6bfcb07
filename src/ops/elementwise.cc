// Schemas of elementwise ops: unary math, binary arithmetic with broadcasting,
// comparisons, logic, variadic (Sum/Mean/Max/Min) and Where.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

Status infer_binary_same_type(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  DType a = ctx.input_type(0).dtype, b = ctx.input_type(1).dtype;
  if (a != b)
    return ctx.error("inputs have different types (" + std::string(dtype_name(a)) + " and " +
                     std::string(dtype_name(b)) + ")");
  return infer_broadcast_output(ctx, a);
}

}  // namespace

void register_elementwise_schemas(SchemaRegistry& r) {
  for (const char* op : {"Add", "Sub", "Mul", "Div"})
    r.add({kOnnxDomain, op, 1, infer_binary_same_type, elementwise_cost(1)});
}

}  // namespace peregrine
