// Schemas of the transformer family of the newest opsets:
//   RotaryEmbedding (opset 23): X (B, S, H * D) with num_heads, or (B, H, S, D); cos / sin caches
//     (P, R / 2) read at position_ids (B, S), or (B, S, R / 2) without them; R =
//     rotary_embedding_dim or D. Y has X's shape and type. float32.
//   Attention (opsets 23-25): Q (B, Sq, Hq * D) / K, V (B, Skv, Hkv * D) with q_num_heads and
//     kv_num_heads, or (B, H, S, D); attn_mask (bool or float, broadcast to (B, Hq, Sq, L),
//     padded on the last axis), past_key / past_value (B, Hkv, P, D), nonpad_kv_seqlen (B);
//     outputs Y (Q's layout, Dv wide), present_key / value (B, Hkv, P + Skv, D),
//     qk_matmul_output (B, Hq, Sq, L). float32.
//   LinearAttention (opset 27): Q (B, T, Hq * Dk), K (B, T, Hkv * Dk), V (B, T, Hkv * Dv), an
//     optional recurrent state (B, Hkv, Dk, Dv), decay (B, T, Hkv or Hkv * Dk) and beta
//     (B, T, Hkv or 1) as update_rule needs them; outputs Y (B, T, Hq * Dv) and the new state.
//     float types.
//   FlexAttention (ai.onnx.preview 1): Q (B, Hq, L, E), K (B, Hkv, S, E), V (B, Hkv, S, Ev), Hkv
//     dividing Hq; optional score_mod / prob_mod subgraphs over the (B, Hq, L, S) scores and
//     probabilities in softmax_precision. Y (B, Hq, L, Ev). float types.
//   CausalConvWithState (opset 27): a depthwise causal 1-D conv of X (B, C, L) with W (C, 1, K),
//     bias (C) and the last K - 1 positions of the previous call (B, C, K - 1); outputs Y
//     (B, C, L) and the new state (B, C, K - 1). float types.
#include "ops/elementwise_util.h"
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
  if (!dtype_is_float(q.dtype) || q.dtype == DType::kFloat64 || k.dtype != q.dtype ||
      v.dtype != q.dtype)
    return ctx.error("Q, K and V must be of one type: float32, float16 or bfloat16");
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

// The dims a rank-3 (B, T, H * D) input contributes: D given H, or -1 where unknown.
int64_t head_dim(const ir::ValueType& t, int64_t heads) {
  return t.has_shape && t.rank() == 3 && t.dims[2] >= 0 ? t.dims[2] / heads : -1;
}

Status infer_linear_attention(InferContext& ctx) {
  if (ctx.num_inputs() < 3) return ctx.error("expects query, key and value");
  PG_RETURN_IF_ERROR(require_same_class_inputs(ctx, 0, 3, TypeClass::kFloat));
  PG_ASSIGN_OR_RETURN(std::string rule, ctx.attrs().get_string("update_rule", "gated_delta"));
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    return ctx.error("update_rule '" + rule + "' is not one of linear, gated, delta, gated_delta");
  PG_ASSIGN_OR_RETURN(int64_t hq, ctx.attrs().get_int("q_num_heads", 0));
  PG_ASSIGN_OR_RETURN(int64_t hkv, ctx.attrs().get_int("kv_num_heads", 0));
  if (hq <= 0 || hkv <= 0 || hq % hkv != 0)
    return ctx.error("q_num_heads (" + std::to_string(hq) +
                     ") must be a positive multiple of kv_num_heads (" + std::to_string(hkv) + ")");
  const bool gated = rule == "gated" || rule == "gated_delta";
  const bool delta = rule == "delta" || rule == "gated_delta";
  const bool has_decay = ctx.num_inputs() > 4 && ctx.has_input(4);
  const bool has_beta = ctx.num_inputs() > 5 && ctx.has_input(5);
  if (gated != has_decay)
    return ctx.error("update_rule '" + rule + (gated ? "' needs" : "' takes no") + " decay input");
  if (delta != has_beta)
    return ctx.error("update_rule '" + rule + (delta ? "' needs" : "' takes no") + " beta input");
  const ir::ValueType& q = ctx.input_type(0);
  const ir::ValueType& k = ctx.input_type(1);
  const ir::ValueType& v = ctx.input_type(2);
  for (size_t i = 0; i < 6 && i < ctx.num_inputs(); ++i) {
    if (i == 3 || !ctx.has_input(i)) continue;
    const ir::ValueType& t = ctx.input_type(i);
    if (t.has_shape && t.rank() != 3)
      return ctx.error("input '" + ctx.node().inputs[i] +
                       "' must be rank 3 (B, T, H * D), has shape " + shape_to_string(t.dims));
    if (i > 3 && t.dtype != q.dtype) return ctx.error("decay and beta must have the query's type");
  }
  for (auto [t, heads] : {std::pair{&q, hq}, std::pair{&k, hkv}, std::pair{&v, hkv}})
    if (t->has_shape && t->dims[2] >= 0 && t->dims[2] % heads != 0)
      return ctx.error("last dim " + std::to_string(t->dims[2]) +
                       " is not a multiple of the head count " + std::to_string(heads));
  const int64_t dk = head_dim(q, hq), dv = head_dim(v, hkv);
  const int64_t batch = q.has_shape ? q.dims[0] : -1, steps = q.has_shape ? q.dims[1] : -1;
  DType state_type = q.dtype;
  if (ctx.num_inputs() > 3 && ctx.has_input(3)) {
    const ir::ValueType& past = ctx.input_type(3);
    if (!dtype_is_float(past.dtype)) return ctx.error("past_state must be a float type");
    state_type = past.dtype;
    if (past.is_static() && batch >= 0 && dk >= 0 && dv >= 0 &&
        past.dims != Shape{batch, hkv, dk, dv})
      return ctx.error(
          "past_state " + shape_to_string(past.dims) +
          " is not (B, kv_num_heads, Dk, Dv) = " + shape_to_string({batch, hkv, dk, dv}));
  }
  ctx.set_output(0, tensor_of(q.dtype, {batch, steps, dv < 0 ? -1 : hq * dv}));
  if (ctx.num_outputs() > 1) ctx.set_output(1, tensor_of(state_type, {batch, hkv, dk, dv}));
  return Status::ok();
}

Status infer_causal_conv_with_state(InferContext& ctx) {
  if (ctx.num_inputs() < 2) return ctx.error("expects input and weight");
  PG_RETURN_IF_ERROR(require_same_class_inputs(ctx, 0, 4, TypeClass::kFloat));
  PG_ASSIGN_OR_RETURN(std::string act, ctx.attrs().get_string("activation", "none"));
  if (act != "none" && act != "silu" && act != "swish")
    return ctx.error("activation '" + act + "' is not one of none, silu, swish");
  const ir::ValueType& x = ctx.input_type(0);
  const ir::ValueType& w = ctx.input_type(1);
  if (x.has_shape && x.rank() != 3)
    return ctx.error("input must be rank 3 (B, C, L), has shape " + shape_to_string(x.dims));
  if (w.has_shape && (w.rank() != 3 || (w.dims[1] >= 0 && w.dims[1] != 1)))
    return ctx.error("weight must be (C, 1, K), has shape " + shape_to_string(w.dims));
  const int64_t batch = x.has_shape ? x.dims[0] : -1, channels = x.has_shape ? x.dims[1] : -1;
  const int64_t kernel = w.has_shape ? w.dims[2] : -1;
  if (w.has_shape && channels >= 0 && w.dims[0] >= 0 && w.dims[0] != channels)
    return ctx.error("weight has " + std::to_string(w.dims[0]) + " channels, input " +
                     std::to_string(channels));
  if (kernel == 0) return ctx.error("weight's kernel size must be at least 1");
  const Shape state{batch, channels, kernel < 0 ? -1 : kernel - 1};
  if (ctx.num_inputs() > 3 && ctx.has_input(3)) {
    const ir::ValueType& past = ctx.input_type(3);
    if (past.is_static() && batch >= 0 && channels >= 0 && kernel >= 0 && past.dims != state)
      return ctx.error("past_state " + shape_to_string(past.dims) +
                       " is not (B, C, K - 1) = " + shape_to_string(state));
  }
  if (ctx.num_inputs() > 2 && ctx.has_input(2)) {
    const ir::ValueType& bias = ctx.input_type(2);
    if (bias.is_static() && channels >= 0 && bias.dims != Shape{channels})
      return ctx.error("bias " + shape_to_string(bias.dims) + " is not (C) = (" +
                       std::to_string(channels) + ")");
  }
  ctx.set_output(0, x.has_shape ? x : ir::ValueType::tensor_unknown_shape(x.dtype));
  if (ctx.num_outputs() > 1) ctx.set_output(1, tensor_of(x.dtype, state));
  return Status::ok();
}

Status infer_flex_attention(InferContext& ctx) {
  if (ctx.num_inputs() != 3) return ctx.error("expects Q, K and V");
  PG_RETURN_IF_ERROR(require_same_class_inputs(ctx, 0, 3, TypeClass::kFloat));
  PG_ASSIGN_OR_RETURN(int64_t precision, ctx.attrs().get_int("softmax_precision", 0));
  if (precision != 0 && precision != static_cast<int64_t>(DType::kFloat32) &&
      precision != static_cast<int64_t>(DType::kFloat64) &&
      precision != static_cast<int64_t>(DType::kFloat16) &&
      precision != static_cast<int64_t>(DType::kBFloat16))
    return ctx.error("softmax_precision " + std::to_string(precision) + " is not a float type");
  const ir::ValueType& q = ctx.input_type(0);
  const ir::ValueType& k = ctx.input_type(1);
  const ir::ValueType& v = ctx.input_type(2);
  for (const ir::ValueType* t : {&q, &k, &v})
    if (t->has_shape && t->rank() != 4)
      return ctx.error("Q, K and V must be rank 4, got " + shape_to_string(t->dims));
  if (!q.has_shape || !v.has_shape) {
    ctx.set_output(0, tensor_of(q.dtype, {-1, -1, -1, -1}));
    return Status::ok();
  }
  if (k.has_shape) {
    const int64_t hq = q.dims[1], hkv = k.dims[1];
    if (hq >= 0 && hkv > 0 && hq % hkv != 0)
      return ctx.error("K's " + std::to_string(hkv) + " heads do not divide Q's " +
                       std::to_string(hq));
    if (q.dims[3] >= 0 && k.dims[3] >= 0 && q.dims[3] != k.dims[3])
      return ctx.error("Q and K head sizes differ (" + std::to_string(q.dims[3]) + " and " +
                       std::to_string(k.dims[3]) + ")");
  }
  ctx.set_output(0, tensor_of(q.dtype, {q.dims[0], q.dims[1], q.dims[2], v.dims[3]}));
  return Status::ok();
}

double numel(const ir::ValueType& t) {
  double n = 1;
  for (int64_t d : t.dims) n *= static_cast<double>(d);
  return n;
}

// Per step: decay, retrieval, update of the state (about 6 flops per state entry) and the
// read-out by every query head (2 per entry).
OpCost linear_attention_cost(const ir::Node&, const std::vector<ir::ValueType>& in,
                             const std::vector<ir::ValueType>& out) {
  OpCost c = default_cost(in, out);
  if (out.size() > 1 && out[0].is_static() && out[1].is_static() && in[0].is_static() &&
      out[1].rank() == 4) {
    const double steps = static_cast<double>(in[0].dims[1]);
    c.flops = numel(out[1]) * steps * 6 + numel(out[0]) * static_cast<double>(out[1].dims[2]) * 2;
  }
  return c;
}

// 2 flops per tap per output element.
OpCost causal_conv_cost(const ir::Node&, const std::vector<ir::ValueType>& in,
                        const std::vector<ir::ValueType>& out) {
  OpCost c = default_cost(in, out);
  if (!out.empty() && out[0].is_static() && in.size() > 1 && in[1].is_static() && in[1].rank() == 3)
    c.flops = numel(out[0]) * static_cast<double>(in[1].dims[2]) * 2;
  return c;
}

}  // namespace

void register_transformer_schemas(SchemaRegistry& r) {
  r.add({kOnnxDomain, "RotaryEmbedding", 23, infer_rotary_embedding, elementwise_cost(4)});
  r.add({kOnnxDomain, "Attention", 23, infer_attention, elementwise_cost(4)});
  r.add({kPreviewDomain, "FlexAttention", 1, infer_flex_attention, elementwise_cost(4)});
  r.add({kOnnxDomain, "LinearAttention", 27, infer_linear_attention, linear_attention_cost});
  r.add({kOnnxDomain, "CausalConvWithState", 27, infer_causal_conv_with_state, causal_conv_cost});
}

}  // namespace peregrine
