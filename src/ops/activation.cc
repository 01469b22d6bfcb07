// Schemas of the activation family.
#include <algorithm>
#include <string>

#include "ops/elementwise_util.h"
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

void add_unary(SchemaRegistry& r, const char* op, TypeClass c, double flops) {
  r.add({kOnnxDomain, op, 1, [c](InferContext& ctx) { return infer_unary_of_class(ctx, c); },
         elementwise_cost(flops)});
}

// PRelu: slope broadcasts to X (unidirectionally), so the output has X's shape.
Status infer_prelu(InferContext& ctx) {
  if (ctx.num_inputs() != 2) return ctx.error("expects 2 inputs (X, slope)");
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  PG_RETURN_IF_ERROR(require_same_class_inputs(ctx, 0, 2, TypeClass::kNumeric));
  const ir::ValueType& x = ctx.input_type(0);
  ir::ValueType slope = ctx.input_type(1);
  // Before opset 7 a 1-D slope of C values applied per channel (axis 1), not numpy-style.
  if (ctx.opset() < 7 && x.has_shape && slope.has_shape && slope.rank() == 1 && x.rank() > 2 &&
      slope.dims[0] == x.dims[1] && slope.dims[0] != 1) {
    slope.dims.resize(static_cast<size_t>(x.rank() - 1), 1);
  }
  if (x.has_shape && slope.has_shape) {
    auto out = broadcast_shapes(x.dims, slope.dims);
    if (!out.is_ok()) return ctx.error(out.status().message());
    if (out->size() != x.dims.size())
      return ctx.error("slope of rank " + std::to_string(slope.rank()) +
                       " does not broadcast to X of rank " + std::to_string(x.rank()));
    for (size_t i = 0; i < x.dims.size(); ++i)
      if (x.dims[i] >= 0 && (*out)[i] != x.dims[i])
        return ctx.error("slope shape " + shape_to_string(slope.dims) +
                         " does not broadcast to X shape " + shape_to_string(x.dims));
    ctx.set_output_tensor(0, x.dtype, *out);
    return Status::ok();
  }
  ctx.set_output(0, x);
  return Status::ok();
}

// Clip: min/max are attributes before opset 11 and optional scalar inputs from 11.
Status infer_clip(InferContext& ctx) {
  if (ctx.opset() < 11) {
    if (ctx.num_inputs() != 1) return ctx.error("expects 1 input before opset 11");
    return infer_unary_of_class(ctx, TypeClass::kFloat);
  }
  if (ctx.num_inputs() < 1 || ctx.num_inputs() > 3) return ctx.error("expects 1 to 3 inputs");
  PG_RETURN_IF_ERROR(require_same_class_inputs(ctx, 0, 3, TypeClass::kNumeric));
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const ir::ValueType& bound = ctx.input_type(i);
    if (bound.is_static()) {
      // One element: every dim 1 (a product of the dims could overflow).
      const bool scalar =
          std::all_of(bound.dims.begin(), bound.dims.end(), [](int64_t d) { return d == 1; });
      if (!scalar)
        return ctx.error("input '" + ctx.node().inputs[i] + "' must be a scalar, has shape " +
                         shape_to_string(bound.dims));
    }
  }
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

Status infer_gelu(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(std::string approximate, ctx.attrs().get_string("approximate", "none"));
  if (approximate != "none" && approximate != "tanh")
    return ctx.error("attribute 'approximate' must be \"none\" or \"tanh\", got \"" +
                     approximate + "\"");
  return infer_unary_of_class(ctx, TypeClass::kFloat);
}

Status infer_celu(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(float alpha, ctx.attrs().get_float("alpha", 1.0f));
  if (alpha == 0) return ctx.error("attribute 'alpha' must not be 0");
  return infer_unary_of_class(ctx, TypeClass::kFloat);
}

// SwiGLU (opset 28): Swish(A) * B on two inputs of one shape; no broadcasting.
Status infer_swiglu(InferContext& ctx) {
  if (ctx.num_inputs() != 2) return ctx.error("expects 2 inputs (A, B)");
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  PG_RETURN_IF_ERROR(require_same_class_inputs(ctx, 0, 2, TypeClass::kFloat));
  const ir::ValueType& a = ctx.input_type(0);
  const ir::ValueType& b = ctx.input_type(1);
  if (a.has_shape && b.has_shape) {
    bool same = a.rank() == b.rank();
    for (size_t i = 0; same && i < a.dims.size(); ++i)
      same = a.dims[i] < 0 || b.dims[i] < 0 || a.dims[i] == b.dims[i];
    if (!same)
      return ctx.error("A " + shape_to_string(a.dims) + " and B " + shape_to_string(b.dims) +
                       " must have one shape (SwiGLU does not broadcast)");
  }
  ctx.set_output(0, a.has_shape ? a : b);
  return Status::ok();
}

}  // namespace

void register_activation_schemas(SchemaRegistry& r) {
  add_unary(r, "Relu", TypeClass::kSignedOrFloat, 1);
  for (const char* op : {"LeakyRelu", "ThresholdedRelu", "HardSigmoid", "Softsign"})
    add_unary(r, op, TypeClass::kFloat, 2);
  add_unary(r, "HardSwish", TypeClass::kFloat, 4);
  add_unary(r, "Shrink", TypeClass::kNumeric, 2);
  // One exp/log/tanh/erf (~10 flops) plus a few arithmetic operations.
  for (const char* op : {"Elu", "Selu", "Sigmoid", "Softplus", "Tanh"})
    add_unary(r, op, TypeClass::kFloat, 12);
  r.add({kOnnxDomain, "Celu", 1, infer_celu, elementwise_cost(12)});
  add_unary(r, "Mish", TypeClass::kFloat, 25);
  // Swish (opset 24): x * Sigmoid(alpha * x).
  r.add({kOnnxDomain, "Swish", 24, [](InferContext& ctx) { return infer_unary_of_class(ctx, TypeClass::kFloat); },
         elementwise_cost(14)});
  r.add({kOnnxDomain, "SwiGLU", 28, infer_swiglu, elementwise_cost(16)});
  r.add({kOnnxDomain, "Gelu", 1, infer_gelu, elementwise_cost(25)});
  r.add({kOnnxDomain, "PRelu", 1, infer_prelu, elementwise_cost(2)});
  r.add({kOnnxDomain, "Clip", 1, infer_clip, elementwise_cost(2)});
}

}  // namespace peregrine
