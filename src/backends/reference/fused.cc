// Reference kernels of the peregrine-domain fused ops (schemas in ops/fused.cc).
// Each runs the unfused ops it stands for through the reference kernels, so a fused
// graph computes exactly what the original graph did: the oracle for fast kernels.
#include <cmath>
#include <cstring>
#include <numeric>

#include "backends/reference/evaluate.h"
#include "backends/reference/kernel_list.h"
#include "ops/elementwise_chain.h"
#include "ops/op_schema.h"

namespace peregrine {

namespace {

// Node `op_type` with the fused node's attributes minus the activation ones.
ir::Node base_node(const ir::Node& fused, const std::string& op_type) {
  ir::Node n = make_eval_node(op_type);
  n.name = fused.name + "/" + op_type;
  n.attributes = fused.attributes;
  n.attributes.erase("activation");
  n.attributes.erase("activation_params");
  return n;
}

Expected<Tensor> binary(const char* op, const Tensor& a, const Tensor& b) {
  return evaluate_tensor(make_eval_node(op), {&a, &b});
}

// act(x) for the fused node's `activation` attribute, via the ONNX ops.
Expected<Tensor> apply_activation(const KernelContext& ctx, const Tensor& x) {
  PG_ASSIGN_OR_RETURN(std::string act, ctx.attrs().get_string("activation", ""));
  PG_ASSIGN_OR_RETURN(std::vector<float> params, ctx.attrs().get_floats("activation_params"));
  if (act.empty()) return x;
  auto param = [&](size_t i, float fallback) { return i < params.size() ? params[i] : fallback; };
  if (act == "SiLU") {
    PG_ASSIGN_OR_RETURN(Tensor s, evaluate_tensor(make_eval_node("Sigmoid"), {&x}));
    return binary("Mul", x, s);
  }
  if (act == "Clip") {
    Tensor lo = Tensor::scalar<float>(param(0, -INFINITY)), hi = Tensor::scalar<float>(param(1, INFINITY));
    return evaluate_tensor(make_eval_node("Clip"), {&x, &lo, &hi});
  }
  ir::Node n = make_eval_node(act == "GeluTanh" ? "Gelu" : act, 20);
  if (act == "LeakyRelu") {
    ir::Attribute a;
    a.name = "alpha";
    a.type = ir::Attribute::Type::kFloat;
    a.f = param(0, 0.01f);
    n.attributes["alpha"] = a;
  }
  if (act == "GeluTanh") {
    ir::Attribute a;
    a.name = "approximate";
    a.type = ir::Attribute::Type::kString;
    a.s = "tanh";
    n.attributes["approximate"] = a;
  }
  return evaluate_tensor(n, {&x});
}

// act(base(inputs[0..n)) + Z) where Z is input n when present.
Status fused_base_kernel(KernelContext& ctx, const char* base, size_t n) {
  std::vector<const Tensor*> ins;
  for (size_t i = 0; i < n && i < ctx.num_inputs(); ++i)
    ins.push_back(ctx.has_input(i) ? &ctx.input(i) : nullptr);
  while (!ins.empty() && !ins.back()) ins.pop_back();
  PG_ASSIGN_OR_RETURN(Tensor y, evaluate_tensor(base_node(ctx.node(), base), ins));
  if (ctx.has_input(n)) {
    PG_ASSIGN_OR_RETURN(y, binary("Add", y, ctx.input(n)));
  }
  PG_ASSIGN_OR_RETURN(Tensor out, apply_activation(ctx, y));
  ctx.set_output(0, out);
  return Status::ok();
}

Expected<Tensor> transpose(const Tensor& x, std::vector<int64_t> perm) {
  ir::Node n = make_eval_node("Transpose");
  ir::Attribute a;
  a.name = "perm";
  a.type = ir::Attribute::Type::kInts;
  a.ints = std::move(perm);
  n.attributes["perm"] = a;
  return evaluate_tensor(n, {&x});
}

// ConvNhwc: the NCHW FusedConv between two transposes, so it is FusedConv by construction.
Status conv_nhwc_kernel(KernelContext& ctx) {
  if (ctx.input(0).rank() != 4) return ctx.error("ConvNhwc expects a rank-4 X");
  PG_ASSIGN_OR_RETURN(Tensor x, transpose(ctx.input(0), {0, 3, 1, 2}));
  std::vector<const Tensor*> ins = {&x};
  for (size_t i = 1; i < 3 && i < ctx.num_inputs(); ++i)
    ins.push_back(ctx.has_input(i) ? &ctx.input(i) : nullptr);
  while (!ins.empty() && !ins.back()) ins.pop_back();
  PG_ASSIGN_OR_RETURN(Tensor y, evaluate_tensor(base_node(ctx.node(), "Conv"), ins));
  PG_ASSIGN_OR_RETURN(y, transpose(y, {0, 2, 3, 1}));
  if (ctx.has_input(3)) {
    PG_ASSIGN_OR_RETURN(y, binary("Add", y, ctx.input(3)));
  }
  PG_ASSIGN_OR_RETURN(Tensor out, apply_activation(ctx, y));
  ctx.set_output(0, out);
  return Status::ok();
}

// (B, S, H*D) -> (B, H, S, D)
Expected<Tensor> split_heads(const Tensor& x, int64_t heads) {
  if (x.rank() != 3 || x.dim(2) % heads != 0)
    return invalid_input("Attention: hidden size " + std::to_string(x.dim(2)) +
                         " is not divisible by num_heads " + std::to_string(heads));
  Tensor r = x.reshaped({x.dim(0), x.dim(1), heads, x.dim(2) / heads});
  return transpose(r, {0, 2, 1, 3});
}

// (B, Hkv, S, D) -> (B, Hkv * group, S, D): each head repeated `group` times in a row.
Tensor repeat_heads(const Tensor& x, int64_t group) {
  Tensor r = Tensor::zeros(x.dtype(), {x.dim(0), x.dim(1) * group, x.dim(2), x.dim(3)});
  const size_t head_bytes = static_cast<size_t>(x.dim(2) * x.dim(3)) * dtype_size(x.dtype());
  const auto* src = static_cast<const uint8_t*>(x.raw());
  auto* dst = static_cast<uint8_t*>(r.raw());
  for (int64_t bh = 0; bh < x.dim(0) * x.dim(1); ++bh)
    for (int64_t g = 0; g < group; ++g)
      if (head_bytes)
        std::memcpy(dst + (bh * group + g) * head_bytes, src + bh * head_bytes, head_bytes);
  return r;
}

// Grouped-query attention: K / V with fewer heads than Q (kv_num_heads in the head form, K's
// dim 1 in the per-head form); query head h reads K / V head h / (H / Hkv).
Status attention_kernel(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(int64_t heads, ctx.attrs().get_int("num_heads", 0));
  PG_ASSIGN_OR_RETURN(int64_t kv_heads, ctx.attrs().get_int("kv_num_heads", 0));
  PG_ASSIGN_OR_RETURN(int64_t k_transposed, ctx.attrs().get_int("k_transposed", 0));
  PG_ASSIGN_OR_RETURN(float scale, ctx.attrs().get_float("scale", 1.0f));
  Tensor q = ctx.input(0), k = ctx.input(1), v = ctx.input(2);
  if (heads > 0) {
    if (kv_heads <= 0) kv_heads = heads;
    if (heads % kv_heads != 0) return ctx.error("kv_num_heads must divide num_heads");
    PG_ASSIGN_OR_RETURN(q, split_heads(q, heads));
    PG_ASSIGN_OR_RETURN(k, split_heads(k, kv_heads));
    PG_ASSIGN_OR_RETURN(v, split_heads(v, kv_heads));
    k_transposed = 0;
  }
  if (q.rank() == 4 && k.rank() == 4 && v.rank() == 4 && k.dim(1) > 1 && k.dim(1) < q.dim(1) &&
      q.dim(1) % k.dim(1) == 0 && v.dim(1) == k.dim(1)) {
    k = repeat_heads(k, q.dim(1) / k.dim(1));
    v = repeat_heads(v, q.dim(1) / v.dim(1));
  }
  if (!k_transposed) {
    if (k.rank() < 2) return ctx.error("K must have rank >= 2");
    std::vector<int64_t> perm(static_cast<size_t>(k.rank()));
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    PG_ASSIGN_OR_RETURN(k, transpose(k, perm));
  }
  PG_ASSIGN_OR_RETURN(Tensor scores, binary("MatMul", q, k));
  Tensor s = Tensor::scalar<float>(scale);
  if (q.dtype() != DType::kFloat32) {
    ir::Node cast = make_eval_node("Cast");
    cast.attributes["to"] = ir::Attribute{};
    cast.attributes["to"].name = "to";
    cast.attributes["to"].i = static_cast<int64_t>(q.dtype());
    PG_ASSIGN_OR_RETURN(s, evaluate_tensor(cast, {&s}));
  }
  PG_ASSIGN_OR_RETURN(scores, binary("Mul", scores, s));
  PG_ASSIGN_OR_RETURN(float softcap, ctx.attrs().get_float("softcap", 0.0f));
  if (softcap > 0) {
    if (scores.dtype() != DType::kFloat32)
      return ctx.error("softcap is only implemented for float32");
    for (int64_t i = 0; i < scores.numel(); ++i) {
      float& x = scores.data<float>()[i];
      x = softcap * std::tanh(x / softcap);
    }
  }
  if (ctx.has_input(3)) {
    PG_ASSIGN_OR_RETURN(scores, binary("Add", scores, ctx.input(3)));
  }
  PG_ASSIGN_OR_RETURN(int64_t causal, ctx.attrs().get_int("causal", 0));
  if (causal && q.dtype() == DType::kFloat32) {
    // -inf above the diagonal that ends at the last key: query i sees keys j <= i + Skv - Sq.
    const int64_t sq = scores.dim(scores.rank() - 2), skv = scores.dim(scores.rank() - 1);
    Tensor mask = Tensor::zeros(DType::kFloat32, {sq, skv});
    float* pm = mask.data<float>();
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = i + skv - sq + 1; j < skv; ++j)
        if (j >= 0) pm[i * skv + j] = -INFINITY;
    PG_ASSIGN_OR_RETURN(scores, binary("Add", scores, mask));
  } else if (causal) {
    return ctx.error("causal is only implemented for float32");
  }
  PG_ASSIGN_OR_RETURN(Tensor probs, evaluate_tensor(make_eval_node("Softmax"), {&scores}));
  PG_ASSIGN_OR_RETURN(int64_t empty_rows_zero, ctx.attrs().get_int("empty_rows_zero", 0));
  if (empty_rows_zero) {  // Where(IsNaN(P), 0, P): a row that saw no key softmaxed to NaN
    if (probs.dtype() != DType::kFloat32)
      return ctx.error("empty_rows_zero is only implemented for float32");
    for (int64_t i = 0; i < probs.numel(); ++i)
      if (std::isnan(probs.data<float>()[i])) probs.data<float>()[i] = 0.0f;
  }
  PG_ASSIGN_OR_RETURN(Tensor out, binary("MatMul", probs, v));
  if (heads > 0) {
    PG_ASSIGN_OR_RETURN(out, transpose(out, {0, 2, 1, 3}));
    out = out.reshaped({out.dim(0), out.dim(1), out.dim(2) * out.dim(3)});
  }
  ctx.set_output(0, out);
  return Status::ok();
}

// RMSNormalization: X / Sqrt(ReduceMean(X * X, axes [axis, rank)) + epsilon) *
// Scale, the ops rms_norm_fusion replaced (the Pow(x, 2) form squares through
// Mul too: same float product).
Status rms_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::kFloat32) return ctx.error("RMSNormalization is float32 only");
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
  PG_ASSIGN_OR_RETURN(float epsilon, ctx.attrs().get_float("epsilon", 1e-5f));
  const int64_t rank = x.rank();
  if (axis < -rank || axis >= rank) return ctx.error("axis out of range");
  if (axis < 0) axis += rank;
  std::vector<int64_t> axes;
  for (int64_t a = axis; a < rank; ++a) axes.push_back(a);
  Tensor axes_t = Tensor::from_vector<int64_t>(axes, {static_cast<int64_t>(axes.size())});
  PG_ASSIGN_OR_RETURN(Tensor sq, binary("Mul", x, x));
  PG_ASSIGN_OR_RETURN(Tensor ms, evaluate_tensor(make_eval_node("ReduceMean"), {&sq, &axes_t}));
  Tensor eps = Tensor::scalar<float>(epsilon);
  PG_ASSIGN_OR_RETURN(Tensor ms_eps, binary("Add", ms, eps));
  PG_ASSIGN_OR_RETURN(Tensor s, evaluate_tensor(make_eval_node("Sqrt"), {&ms_eps}));
  PG_ASSIGN_OR_RETURN(Tensor n, binary("Div", x, s));
  PG_ASSIGN_OR_RETURN(Tensor y, binary("Mul", n, ctx.input(1)));
  ctx.set_output(0, y);
  return Status::ok();
}

// ElementwiseChain: the program interpreted element by element, each step with
// the scalar semantics of the reference kernel of its ONNX op
// (ops/elementwise_chain.h).
Status elementwise_chain_kernel(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(std::vector<ChainStep> steps, read_chain_program(ctx.node()));
  const Tensor& x0 = ctx.input(0);
  std::vector<const float*> in(ctx.num_inputs());
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != DType::kFloat32 || t.shape() != x0.shape())
      return ctx.error("input " + std::to_string(i) + " must be float32 shaped like input 0");
    in[i] = t.data<float>();
  }
  Tensor y = Tensor::zeros(DType::kFloat32, x0.shape());
  float* py = y.data<float>();
  for (int64_t i = 0; i < y.numel(); ++i) {
    float acc = in[0][i];
    for (const ChainStep& s : steps) {
      if (!chain_op_is_binary(s.op)) {
        acc = chain_unary(s.op, acc, s.p0, s.p1);
        continue;
      }
      const float other = s.operand < 0 ? s.p0 : in[static_cast<size_t>(s.operand)][i];
      acc = s.swapped ? chain_binary(s.op, other, acc) : chain_binary(s.op, acc, other);
    }
    py[i] = acc;
  }
  ctx.set_output(0, y);
  return Status::ok();
}

}  // namespace

void register_fused_kernels(KernelRegistry& r) {
  r.add(kPeregrineDomain, "FusedConv", [](KernelContext& c) { return fused_base_kernel(c, "Conv", 3); });
  r.add(kPeregrineDomain, "FusedGemm", [](KernelContext& c) { return fused_base_kernel(c, "Gemm", 3); });
  r.add(kPeregrineDomain, "FusedMatMul",
        [](KernelContext& c) { return fused_base_kernel(c, "MatMul", 2); });
  r.add(kPeregrineDomain, "Attention", attention_kernel);
  r.add(kPeregrineDomain, "ConvNhwc", conv_nhwc_kernel);
  r.add(kPeregrineDomain, "RMSNormalization", rms_norm_kernel);
  r.add(kOnnxDomain, "RMSNormalization", rms_norm_kernel);
  r.add(kPeregrineDomain, "ElementwiseChain", elementwise_chain_kernel);
  // Aliases for models whose opset predates the ONNX op: same kernel.
  if (const KernelFn* gelu = r.find(kOnnxDomain, "Gelu")) r.add(kPeregrineDomain, "Gelu", *gelu);
  if (const KernelFn* ln = r.find(kOnnxDomain, "LayerNormalization"))
    r.add(kPeregrineDomain, "LayerNormalization", *ln);
}

}  // namespace peregrine
