// onnx_attention_to_fused
//   Matches:  ONNX Attention (opsets 23-25) on float32 Q, K, V with static shapes and nothing
//             the fused kernel lacks: no nonpad_kv_seqlen, a KV head count dividing the query
//             head count, a mask that is absent, float32 or bool (made additive by a Where)
//             whose last axis is the key length, and no reader of qk_matmul_output (nor of
//             present_key / present_value without a cache).
//   Produces: peregrine.Attention(Q, K, V, mask?) with num_heads = q_num_heads for 3-D inputs
//             (0 for 4-D, already per head), kv_num_heads where 3-D K / V have fewer heads
//             (grouped-query attention; 4-D K / V carry their head count in dim 1), scale
//             (ONNX's default 1 / sqrt(head size) written out), softcap, causal (the kernel's
//             frontier is ONNX's where the query and new key lengths are equal) and
//             empty_rows_zero (ONNX gives zeros where a row sees no key). A sliding window, and
//             a causal frontier where those lengths differ, become a constant (Sq, keys) mask
//             of 0 / -inf (at most 2^22 elements), added to the node's own mask. With a cache:
//             present_key = Concat(past_key, K) and present_value likewise on the sequence
//             axis, and the fused node reads them; 3-D inputs are then split into heads
//             (Reshape + Transpose) for the per-head form and the output merged back.
//   Why:      the fused kernel tiles the scores in registers and threads over heads; the
//             reference kernel of ONNX Attention is a plain loop nest.
#include <cmath>
#include <limits>

#include "ir/attributes.h"
#include "ops/infer_helpers.h"
#include "ops/op_schema.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

// The largest (Sq, keys) constant mask a sliding window or an unaligned causal frontier becomes.
constexpr int64_t kMaxConstantMaskElements = int64_t{1} << 22;

bool unused(const GraphIndex& index, const ir::Node& n, size_t output) {
  return output >= n.outputs.size() || n.outputs[output].empty() ||
         (index.uses(n.outputs[output]).empty() && !index.is_graph_output(n.outputs[output]));
}

bool present(const ir::Node& n, size_t input) {
  return input < n.inputs.size() && !n.inputs[input].empty();
}

struct Match {
  ir::Node* node;
  bool cache;      // past_key / past_value given (4-D)
  bool bool_mask;  // attn_mask is bool: true attends
  int64_t left_window, right_window;  // -1: unbounded
  int64_t sq, keys, past;             // query length, keys (past + new), cached keys
  bool constant_mask;  // the window / causal frontier goes into a constant (Sq, keys) mask
  int64_t num_heads;
  int64_t kv_num_heads;  // 0: as many as num_heads
  float scale;
  float softcap;
  int64_t causal;
};

std::optional<Match> match(const ir::Graph& g, const GraphIndex& index, ir::Node& n) {
  if (!is_op(&n, "Attention") || n.opset < 23) return std::nullopt;
  const bool cache = present(n, 4) && present(n, 5);
  if (present(n, 4) != present(n, 5) || present(n, 6)) return std::nullopt;
  for (size_t o = cache ? 3 : 1; o < 4; ++o)
    if (!unused(index, n, o)) return std::nullopt;
  const ir::ValueType* q = float32_type(g, n.inputs[0]);
  const ir::ValueType* k = float32_type(g, n.inputs[1]);
  const ir::ValueType* v = float32_type(g, n.inputs[2]);
  if (!q || !k || !v || !q->is_static() || !k->is_static() || !v->is_static()) return std::nullopt;
  const ir::AttrView attrs(n);
  auto int_or = [&](const char* key, int64_t fallback) {
    auto r = attrs.get_int(key, fallback);
    return r.is_ok() ? *r : std::numeric_limits<int64_t>::min();
  };
  auto softcap = attrs.get_float("softcap", 0.0f);
  if (!softcap.is_ok() || *softcap < 0.0f) return std::nullopt;
  const int64_t left = int_or("left_window_size", -1), right = int_or("right_window_size", -1);
  if (left < -1 || right < -1) return std::nullopt;
  const bool three_d = q->rank() == 3;
  if (q->rank() != k->rank() || q->rank() != v->rank() || (q->rank() != 3 && q->rank() != 4))
    return std::nullopt;
  const int64_t hq = three_d ? int_or("q_num_heads", 0) : q->dims[1];
  const int64_t hkv = three_d ? int_or("kv_num_heads", 0) : k->dims[1];
  if (hq <= 0 || hkv <= 0 || hq % hkv != 0 || (!three_d && v->dims[1] != hkv)) return std::nullopt;
  if (three_d && (q->dims[2] % hq != 0 || k->dims[2] * hq != q->dims[2] * hkv)) return std::nullopt;
  const int64_t head = three_d ? q->dims[2] / hq : q->dims[3];
  const int64_t sq = q->dims[q->rank() - 2], snew = k->dims[k->rank() - 2];
  int64_t skv = snew;
  if (cache) {
    // (B, Hkv, P, D) caches in front of 4-D K / V: the keys are the P cached and the new ones.
    const ir::ValueType* pk = float32_type(g, n.inputs[4]);
    const ir::ValueType* pv = float32_type(g, n.inputs[5]);
    if (!pk || !pv || !pk->is_static() || !pv->is_static() || pk->rank() != 4 || pv->rank() != 4)
      return std::nullopt;
    // 4-D K / V: (B, Hkv, S, D); 3-D: (B, S, Hkv * D).
    const int64_t dk = three_d ? k->dims[2] / hkv : k->dims[3],
                  dv = three_d ? v->dims[2] / hkv : v->dims[3];
    if (three_d && v->dims[2] % hkv != 0) return std::nullopt;
    if (pk->dims[0] != k->dims[0] || pk->dims[1] != hkv || pk->dims[3] != dk ||
        pv->dims[0] != v->dims[0] || pv->dims[1] != hkv || pv->dims[3] != dv)
      return std::nullopt;
    if (pk->dims[2] != pv->dims[2]) return std::nullopt;
    skv += pk->dims[2];
  }
  const int64_t causal = int_or("is_causal", 0);
  if (causal != 0 && causal != 1) return std::nullopt;
  // The kernel's causal frontier is ONNX's where the query and new key lengths match; else, and
  // with a sliding window, the frontier goes into a constant (Sq, keys) mask.
  const bool constant_mask = left >= 0 || right >= 0 || (causal && sq != snew);
  if (constant_mask && sq * skv > kMaxConstantMaskElements) return std::nullopt;
  bool bool_mask = false;
  if (present(n, 3)) {
    const ir::Value* mv = g.find_value(n.inputs[3]);
    const ir::ValueType* m =
        mv && mv->type.dtype == DType::kBool ? &mv->type : float32_type(g, n.inputs[3]);
    if (!m || !m->is_static() || m->rank() < 2 || m->dims.back() != skv) return std::nullopt;
    bool_mask = m->dtype == DType::kBool;
  }
  float scale = 1.0f / std::sqrt(static_cast<float>(head));
  if (attrs.has("scale")) {
    auto s = attrs.get_float("scale");
    if (!s.is_ok()) return std::nullopt;
    scale = *s;
  }
  return Match{&n,
               cache,
               bool_mask,
               left,
               right,
               sq,
               skv,
               skv - snew,
               constant_mask,
               three_d ? hq : 0,
               three_d && hkv != hq ? hkv : 0,
               scale,
               *softcap,
               causal};
}

// x (B, S, H * width) as (B, H, S, width): Reshape, then Transpose (0, 2, 1, 3).
std::string split_heads(ir::Graph& g, const std::string& x, int64_t heads,
                        const std::string& base) {
  const ir::ValueType& t = g.find_value(x)->type;
  const int64_t b = t.dims[0], s = t.dims[1], width = t.dims[2] / heads;
  const std::string shape =
      add_initializer(g, base + "_shape", Tensor::from_vector<int64_t>({b, s, heads, width}, {4}));
  const std::string r = fresh_name(g, base + "_split");
  g.value(r).type = ir::ValueType::tensor(DType::kFloat32, {b, s, heads, width});
  add_node(g, "Reshape", {x, shape}, {r}, r);
  const std::string out = fresh_name(g, base + "_heads");
  g.value(out).type = ir::ValueType::tensor(DType::kFloat32, {b, heads, s, width});
  add_node(g, "Transpose", {r}, {out}, out)->attributes["perm"] = ints_attr("perm", {0, 2, 1, 3});
  return out;
}

void rewrite(ir::Graph& g, const Match& m) {
  ir::Node& n = *m.node;
  std::vector<std::string> inputs(n.inputs.begin(), n.inputs.begin() + 3);
  // 3-D inputs with a cache: the per-head form, heads split here and merged after.
  const bool split = m.cache && m.num_heads > 0;
  const int64_t kv_heads = m.kv_num_heads > 0 ? m.kv_num_heads : m.num_heads;
  if (split) {
    inputs[0] = split_heads(g, inputs[0], m.num_heads, n.name + "_q");
    inputs[1] = split_heads(g, inputs[1], kv_heads, n.name + "_k");
    inputs[2] = split_heads(g, inputs[2], kv_heads, n.name + "_v");
  }
  if (m.cache) {
    // The present caches, under the node's output names when it has them.
    for (size_t i : {1, 2}) {
      const std::string& past = n.inputs[i + 3];
      const std::string out =
          n.outputs.size() > i && !n.outputs[i].empty()
              ? n.outputs[i]
              : fresh_name(g, n.name + (i == 1 ? "_present_key" : "_present_value"));
      ir::ValueType t = g.find_value(past)->type;
      t.dims[2] += g.find_value(inputs[i])->type.dims[2];
      g.value(out).type = t;
      ir::Node* concat = add_node(g, "Concat", {past, inputs[i]}, {out},
                                  n.name + (i == 1 ? "_present_key" : "_present_value"));
      concat->attributes["axis"] = int_attr("axis", 2);
      inputs[i] = out;
    }
  }
  if (present(n, 3) && m.bool_mask) {
    // The fused kernel adds a float mask: 0 where the bool mask attends, -inf elsewhere.
    const std::string mask = fresh_name(g, n.name + "_additive_mask");
    ir::ValueType t = g.find_value(n.inputs[3])->type;
    t.dtype = DType::kFloat32;
    g.value(mask).type = t;
    const std::string zero = add_initializer(g, n.name + "_attend", Tensor::scalar<float>(0.0f));
    const std::string masked =
        add_initializer(g, n.name + "_masked", Tensor::scalar<float>(-INFINITY));
    add_node(g, "Where", {n.inputs[3], zero, masked}, {mask}, n.name + "_additive_mask");
    inputs.push_back(mask);
  } else if (present(n, 3)) {
    inputs.push_back(n.inputs[3]);
  }
  if (m.constant_mask) {
    // Query i sees key j within the window around i + past, and causally j <= i + past (ONNX's
    // frontiers, top-left aligned past the cache).
    Tensor window = Tensor::zeros(DType::kFloat32, {m.sq, m.keys});
    for (int64_t i = 0; i < m.sq; ++i)
      for (int64_t j = 0; j < m.keys; ++j) {
        const int64_t diff = i + m.past - j;
        if ((m.left_window >= 0 && diff > m.left_window) ||
            (m.right_window >= 0 && -diff > m.right_window) || (m.causal && diff < 0))
          window.data<float>()[i * m.keys + j] = -INFINITY;
      }
    const std::string w = add_initializer(g, n.name + "_window", std::move(window));
    if (inputs.size() > 3) {
      const std::string sum = fresh_name(g, n.name + "_windowed_mask");
      auto dims = broadcast_shapes(g.find_value(inputs[3])->type.dims, {m.sq, m.keys});
      g.value(sum).type = ir::ValueType::tensor(DType::kFloat32, dims.is_ok() ? *dims : Shape{});
      add_node(g, "Add", {inputs[3], w}, {sum}, sum);
      inputs[3] = sum;
    } else {
      inputs.push_back(w);
    }
  }
  std::string y = n.outputs[0];
  if (split) {  // (B, H, Sq, Dv) from the fused node, merged back to (B, Sq, H * Dv)
    const ir::ValueType& out = g.find_value(n.outputs[0])->type;
    const int64_t b = out.dims[0], sq = out.dims[1], dv = out.dims[2] / m.num_heads;
    y = fresh_name(g, n.name + "_heads_out");
    g.value(y).type = ir::ValueType::tensor(DType::kFloat32, {b, m.num_heads, sq, dv});
    const std::string t = fresh_name(g, n.name + "_merge");
    g.value(t).type = ir::ValueType::tensor(DType::kFloat32, {b, sq, m.num_heads, dv});
    add_node(g, "Transpose", {y}, {t}, t)->attributes["perm"] = ints_attr("perm", {0, 2, 1, 3});
    const std::string shape = add_initializer(
        g, n.name + "_merged_shape", Tensor::from_vector<int64_t>({b, sq, m.num_heads * dv}, {3}));
    add_node(g, "Reshape", {t, shape}, {n.outputs[0]}, n.name + "_merged");
  }
  ir::Node* fused = add_node(g, "Attention", inputs, {y}, n.name);
  fused->domain = kPeregrineDomain;
  fused->opset = 1;
  fused->attributes["num_heads"] = int_attr("num_heads", split ? 0 : m.num_heads);
  if (m.kv_num_heads > 0 && !split)
    fused->attributes["kv_num_heads"] = int_attr("kv_num_heads", m.kv_num_heads);
  fused->attributes["scale"] = float_attr("scale", m.scale);
  if (m.softcap > 0) fused->attributes["softcap"] = float_attr("softcap", m.softcap);
  fused->attributes["causal"] = int_attr("causal", m.constant_mask ? 0 : m.causal);
  // ONNX: a query row whose every key is masked gives zeros.
  fused->attributes["empty_rows_zero"] = int_attr("empty_rows_zero", 1);
  import_peregrine_domain(g);
  for (size_t o = m.cache ? 3 : 1; o < n.outputs.size(); ++o)
    if (!n.outputs[o].empty()) g.values.erase(n.outputs[o]);
  remove_nodes(g, {&n});
}

class OnnxAttentionToFused : public Pass {
 public:
  const char* name() const override { return "onnx_attention_to_fused"; }
  Expected<bool> run(ir::Graph& g) override {
    return rewrite_each_match(g, match, rewrite) > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_onnx_attention_to_fused() { return std::make_unique<OnnxAttentionToFused>(); }

}  // namespace peregrine::passes
