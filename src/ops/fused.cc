// Schemas of the fused ops the graph compiler produces, in the `peregrine` domain.
// Each is defined as the unfused math it replaced (see the reference kernels in
// backends/reference/fused.cc):
//   FusedConv(X, W, B?, Z?)   = act(Conv(X, W, B) + Z)       Conv's attributes
//   FusedGemm(A, B, C?, Z?)   = act(Gemm(A, B, C) + Z)       Gemm's attributes
//   FusedMatMul(A, B, Z?)     = act(MatMul(A, B) + Z)
//     act: attribute `activation` ("" none, Relu, Sigmoid, Tanh, HardSwish, LeakyRelu
//     [alpha], Clip [min, max], Gelu, GeluTanh, SiLU) with `activation_params`.
//     Z (a residual or bias) broadcasts to the output without changing its shape.
//   Attention(Q, K, V, mask?) = Softmax(Q K^T * scale + mask) V
//     num_heads = 0: inputs already per head, (..., S, D); k_transposed = 1 means K
//     is given as (..., D, S). num_heads = H > 0: inputs are (B, S, H*D) and are split
//     into heads (reshape + transpose) and merged back after.
//     Grouped-query attention: K and V may have fewer heads, Hkv dividing H (kv_num_heads =
//     Hkv with num_heads; K's dim -3 in the per-head form); query head h reads head h / (H / Hkv).
//     softcap > 0 (optional, default 0): the scaled scores become softcap * tanh(s / softcap)
//     before the mask is added.
//     empty_rows_zero = 1 (optional, default 0): probabilities that came out NaN (a row whose
//     every score is -inf) are 0, so such a row gives zeros (ONNX Attention's rule; torch exports
//     it as Where(IsNaN(P), 0, P)).
//     causal = 1 (optional, default 0): query i sees key j only when j <= i + Skv - Sq, as if a
//     mask of -inf above that diagonal were added.
//   Gelu, LayerNormalization: the ONNX ops, for models whose opset predates them.
//   RMSNormalization(X, Scale) = X / sqrt(ReduceMean(X^2, axes = [axis, rank)) + epsilon) * Scale
//     (float32; ONNX-23 semantics; attributes axis, default -1, and epsilon, default 1e-5).
//     Scale broadcasts to X's normalized dims. Written by the rms_norm_fusion pass, and the
//     schema of ONNX's RMSNormalization (opset 23) too.
//   ElementwiseChain(X0, X1...) = a program of float32 unary / binary elementwise steps over
//     inputs all shaped like X0 (encoding in ops/elementwise_chain.h). Written by the
//     elementwise_chain_fusion pass.
//   ConvNhwc(X, W, B?, Z?)    = FusedConv with X, Z and Y in NHWC (N, H, W, C) instead of
//     NCHW; W stays (M, C / group, KH, KW). Only 2-D. Written by the layout_nhwc pass.
// Registered after the families they build on (op_list.h lists this family last).
#include <cmath>

#include "ops/elementwise_chain.h"
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

const char* const kActivations[] = {"",          "Relu", "Sigmoid", "Tanh", "HardSwish",
                                    "LeakyRelu", "Clip", "Gelu",    "GeluTanh", "SiLU"};

Status check_activation(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(std::string act, ctx.attrs().get_string("activation", ""));
  for (const char* a : kActivations)
    if (act == a) return Status::ok();
  return ctx.error("unknown activation '" + act + "'");
}

// Runs `base` on the first `n` inputs, then checks the optional extra input `z`
// broadcasts into output 0 without changing its shape.
Status infer_base_plus_z(const InferFn& base, InferContext& ctx, size_t n) {
  PG_RETURN_IF_ERROR(check_activation(ctx));
  std::vector<const ir::ValueType*> types;
  std::vector<const Tensor*> values;
  for (size_t i = 0; i < n && i < ctx.num_inputs(); ++i) {
    types.push_back(ctx.has_input(i) ? &ctx.input_type(i) : nullptr);
    values.push_back(ctx.input_value(i));
  }
  InferContext sub(ctx.node(), types, values);
  PG_RETURN_IF_ERROR(base(sub));
  for (size_t i = 0; i < ctx.num_outputs(); ++i) ctx.set_output(i, sub.output_types()[i]);
  if (ctx.num_inputs() > n + 1) return ctx.error("too many inputs");
  if (ctx.has_input(n)) {
    PG_RETURN_IF_ERROR(require_tensor_input(ctx, n));
    const ir::ValueType& out = sub.output_types()[0];
    const ir::ValueType& z = ctx.input_type(n);
    if (z.dtype != out.dtype) return ctx.error("residual input has a different type");
    if (z.has_shape && out.has_shape) {
      auto b = broadcast_shapes(out.dims, z.dims);
      if (!b.is_ok() || (out.is_static() && *b != out.dims))
        return ctx.error("residual input " + shape_to_string(z.dims) + " does not broadcast to " +
                         shape_to_string(out.dims));
    }
  }
  return Status::ok();
}

// (N, C, H, W) <-> (N, H, W, C) on a rank-4 type; other types are returned unchanged.
ir::ValueType permute4(const ir::ValueType& t, const int64_t (&perm)[4]) {
  if (!t.has_shape || t.dims.size() != 4) return t;
  ir::ValueType r = t;
  for (size_t i = 0; i < 4; ++i) {
    r.dims[i] = t.dims[static_cast<size_t>(perm[i])];
    if (t.dim_names.size() == 4) r.dim_names[i] = t.dim_names[static_cast<size_t>(perm[i])];
  }
  return r;
}
constexpr int64_t kNhwcToNchw[4] = {0, 3, 1, 2};
constexpr int64_t kNchwToNhwc[4] = {0, 2, 3, 1};

// Conv's inference on X seen as NCHW; Y permuted back to NHWC; Z must equal Y's shape.
Status infer_conv_nhwc(const InferFn& conv_infer, InferContext& ctx) {
  PG_RETURN_IF_ERROR(check_activation(ctx));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& x = ctx.input_type(0);
  if (x.has_shape && x.dims.size() != 4) return ctx.error("ConvNhwc expects a rank-4 X");
  if (ctx.num_inputs() > 4) return ctx.error("too many inputs");
  const ir::ValueType x_nchw = permute4(x, kNhwcToNchw);
  std::vector<const ir::ValueType*> types = {&x_nchw};
  std::vector<const Tensor*> values = {nullptr};
  for (size_t i = 1; i < 3 && i < ctx.num_inputs(); ++i) {
    types.push_back(ctx.has_input(i) ? &ctx.input_type(i) : nullptr);
    values.push_back(ctx.input_value(i));
  }
  InferContext sub(ctx.node(), types, values);
  PG_RETURN_IF_ERROR(conv_infer(sub));
  const ir::ValueType y = permute4(sub.output_types()[0], kNchwToNhwc);
  ctx.set_output(0, y);
  if (ctx.has_input(3)) {
    PG_RETURN_IF_ERROR(require_tensor_input(ctx, 3));
    const ir::ValueType& z = ctx.input_type(3);
    if (z.dtype != y.dtype) return ctx.error("residual input has a different type");
    if (z.is_static() && y.is_static() && z.dims != y.dims)
      return ctx.error("residual input " + shape_to_string(z.dims) + " is not the output's " +
                       shape_to_string(y.dims));
  }
  return Status::ok();
}

Status infer_attention(InferContext& ctx) {
  for (size_t i = 0; i < 3; ++i) PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  const ir::ValueType& q = ctx.input_type(0);
  const ir::ValueType& v = ctx.input_type(2);
  if (!dtype_is_float(q.dtype)) return ctx.error("expects float inputs");
  PG_ASSIGN_OR_RETURN(int64_t heads, ctx.attrs().get_int("num_heads", 0));
  if (heads < 0) return ctx.error("num_heads must be >= 0");
  if (!q.has_shape || !v.has_shape || q.dims.empty() || v.dims.empty()) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(q.dtype));
    return Status::ok();
  }
  if (heads > 0 && (q.dims.size() != 3 || v.dims.size() != 3))
    return ctx.error("with num_heads, Q, K and V must be (batch, seq, hidden)");
  PG_ASSIGN_OR_RETURN(int64_t kv_heads, ctx.attrs().get_int("kv_num_heads", 0));
  if (kv_heads < 0 || (kv_heads > 0 && (heads == 0 || heads % kv_heads != 0)))
    return ctx.error("kv_num_heads " + std::to_string(kv_heads) + " must divide num_heads " +
                     std::to_string(heads));
  Shape out = q.dims;
  // Head form: Y is (B, S, H * Dv), V (B, S, Hkv * Dv).
  out.back() =
      kv_heads > 0 && v.dims.back() >= 0 ? v.dims.back() / kv_heads * heads : v.dims.back();
  ctx.set_output_tensor(0, q.dtype, out);
  return Status::ok();
}

Status infer_rms_norm(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  const ir::ValueType& x = ctx.input_type(0);
  if (x.dtype != DType::kFloat32) return ctx.error("expects a float32 X");
  if (ctx.input_type(1).dtype != x.dtype) return ctx.error("Scale has a different type than X");
  if (ctx.num_inputs() > 2) return ctx.error("too many inputs");
  if (x.has_shape) {
    PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
    PG_RETURN_IF_ERROR(normalize_axis(ctx, axis, x.rank()).status());
  }
  ctx.set_output(0, x);
  return Status::ok();
}

OpCost attention_cost(const ir::Node& node, const std::vector<ir::ValueType>& in,
                      const std::vector<ir::ValueType>& out) {
  OpCost c = default_cost(in, out);
  if (in.size() >= 3 && in[0].is_static() && in[1].is_static() && in[2].is_static() &&
      in[1].dims.size() >= 2) {
    const ir::Attribute* kt = node.attribute("k_transposed");
    const bool k_transposed = kt && kt->type == ir::Attribute::Type::kInt && kt->i != 0;
    double q = 1, kv_len = 1;
    for (int64_t d : in[0].dims) q *= static_cast<double>(d);
    // K is (..., S, D), or (..., D, S) with k_transposed.
    kv_len = static_cast<double>(in[1].dims[in[1].dims.size() - (k_transposed ? 1 : 2)]);
    double dv = static_cast<double>(in[2].dims.back());
    c.flops = 2 * q * kv_len + 2 * (q / static_cast<double>(in[0].dims.back())) * kv_len * dv;
  }
  return c;
}

}  // namespace

void register_fused_schemas(SchemaRegistry& r) {
  const OpSchema* conv = r.find(kOnnxDomain, "Conv");
  const OpSchema* gemm = r.find(kOnnxDomain, "Gemm");
  const OpSchema* matmul = r.find(kOnnxDomain, "MatMul");
  const OpSchema* gelu = r.find(kOnnxDomain, "Gelu");
  const OpSchema* layer_norm = r.find(kOnnxDomain, "LayerNormalization");
  if (!conv || !gemm || !matmul || !gelu || !layer_norm) return;  // op_list order broken
  InferFn conv_infer = conv->infer, gemm_infer = gemm->infer, matmul_infer = matmul->infer;
  r.add({kPeregrineDomain, "FusedConv", 1,
         [conv_infer](InferContext& ctx) { return infer_base_plus_z(conv_infer, ctx, 3); },
         conv->cost});
  r.add({kPeregrineDomain, "FusedGemm", 1,
         [gemm_infer](InferContext& ctx) { return infer_base_plus_z(gemm_infer, ctx, 3); },
         gemm->cost});
  r.add({kPeregrineDomain, "FusedMatMul", 1,
         [matmul_infer](InferContext& ctx) { return infer_base_plus_z(matmul_infer, ctx, 2); },
         matmul->cost});
  r.add({kPeregrineDomain, "Attention", 1, infer_attention, attention_cost});
  r.add({kPeregrineDomain, "RMSNormalization", 1, infer_rms_norm, elementwise_cost(4)});
  // ONNX's own RMSNormalization (opset 23) has the same definition; float32, stash_type 1.
  r.add({kOnnxDomain, "RMSNormalization", 23,
         [](InferContext& ctx) -> Status {
           PG_ASSIGN_OR_RETURN(int64_t stash, ctx.attrs().get_int("stash_type", 1));
           if (stash != 1) return ctx.error("stash_type " + std::to_string(stash) + " (only 1, float32, is supported)");
           return infer_rms_norm(ctx);
         },
         elementwise_cost(4)});
  r.add({kPeregrineDomain, "ElementwiseChain", 1, infer_elementwise_chain, elementwise_chain_cost});
  r.add({kPeregrineDomain, "ConvNhwc", 1,
         [conv_infer](InferContext& ctx) { return infer_conv_nhwc(conv_infer, ctx); },
         conv->cost});
  OpSchema gelu_alias = *gelu;
  gelu_alias.domain = kPeregrineDomain;
  r.add(gelu_alias);
  OpSchema ln_alias = *layer_norm;
  ln_alias.domain = kPeregrineDomain;
  ln_alias.since_version = 1;
  r.add(ln_alias);
}

}  // namespace peregrine
