// Reference kernels of the transformer family (ops/transformer.cc).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"
#include "ops/op_schema.h"

namespace peregrine {

namespace {

// RotaryEmbedding: per token and head, the first R channels rotate in pairs — (x1, x2) is
// (channel i, channel i + R / 2), or (2i, 2i + 1) when interleaved — by the angle whose cosine
// and sine the caches hold for that token's position; the channels past R pass through.
Status rotary_embedding_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& cos = ctx.input(1);
  const Tensor& sin = ctx.input(2);
  const Tensor* ids = ctx.num_inputs() > 3 && ctx.has_input(3) ? &ctx.input(3) : nullptr;
  PG_ASSIGN_OR_RETURN(int64_t interleaved, ctx.attrs().get_int("interleaved", 0));
  PG_ASSIGN_OR_RETURN(int64_t heads, ctx.attrs().get_int("num_heads", 0));
  PG_ASSIGN_OR_RETURN(int64_t rotary, ctx.attrs().get_int("rotary_embedding_dim", 0));
  const bool four_d = x.rank() == 4;
  const int64_t batch = x.dim(0), seq = four_d ? x.dim(2) : x.dim(1);
  if (!four_d) {
    if (heads <= 0 || x.dim(2) % heads != 0)
      return ctx.error("hidden size " + std::to_string(x.dim(2)) + " is not a multiple of num_heads");
  } else {
    heads = x.dim(1);
  }
  const int64_t head_size = four_d ? x.dim(3) : x.dim(2) / heads;
  if (rotary == 0) rotary = head_size;
  if (rotary < 0 || rotary > head_size || rotary % 2 != 0)
    return ctx.error("rotary_embedding_dim " + std::to_string(rotary) + " must be even and at most the head size " +
                     std::to_string(head_size));
  const int64_t half = rotary / 2;
  if (cos.shape() != sin.shape() || cos.rank() < 2 || cos.dim(cos.rank() - 1) != half)
    return ctx.error("cos_cache and sin_cache must have one shape ending in rotary_embedding_dim / 2 = " +
                     std::to_string(half));
  if (ids) {
    if (cos.rank() != 2 || ids->shape() != Shape{batch, seq})
      return ctx.error("with position_ids (batch, sequence) the caches must be (positions, rotary / 2)");
  } else if (cos.shape() != Shape{batch, seq, half}) {
    return ctx.error("without position_ids the caches must be (batch, sequence, rotary / 2)");
  }
  Tensor& y = ctx.output(0);
  const float* px = x.data<float>();
  float* py = y.data<float>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s) {
      int64_t row = b * seq + s;  // the caches' row for this token
      if (ids) {
        row = ids->get_as_int64(b * seq + s);
        if (row < 0 || row >= cos.dim(0))
          return ctx.error("position id " + std::to_string(row) + " is outside the caches' " +
                           std::to_string(cos.dim(0)) + " positions");
      }
      const float* c = cos.data<float>() + row * half;
      const float* sn = sin.data<float>() + row * half;
      for (int64_t h = 0; h < heads; ++h) {
        // Element (b, s, h, d) of X: (B, S, H * D) or (B, H, S, D).
        const int64_t base = four_d ? ((b * heads + h) * seq + s) * head_size
                                    : (b * seq + s) * heads * head_size + h * head_size;
        const float* in = px + base;
        float* out = py + base;
        for (int64_t i = 0; i < half; ++i) {
          const int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
          const float x1 = in[i1], x2 = in[i2];
          out[i1] = c[i] * x1 - sn[i] * x2;
          out[i2] = sn[i] * x1 + c[i] * x2;
        }
        for (int64_t d = rotary; d < head_size; ++d) out[d] = in[d];
      }
    }
  return Status::ok();
}

// Attention, as onnx's reference computes it: Q and K each scaled by sqrt(scale), the
// product softcapped, then the bias (mask, causal frontier, sliding window, padding) added; a
// softmax per query row (a row with every key masked gives zeros); Y = P V. Query head h reads
// key / value head h / (Hq / Hkv). The causal and window frontiers are bottom-right aligned:
// query i sees key j <= i + offset, offset the past length (or nonpad_kv_seqlen - Sq).
// float16 / bfloat16 attention computes on float32 copies and rounds each output once.
// One Attention node's operands, sizes and attributes, with element accessors in (b, h, s, d)
// for either layout; K / V positions below `past` come from the cache.
struct AttentionProblem {
  const Tensor& q;
  const Tensor& k;
  const Tensor& v;
  const Tensor* mask;
  const Tensor* past_k;
  const Tensor* past_v;
  const Tensor* nonpad;
  bool three_d;
  int64_t batch, hq, hkv, sq, snew, dq, dk, dv, past, total;
  float root;  // sqrt(scale), applied to Q and K each
  float softcap;
  int64_t causal, qk_mode, left, right;

  float q_at(int64_t b, int64_t h, int64_t s, int64_t d) const {
    return three_d ? q.data<float>()[(b * sq + s) * hq * dq + h * dq + d]
                   : q.data<float>()[((b * hq + h) * sq + s) * dq + d];
  }
  float kv_at(const Tensor& t, const Tensor* cache, int64_t width, int64_t b, int64_t h, int64_t j,
              int64_t d) const {
    if (j < past) return cache->data<float>()[((b * hkv + h) * past + j) * width + d];
    const int64_t s = j - past;
    return three_d ? t.data<float>()[(b * snew + s) * hkv * width + h * width + d]
                   : t.data<float>()[((b * hkv + h) * snew + s) * width + d];
  }
  // The mask, broadcast from its own rank (right-aligned) to (B, Hq, Sq, L); past its last
  // axis (shorter than L) everything is masked.
  double mask_bias(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (!mask) return 0.0;
    const int64_t r = mask->rank();
    const Shape& ms = mask->shape();
    if (j >= ms[static_cast<size_t>(r - 1)]) return -INFINITY;
    const int64_t idx[4] = {b, h, i, j};
    int64_t off = 0;
    for (int64_t a = 0; a < r; ++a) {
      const int64_t dim = ms[static_cast<size_t>(a)];
      const int64_t coord = idx[4 - r + a];
      off = off * dim + (dim == 1 ? 0 : coord);
    }
    if (mask->dtype() == DType::kBool) return mask->data<bool>()[off] ? 0.0 : -INFINITY;
    return static_cast<double>(mask->data<float>()[off]);
  }
};

// Query row i of head h in image b: scores, bias, softmax, P V into Y (and the requested
// qk output). `score` and `bias` are scratch of `total` entries.
void attention_row(const AttentionProblem& p, int64_t b, int64_t h, int64_t i, Tensor& y,
                   Tensor* qk_out, std::vector<double>& score, std::vector<double>& bias) {
  const int64_t hk = h / (p.hq / p.hkv), total = p.total;
  const int64_t offset = p.past_k ? p.past : p.nonpad ? p.nonpad->get_as_int64(b) - p.sq : 0;
  float* qk_row = qk_out ? qk_out->data<float>() + ((b * p.hq + h) * p.sq + i) * total : nullptr;
  double bias_max = -INFINITY;
  for (int64_t j = 0; j < total; ++j) {
    double qk = 0;
    for (int64_t d = 0; d < p.dq; ++d)
      qk += static_cast<double>(p.q_at(b, h, i, d) * p.root) *
            static_cast<double>(p.kv_at(p.k, p.past_k, p.dk, b, hk, j, d) * p.root);
    qk = static_cast<float>(qk);
    if (p.softcap > 0) qk = p.softcap * std::tanh(qk / p.softcap);
    double bj = p.mask_bias(b, h, i, j);
    if (p.causal && j > i + offset) bj = -INFINITY;
    const int64_t diff = i + offset - j;
    if ((p.left >= 0 && diff > p.left) || (p.right >= 0 && -diff > p.right)) bj = -INFINITY;
    if (p.nonpad && j >= p.nonpad->get_as_int64(b)) bj = -INFINITY;
    bias[static_cast<size_t>(j)] = bj;
    bias_max = std::max(bias_max, bj);
    score[static_cast<size_t>(j)] = qk + bj;
    if (qk_row && p.qk_mode < 2) qk_row[j] = static_cast<float>(qk);
    if (qk_row && p.qk_mode == 2) qk_row[j] = static_cast<float>(qk + bj);
  }
  // Softmax over the row; a row whose every key is masked gives zeros.
  double mx = -INFINITY;
  for (double sc : score) mx = std::max(mx, sc);
  double sum = 0;
  for (auto& sc : score) {
    sc = std::isinf(mx) && mx < 0 ? 0.0 : std::exp(sc - mx);
    sum += sc;
  }
  const bool all_masked = std::isinf(bias_max) && bias_max < 0;
  for (auto& sc : score) sc = all_masked || sum == 0 ? 0.0 : static_cast<float>(sc / sum);
  if (qk_row && p.qk_mode == 3)
    for (int64_t j = 0; j < total; ++j)
      qk_row[j] = static_cast<float>(score[static_cast<size_t>(j)]);
  for (int64_t d = 0; d < p.dv; ++d) {
    double acc = 0;
    for (int64_t j = 0; j < total; ++j)
      acc += score[static_cast<size_t>(j)] *
             static_cast<double>(p.kv_at(p.v, p.past_v, p.dv, b, hk, j, d));
    const int64_t at = p.three_d ? (b * p.sq + i) * p.hq * p.dv + h * p.dv + d
                                 : ((b * p.hq + h) * p.sq + i) * p.dv + d;
    y.data<float>()[at] = static_cast<float>(acc);
  }
}

Status attention_kernel(KernelContext& ctx) {
  const DType type = ctx.input(0).dtype();
  const bool narrow = type != DType::kFloat32;
  std::vector<Tensor> widened(6);  // float32 copies of the 16-bit float inputs
  auto input = [&](size_t i) -> const Tensor* {
    if (ctx.num_inputs() <= i || !ctx.has_input(i)) return nullptr;
    const Tensor& t = ctx.input(i);
    if (!narrow || t.dtype() != type) return &t;
    widened[i] = Tensor::zeros(DType::kFloat32, t.shape());
    for (int64_t e = 0; e < t.numel(); ++e)
      widened[i].data<float>()[e] = static_cast<float>(t.get_as_double(e));
    return &widened[i];
  };
  const Tensor& q = *input(0);
  const Tensor& k = *input(1);
  const Tensor& v = *input(2);
  const Tensor* mask = input(3);
  const Tensor* past_k = input(4);
  const Tensor* past_v = input(5);
  const Tensor* nonpad = ctx.num_inputs() > 6 && ctx.has_input(6) ? &ctx.input(6) : nullptr;
  // Outputs are computed in float32: the node's own when it is float32, else copies.
  std::vector<Tensor> narrowed(4);
  auto output = [&](size_t i, const Shape& shape) -> Tensor& {
    if (!narrow) return ctx.allocate_output(i, DType::kFloat32, shape);
    narrowed[i] = Tensor::zeros(DType::kFloat32, shape);
    return narrowed[i];
  };
  const auto& attrs = ctx.attrs();
  PG_ASSIGN_OR_RETURN(int64_t causal, attrs.get_int("is_causal", 0));
  PG_ASSIGN_OR_RETURN(int64_t q_heads_attr, attrs.get_int("q_num_heads", 0));
  PG_ASSIGN_OR_RETURN(int64_t kv_heads_attr, attrs.get_int("kv_num_heads", 0));
  PG_ASSIGN_OR_RETURN(float softcap, attrs.get_float("softcap", 0.0f));
  PG_ASSIGN_OR_RETURN(int64_t qk_mode, attrs.get_int("qk_matmul_output_mode", 0));
  PG_ASSIGN_OR_RETURN(int64_t left, attrs.get_int("left_window_size", -1));
  PG_ASSIGN_OR_RETURN(int64_t right, attrs.get_int("right_window_size", -1));
  if ((past_k == nullptr) != (past_v == nullptr))
    return ctx.error("past_key and past_value must be given together");
  if (nonpad && past_k) return ctx.error("nonpad_kv_seqlen cannot be combined with a past cache");
  if (qk_mode < 0 || qk_mode > 3) return ctx.error("qk_matmul_output_mode must be 0..3");
  const bool three_d = q.rank() == 3;
  const int64_t batch = q.dim(0);
  const int64_t hq = three_d ? q_heads_attr : q.dim(1), hkv = three_d ? kv_heads_attr : k.dim(1);
  if (hq <= 0 || hkv <= 0 || hq % hkv != 0)
    return ctx.error("q heads " + std::to_string(hq) + " must be a multiple of kv heads " +
                     std::to_string(hkv));
  const int64_t sq = three_d ? q.dim(1) : q.dim(2), snew = three_d ? k.dim(1) : k.dim(2);
  if ((three_d ? v.dim(1) : v.dim(2)) != snew)
    return ctx.error("K and V have different sequence lengths");
  const int64_t dq = three_d ? q.dim(2) / hq : q.dim(3), dk = three_d ? k.dim(2) / hkv : k.dim(3);
  const int64_t dv = three_d ? v.dim(2) / hkv : v.dim(3);
  if (dq != dk) return ctx.error("Q and K head sizes differ");
  const int64_t past = past_k ? past_k->dim(2) : 0, total = past + snew;
  if (past_k && (past_k->shape() != Shape{batch, hkv, past, dk} ||
                 past_v->shape() != Shape{batch, hkv, past, dv}))
    return ctx.error("past_key / past_value must be (batch, kv heads, past, head size)");
  if (nonpad && nonpad->numel() != batch)
    return ctx.error("nonpad_kv_seqlen must hold one length per batch");
  if (mask && (mask->rank() < 1 || mask->rank() > 4 ||
               (mask->dtype() != DType::kBool && mask->dtype() != DType::kFloat32)))
    return ctx.error("attn_mask must be bool or of Q's type, of rank 1 to 4");
  PG_ASSIGN_OR_RETURN(float scale_attr, attrs.get_float("scale", 0.0f));
  const float scale = attrs.has("scale") ? scale_attr : 1.0f / std::sqrt(static_cast<float>(dq));
  const AttentionProblem p{
      q,    k,  v,  mask, past_k, past_v, nonpad,           three_d, batch,  hq,      hkv,  sq,
      snew, dq, dk, dv,   past,   total,  std::sqrt(scale), softcap, causal, qk_mode, left, right};

  Tensor& y = output(0, three_d ? Shape{batch, sq, hq * dv} : Shape{batch, hq, sq, dv});
  Tensor* present_k =
      ctx.num_outputs() > 1 && ctx.wants_output(1) ? &output(1, {batch, hkv, total, dk}) : nullptr;
  Tensor* present_v =
      ctx.num_outputs() > 2 && ctx.wants_output(2) ? &output(2, {batch, hkv, total, dv}) : nullptr;
  Tensor* qk_out =
      ctx.num_outputs() > 3 && ctx.wants_output(3) ? &output(3, {batch, hq, sq, total}) : nullptr;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < hkv; ++h)
      for (int64_t j = 0; j < total; ++j) {
        const int64_t row = (b * hkv + h) * total + j;
        for (int64_t d = 0; present_k && d < dk; ++d)
          present_k->data<float>()[row * dk + d] = p.kv_at(k, past_k, dk, b, h, j, d);
        for (int64_t d = 0; present_v && d < dv; ++d)
          present_v->data<float>()[row * dv + d] = p.kv_at(v, past_v, dv, b, h, j, d);
      }
  std::vector<double> score(static_cast<size_t>(total)), bias(static_cast<size_t>(total));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < hq; ++h)
      for (int64_t i = 0; i < sq; ++i) attention_row(p, b, h, i, y, qk_out, score, bias);
  for (size_t i = 0; narrow && i < narrowed.size(); ++i) {
    if (narrowed[i].dtype() == DType::kUndefined) continue;  // an output not wanted
    PG_RETURN_IF_ERROR(
        store_doubles(to_doubles(narrowed[i]), ctx.allocate_output(i, type, narrowed[i].shape())));
  }
  return Status::ok();
}

// LinearAttention: per batch and KV head a Dk x Dv state S runs through the tokens in order:
//   gated rules decay it, S *= exp(g_t) (g per head or per key dim);
//   delta rules replace v_t by beta_t * (v_t - S^T k_t);
//   then S += k_t v_t^T, and every query head of the group reads o_t = scale * q_t^T S.
Status linear_attention_kernel(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(std::string rule, ctx.attrs().get_string("update_rule", "gated_delta"));
  PG_ASSIGN_OR_RETURN(int64_t hq, ctx.attrs().get_int("q_num_heads", 0));
  PG_ASSIGN_OR_RETURN(int64_t hkv, ctx.attrs().get_int("kv_num_heads", 0));
  PG_ASSIGN_OR_RETURN(float scale_attr, ctx.attrs().get_float("scale", 0.0f));
  const Tensor& q_t = ctx.input(0);
  const Tensor& k_t = ctx.input(1);
  const Tensor& v_t = ctx.input(2);
  const int64_t batch = q_t.dim(0), steps = q_t.dim(1);
  const int64_t dk = q_t.dim(2) / hq, dv = v_t.dim(2) / hkv, group = hq / hkv;
  if (k_t.shape() != Shape{batch, steps, hkv * dk} || v_t.dim(0) != batch || v_t.dim(1) != steps)
    return ctx.error("key " + shape_to_string(k_t.shape()) + " and value " +
                     shape_to_string(v_t.shape()) + " do not match query " +
                     shape_to_string(q_t.shape()) + " with these head counts");
  const bool has_past = ctx.num_inputs() > 3 && ctx.has_input(3);
  const bool gated = ctx.num_inputs() > 4 && ctx.has_input(4);
  const bool delta = ctx.num_inputs() > 5 && ctx.has_input(5);
  // Decay per head or per key dim; beta per head or one for all heads.
  int64_t decay_width = 0, beta_width = 0;
  if (gated) {
    decay_width = ctx.input(4).dim(2);
    if (ctx.input(4).dim(0) != batch || ctx.input(4).dim(1) != steps ||
        (decay_width != hkv && decay_width != hkv * dk))
      return ctx.error("decay " + shape_to_string(ctx.input(4).shape()) +
                       " is not (B, T, kv_num_heads) or (B, T, kv_num_heads * Dk)");
  }
  if (delta) {
    beta_width = ctx.input(5).dim(2);
    if (ctx.input(5).dim(0) != batch || ctx.input(5).dim(1) != steps ||
        (beta_width != hkv && beta_width != 1))
      return ctx.error("beta " + shape_to_string(ctx.input(5).shape()) +
                       " is not (B, T, kv_num_heads) or (B, T, 1)");
  }
  const double scale = scale_attr == 0.0f ? 1.0 / std::sqrt(static_cast<double>(dk)) : scale_attr;
  const std::vector<double> q = to_doubles(q_t), k = to_doubles(k_t), v = to_doubles(v_t);
  const std::vector<double> decay = gated ? to_doubles(ctx.input(4)) : std::vector<double>();
  const std::vector<double> beta = delta ? to_doubles(ctx.input(5)) : std::vector<double>();
  std::vector<double> state =
      has_past ? to_doubles(ctx.input(3))
               : std::vector<double>(static_cast<size_t>(batch * hkv * dk * dv), 0.0);
  std::vector<double> out(static_cast<size_t>(batch * steps * hq * dv), 0.0);
  std::vector<double> value(static_cast<size_t>(dv));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < hkv; ++h) {
      double* s = &state[static_cast<size_t>((b * hkv + h) * dk * dv)];
      for (int64_t t = 0; t < steps; ++t) {
        const int64_t token = b * steps + t;
        const double* kt = &k[static_cast<size_t>((token * hkv + h) * dk)];
        const double* vt = &v[static_cast<size_t>((token * hkv + h) * dv)];
        if (gated)
          for (int64_t i = 0; i < dk; ++i) {
            const int64_t g = decay_width == hkv ? token * hkv + h : (token * hkv + h) * dk + i;
            const double f = std::exp(decay[static_cast<size_t>(g)]);
            for (int64_t j = 0; j < dv; ++j) s[i * dv + j] *= f;
          }
        for (int64_t j = 0; j < dv; ++j) value[static_cast<size_t>(j)] = vt[j];
        if (delta) {
          const double bt =
              beta[static_cast<size_t>(token * beta_width + (beta_width == 1 ? 0 : h))];
          for (int64_t j = 0; j < dv; ++j) {
            double retrieved = 0;
            for (int64_t i = 0; i < dk; ++i) retrieved += s[i * dv + j] * kt[i];
            value[static_cast<size_t>(j)] = bt * (vt[j] - retrieved);
          }
        }
        for (int64_t i = 0; i < dk; ++i)
          for (int64_t j = 0; j < dv; ++j) s[i * dv + j] += kt[i] * value[static_cast<size_t>(j)];
        for (int64_t g = 0; g < group; ++g) {
          const int64_t head = h * group + g;
          const double* qt = &q[static_cast<size_t>((token * hq + head) * dk)];
          double* o = &out[static_cast<size_t>((token * hq + head) * dv)];
          for (int64_t j = 0; j < dv; ++j) {
            double acc = 0;
            for (int64_t i = 0; i < dk; ++i) acc += qt[i] * s[i * dv + j];
            o[j] = scale * acc;
          }
        }
      }
    }
  PG_RETURN_IF_ERROR(store_doubles(out, ctx.output(0)));
  if (ctx.num_outputs() > 1 && ctx.wants_output(1))
    PG_RETURN_IF_ERROR(store_doubles(state, ctx.output(1)));
  return Status::ok();
}

// A float tensor of `type` holding v, each value rounded to `type`.
Expected<Tensor> rounded_tensor(DType type, const Shape& shape, const std::vector<double>& v) {
  Tensor t = Tensor::zeros(type, shape);
  PG_RETURN_IF_ERROR(store_doubles(v, t));
  return t;
}

// Runs a FlexAttention modifier subgraph (one rank-4 tensor in, one of the same shape and type
// out) on `x`, in place.
Status run_modifier(KernelContext& ctx, const char* name, Tensor& x) {
  const ir::Graph* g = ctx.attrs().has(name) ? ctx.attrs().get_graph(name) : nullptr;
  if (!g) return Status::ok();
  PG_ASSIGN_OR_RETURN(auto outs, ctx.run_subgraph(*g, {RuntimeValue::of(x)}));
  if (outs.size() != 1 || !outs[0].is_tensor() || outs[0].tensor.shape() != x.shape() ||
      outs[0].tensor.dtype() != x.dtype())
    return ctx.error(std::string(name) + " must produce one tensor of its input's shape " +
                     shape_to_string(x.shape()) + " and type");
  x = outs[0].tensor;
  return Status::ok();
}

// FlexAttention, as onnx's reference computes it: Q and K scaled by sqrt(scale) in their type,
// the scores rounded to that type, then to softmax_precision (float32 for 16-bit inputs),
// score_mod, a softmax, prob_mod, and P V in softmax_precision, rounded to V's type. Query head h
// reads K / V head h / (Hq / Hkv).
Status flex_attention_kernel(KernelContext& ctx) {
  const Tensor& q_t = ctx.input(0);
  const Tensor& k_t = ctx.input(1);
  const Tensor& v_t = ctx.input(2);
  const int64_t b = q_t.dim(0), hq = q_t.dim(1), l = q_t.dim(2), e = q_t.dim(3);
  const int64_t hkv = k_t.dim(1), s = k_t.dim(2), ev = v_t.dim(3);
  if (k_t.dim(0) != b || v_t.dim(0) != b || v_t.dim(1) != hkv || v_t.dim(2) != s ||
      k_t.dim(3) != e || hkv <= 0 || hq % hkv != 0)
    return ctx.error("Q " + shape_to_string(q_t.shape()) + ", K " + shape_to_string(k_t.shape()) +
                     " and V " + shape_to_string(v_t.shape()) +
                     " do not fit (B, H, L, E), (B, Hkv, S, E), (B, Hkv, S, Ev)");
  PG_ASSIGN_OR_RETURN(int64_t precision, ctx.attrs().get_int("softmax_precision", 0));
  const DType type = q_t.dtype();
  const DType compute = precision != 0            ? static_cast<DType>(precision)
                        : type == DType::kFloat64 ? DType::kFloat64
                                                  : DType::kFloat32;
  double scale = 1.0 / std::sqrt(static_cast<double>(e));
  if (ctx.attrs().has("scale")) {
    PG_ASSIGN_OR_RETURN(float sc, ctx.attrs().get_float("scale"));
    scale = sc;
  }
  // sqrt(scale) in float32, then in Q's type; Q and K scaled and rounded in their type.
  PG_ASSIGN_OR_RETURN(Tensor root_t,
                      rounded_tensor(type, {1}, {std::sqrt(static_cast<float>(scale))}));
  const double root = root_t.get_as_double(0);
  std::vector<double> q = to_doubles(q_t), k = to_doubles(k_t);
  for (double& x : q) x *= root;
  for (double& x : k) x *= root;
  PG_ASSIGN_OR_RETURN(Tensor q_scaled, rounded_tensor(type, q_t.shape(), q));
  PG_ASSIGN_OR_RETURN(Tensor k_scaled, rounded_tensor(type, k_t.shape(), k));
  q = to_doubles(q_scaled);
  k = to_doubles(k_scaled);
  const std::vector<double> v = to_doubles(v_t);
  const int64_t group = hq / hkv;
  std::vector<double> scores(static_cast<size_t>(b * hq * l * s));
  for (int64_t bh = 0; bh < b * hq; ++bh) {
    const int64_t kv = (bh / hq) * hkv + (bh % hq) / group;
    for (int64_t i = 0; i < l; ++i)
      for (int64_t j = 0; j < s; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < e; ++d)
          dot += q[static_cast<size_t>((bh * l + i) * e + d)] *
                 k[static_cast<size_t>((kv * s + j) * e + d)];
        scores[static_cast<size_t>((bh * l + i) * s + j)] = dot;
      }
  }
  const Shape score_shape{b, hq, l, s};
  PG_ASSIGN_OR_RETURN(Tensor in_type,
                      rounded_tensor(type, score_shape, scores));  // the matmul's result type
  PG_ASSIGN_OR_RETURN(Tensor score_t, rounded_tensor(compute, score_shape, to_doubles(in_type)));
  PG_RETURN_IF_ERROR(run_modifier(ctx, "score_mod", score_t));
  scores = to_doubles(score_t);
  for (int64_t row = 0; row < b * hq * l; ++row) {
    double* r = &scores[static_cast<size_t>(row * s)];
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < s; ++j) mx = std::max(mx, r[j]);
    for (int64_t j = 0; j < s; ++j) sum += (r[j] = std::exp(r[j] - mx));
    for (int64_t j = 0; j < s; ++j) r[j] /= sum;
  }
  PG_ASSIGN_OR_RETURN(Tensor prob_t, rounded_tensor(compute, score_shape, scores));
  PG_RETURN_IF_ERROR(run_modifier(ctx, "prob_mod", prob_t));
  const std::vector<double> probs = to_doubles(prob_t);
  std::vector<double> out(static_cast<size_t>(b * hq * l * ev));
  for (int64_t bh = 0; bh < b * hq; ++bh) {
    const int64_t kv = (bh / hq) * hkv + (bh % hq) / group;
    for (int64_t i = 0; i < l; ++i)
      for (int64_t d = 0; d < ev; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < s; ++j)
          acc += probs[static_cast<size_t>((bh * l + i) * s + j)] *
                 v[static_cast<size_t>((kv * s + j) * ev + d)];
        out[static_cast<size_t>((bh * l + i) * ev + d)] = acc;
      }
  }
  return store_doubles(out, ctx.output(0));
}

// CausalConvWithState: the previous call's last K - 1 positions (zeros without them) go before
// X, each channel is convolved with its own K taps without padding, and the last K - 1
// positions of that padded sequence become the new state.
Status causal_conv_with_state_kernel(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(std::string act, ctx.attrs().get_string("activation", "none"));
  const Tensor& x_t = ctx.input(0);
  const Tensor& w_t = ctx.input(1);
  const int64_t batch = x_t.dim(0), channels = x_t.dim(1), len = x_t.dim(2), taps = w_t.dim(2);
  const int64_t carry = taps - 1, padded_len = len + carry;
  const bool has_bias = ctx.num_inputs() > 2 && ctx.has_input(2);
  const bool has_past = ctx.num_inputs() > 3 && ctx.has_input(3);
  const std::vector<double> x = to_doubles(x_t), w = to_doubles(w_t);
  const std::vector<double> bias = has_bias ? to_doubles(ctx.input(2)) : std::vector<double>();
  const std::vector<double> past = has_past ? to_doubles(ctx.input(3)) : std::vector<double>();
  std::vector<double> y(x.size()), state(static_cast<size_t>(batch * channels * carry));
  std::vector<double> padded(static_cast<size_t>(padded_len));
  for (int64_t bc = 0; bc < batch * channels; ++bc) {
    const int64_t c = bc % channels;
    for (int64_t i = 0; i < carry; ++i)
      padded[static_cast<size_t>(i)] = has_past ? past[static_cast<size_t>(bc * carry + i)] : 0.0;
    for (int64_t i = 0; i < len; ++i)
      padded[static_cast<size_t>(carry + i)] = x[static_cast<size_t>(bc * len + i)];
    for (int64_t t = 0; t < len; ++t) {
      double acc = has_bias ? bias[static_cast<size_t>(c)] : 0.0;
      for (int64_t j = 0; j < taps; ++j)
        acc += w[static_cast<size_t>(c * taps + j)] * padded[static_cast<size_t>(t + j)];
      if (act != "none") acc = acc / (1.0 + std::exp(-acc));
      y[static_cast<size_t>(bc * len + t)] = acc;
    }
    for (int64_t i = 0; i < carry; ++i)
      state[static_cast<size_t>(bc * carry + i)] = padded[static_cast<size_t>(len + i)];
  }
  PG_RETURN_IF_ERROR(store_doubles(y, ctx.output(0)));
  if (ctx.num_outputs() > 1 && ctx.wants_output(1))
    PG_RETURN_IF_ERROR(store_doubles(state, ctx.output(1)));
  return Status::ok();
}

}  // namespace

void register_transformer_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "RotaryEmbedding", rotary_embedding_kernel);
  r.add(kOnnxDomain, "Attention", attention_kernel);
  r.add(kOnnxDomain, "LinearAttention", linear_attention_kernel);
  r.add(kPreviewDomain, "FlexAttention", flex_attention_kernel);
  r.add(kOnnxDomain, "CausalConvWithState", causal_conv_with_state_kernel);
}

}  // namespace peregrine
