// Schemas of the transformer family of the newest opsets:
//   RotaryEmbedding (opset 23): X (B, S, H * D) with num_heads, or (B, H, S, D); cos / sin caches
//     (P, R / 2) read at position_ids (B, S), or (B, S, R / 2) without them; R =
//     rotary_embedding_dim or D. Y has X's shape and type. float32.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

Status infer_rotary_embedding(InferContext& ctx) {
  if (ctx.num_inputs() < 3 || ctx.num_inputs() > 4)
    return ctx.error("expects 3 or 4 inputs (X, cos_cache, sin_cache, position_ids?)");
  for (size_t i = 0; i < 3; ++i) PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  const ir::ValueType& x = ctx.input_type(0);
  if (x.dtype != DType::kFloat32) return ctx.error("X must be float32");
  for (size_t i = 1; i < 3; ++i)
    if (ctx.input_type(i).dtype != x.dtype) return ctx.error("the caches must have X's type");
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 3, 4));
  PG_ASSIGN_OR_RETURN(int64_t heads, ctx.attrs().get_int("num_heads", 0));
  if (x.has_shape && x.rank() == 3 && heads <= 0)
    return ctx.error("a 3-D X needs the num_heads attribute");
  if (ctx.num_inputs() == 4 && ctx.has_input(3) && !dtype_is_integer(ctx.input_type(3).dtype))
    return ctx.error("position_ids must be integers");
  ctx.set_output(0, x);
  return Status::ok();
}

}  // namespace

void register_transformer_schemas(SchemaRegistry& r) {
  r.add({kOnnxDomain, "RotaryEmbedding", 23, infer_rotary_embedding, elementwise_cost(4)});
}

}  // namespace peregrine
