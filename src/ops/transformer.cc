// Schemas of the transformer family of the newest opsets:
//   RotaryEmbedding (opset 23): X (B, S, H * D) with num_heads, or (B, H, S, D); cos / sin caches
//     (P, R / 2) read at position_ids (B, S), or (B, S, R / 2) without them; R =
//     rotary_embedding_dim or D. Y has X's shape and type. float32.
//   Attention (opsets 23-25): Q (B, Sq, Hq * D) / K, V (B, Skv, Hkv * D) with q_num_heads and
//     kv_num_heads, or (B, H, S, D); attn_mask (bool or float, broadcast to (B, Hq, Sq, L),
//     padded on the last axis), past_key / past_value (B, Hkv, P, D), nonpad_kv_seqlen (B);
//     outputs Y (Q's layout, Dv wide), present_key / value (B, Hkv, P + Skv, D),
//     qk_matmul_output (B, Hq, Sq, L). float32.
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

// A value whose rank is known and whose dims may not be.
ir::ValueType tensor_of(DType t, const Shape& dims) { return ir::ValueType::tensor(t, dims); }

Status infer_attention(InferContext& ctx) {
  if (ctx.num_inputs() < 3) return ctx.error("expects Q, K and V");
  for (size_t i = 0; i < 3; ++i) PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  const ir::ValueType& q = ctx.input_type(0);
  const ir::ValueType& k = ctx.input_type(1);
  const ir::ValueType& v = ctx.input_type(2);
  if (q.dtype != DType::kFloat32 || k.dtype != q.dtype || v.dtype != q.dtype)
    return ctx.error("Q, K and V must be float32");
  if (!q.has_shape || !k.has_shape || !v.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(q.dtype));
    for (size_t i = 1; i < ctx.num_outputs(); ++i)
      ctx.set_output(i, ir::ValueType::tensor_unknown_shape(q.dtype));
    return Status::ok();
  }
  if ((q.rank() != 3 && q.rank() != 4) || k.rank() != q.rank() || v.rank() != q.rank())
    return ctx.error("Q, K and V must all be 3-D or all 4-D");
  PG_ASSIGN_OR_RETURN(int64_t q_heads, ctx.attrs().get_int("q_num_heads", 0));
  PG_ASSIGN_OR_RETURN(int64_t kv_heads, ctx.attrs().get_int("kv_num_heads", 0));
  const bool three_d = q.rank() == 3;
  if (three_d && (q_heads <= 0 || kv_heads <= 0))
    return ctx.error("3-D inputs need q_num_heads and kv_num_heads");
  auto div = [](int64_t a, int64_t b) { return a < 0 ? int64_t{-1} : a / b; };
  const int64_t batch = q.dims[0];
  const int64_t hq = three_d ? q_heads : q.dims[1], hkv = three_d ? kv_heads : k.dims[1];
  const int64_t sq = three_d ? q.dims[1] : q.dims[2], skv = three_d ? k.dims[1] : k.dims[2];
  const int64_t dk = three_d ? div(k.dims[2], kv_heads) : k.dims[3];
  const int64_t dv = three_d ? div(v.dims[2], kv_heads) : v.dims[3];
  int64_t past = 0;
  if (ctx.num_inputs() > 4 && ctx.has_input(4)) {
    const ir::ValueType& pk = ctx.input_type(4);
    past = pk.has_shape && pk.rank() == 4 ? pk.dims[2] : -1;
  }
  const int64_t total = past < 0 || skv < 0 ? -1 : past + skv;
  ctx.set_output(0, three_d ? tensor_of(q.dtype, {batch, sq, hq < 0 || dv < 0 ? -1 : hq * dv})
                            : tensor_of(q.dtype, {batch, hq, sq, dv}));
  if (ctx.num_outputs() > 1) ctx.set_output(1, tensor_of(q.dtype, {batch, hkv, total, dk}));
  if (ctx.num_outputs() > 2) ctx.set_output(2, tensor_of(q.dtype, {batch, hkv, total, dv}));
  if (ctx.num_outputs() > 3) ctx.set_output(3, tensor_of(q.dtype, {batch, hq, sq, total}));
  return Status::ok();
}

}  // namespace

void register_transformer_schemas(SchemaRegistry& r) {
  r.add({kOnnxDomain, "RotaryEmbedding", 23, infer_rotary_embedding, elementwise_cost(4)});
  r.add({kOnnxDomain, "Attention", 23, infer_attention, elementwise_cost(4)});
}

}  // namespace peregrine
