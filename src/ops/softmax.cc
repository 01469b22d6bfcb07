// Schemas of the softmax family: Softmax, LogSoftmax and Hardmax.
#include <string>

#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

// Output is the input's type; the axis must fit the rank (default 1 before opset 13, else -1).
// (Before 13 the kernel sees the input as 2-D [prod(dims[:axis]), prod(dims[axis:])].)
Status infer_softmax_like(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& in = ctx.input_type(0);
  if (!dtype_is_float(in.dtype))
    return ctx.error("element type " + std::string(dtype_name(in.dtype)) +
                     " is not allowed (float types only)");
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", ctx.opset() < 13 ? 1 : -1));
  if (in.has_shape) PG_RETURN_IF_ERROR(normalize_axis(ctx, axis, in.rank()).status());
  ctx.set_output(0, in);
  return Status::ok();
}

}  // namespace

void register_softmax_schemas(SchemaRegistry& r) {
  r.add({kOnnxDomain, "Softmax", 1, infer_softmax_like, elementwise_cost(4)});
  r.add({kOnnxDomain, "LogSoftmax", 1, infer_softmax_like, elementwise_cost(4)});
  r.add({kOnnxDomain, "Hardmax", 1, infer_softmax_like, elementwise_cost(1)});
}

}  // namespace peregrine
