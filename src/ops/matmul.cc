// Schemas of the matmul family: MatMul, Gemm, Einsum, Det.
#include <string>
#include <vector>

#include "ops/infer_helpers.h"
#include "ops/matmul_util.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

std::string type_name(DType d) { return std::string(dtype_name(d)); }

// Inputs that are present must be tensors of one type; returns it.
Expected<DType> common_type(const InferContext& ctx, std::initializer_list<size_t> inputs) {
  DType dtype = DType::kUndefined;
  for (size_t i : inputs) {
    if (!ctx.has_input(i)) continue;
    PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
    DType d = ctx.input_type(i).dtype;
    if (dtype == DType::kUndefined) {
      dtype = d;
    } else if (d != dtype) {
      return ctx.error("input '" + ctx.node().inputs[i] + "' has type " + type_name(d) +
                       ", expected " + type_name(dtype) + " like input '" +
                       ctx.node().inputs[0] + "'");
    }
  }
  return dtype;
}

Status require_numeric(const InferContext& ctx, DType d) {
  if (!dtype_is_float(d) && !(dtype_is_integer(d) && dtype_packed_bits(d) == 0))
    return ctx.error("type " + type_name(d) + " is not supported (numeric types only)");
  return Status::ok();
}

Status infer_matmul(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(DType dtype, common_type(ctx, {0, 1}));
  PG_RETURN_IF_ERROR(require_numeric(ctx, dtype));
  const ir::ValueType& a = ctx.input_type(0);
  const ir::ValueType& b = ctx.input_type(1);
  if (!a.has_shape || !b.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(dtype));
    return Status::ok();
  }
  auto shape = matmul_output_shape(a.dims, b.dims);
  if (!shape.is_ok()) return ctx.error(shape.status().message());
  ctx.set_output_tensor(0, dtype, *shape);
  return Status::ok();
}

OpCost matmul_cost(const ir::Node&, const std::vector<ir::ValueType>& in,
                   const std::vector<ir::ValueType>& out) {
  OpCost c = default_cost(in, out);
  if (in.size() >= 2 && in[0].is_static() && !in[0].dims.empty() && !out.empty() &&
      out[0].is_static()) {
    double n = 1;
    for (int64_t d : out[0].dims) n *= static_cast<double>(d);
    c.flops = 2 * n * static_cast<double>(in[0].dims.back());
  }
  return c;
}

Status infer_gemm(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(DType dtype, common_type(ctx, {0, 1, 2}));
  PG_RETURN_IF_ERROR(require_numeric(ctx, dtype));
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 2, 2));
  PG_RETURN_IF_ERROR(require_rank(ctx, 1, 2, 2));
  PG_ASSIGN_OR_RETURN(int64_t trans_a, ctx.attrs().get_int("transA", 0));
  PG_ASSIGN_OR_RETURN(int64_t trans_b, ctx.attrs().get_int("transB", 0));
  const ir::ValueType& a = ctx.input_type(0);
  const ir::ValueType& b = ctx.input_type(1);
  int64_t m = -1, k_a = -1, k_b = -1, n = -1;
  if (a.has_shape) {
    m = a.dims[trans_a ? 1 : 0];
    k_a = a.dims[trans_a ? 0 : 1];
  }
  if (b.has_shape) {
    k_b = b.dims[trans_b ? 1 : 0];
    n = b.dims[trans_b ? 0 : 1];
  }
  if (k_a >= 0 && k_b >= 0 && k_a != k_b)
    return ctx.error("inner dims do not match: A " + shape_to_string(a.dims) + " (transA=" +
                     std::to_string(trans_a) + "), B " + shape_to_string(b.dims) +
                     " (transB=" + std::to_string(trans_b) + ")");
  if (ctx.has_input(2)) {
    const ir::ValueType& c = ctx.input_type(2);
    if (c.has_shape) {
      if (c.rank() > 2)
        return ctx.error("input '" + ctx.node().inputs[2] + "' (C) has rank " +
                         std::to_string(c.rank()) + ", expected at most 2");
      // C broadcasts one way, to (M, N).
      Shape target{m, n};
      for (size_t i = 0; i < c.dims.size(); ++i) {
        int64_t cd = c.dims[c.dims.size() - 1 - i], td = target[1 - i];
        if (cd >= 0 && td >= 0 && cd != 1 && cd != td)
          return ctx.error("input '" + ctx.node().inputs[2] + "' (C) of shape " +
                           shape_to_string(c.dims) +
                           " cannot be broadcast to " + std::to_string(m) + "x" +
                           std::to_string(n));
      }
    }
  }
  ctx.set_output_tensor(0, dtype, {m, n});
  return Status::ok();
}

OpCost gemm_cost(const ir::Node& node, const std::vector<ir::ValueType>& in,
                 const std::vector<ir::ValueType>& out) {
  OpCost c = default_cost(in, out);
  if (!in.empty() && in[0].is_static() && in[0].dims.size() == 2 && !out.empty() &&
      out[0].is_static()) {
    const ir::Attribute* t = node.attribute("transA");
    int64_t k = in[0].dims[t && t->i ? 0 : 1];
    c.flops = 2 * static_cast<double>(out[0].dims[0]) * static_cast<double>(out[0].dims[1]) *
              static_cast<double>(k);
  }
  return c;
}

Status infer_einsum(InferContext& ctx) {
  if (ctx.num_inputs() == 0) return ctx.error("Einsum needs at least one input");
  std::vector<size_t> all;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
    all.push_back(i);
  }
  DType dtype = ctx.input_type(0).dtype;
  for (size_t i : all)
    if (ctx.input_type(i).dtype != dtype)
      return ctx.error("input '" + ctx.node().inputs[i] + "' has type " +
                       type_name(ctx.input_type(i).dtype) + ", expected " + type_name(dtype));
  PG_RETURN_IF_ERROR(require_numeric(ctx, dtype));
  PG_ASSIGN_OR_RETURN(std::string equation, ctx.attrs().get_string("equation"));
  std::vector<Shape> shapes;
  for (size_t i : all) {
    if (!ctx.input_type(i).has_shape) {
      ctx.set_output(0, ir::ValueType::tensor_unknown_shape(dtype));
      return Status::ok();
    }
    shapes.push_back(ctx.input_type(i).dims);
  }
  auto spec = parse_einsum(equation, shapes);
  if (!spec.is_ok()) return ctx.error(spec.status().message());
  Shape out;
  for (int l : spec->output_labels) out.push_back(spec->label_sizes[static_cast<size_t>(l)]);
  ctx.set_output_tensor(0, dtype, out);
  return Status::ok();
}

OpCost einsum_cost(const ir::Node& node, const std::vector<ir::ValueType>& in,
                   const std::vector<ir::ValueType>& out) {
  OpCost c = default_cost(in, out);
  const ir::Attribute* eq = node.attribute("equation");
  std::vector<Shape> shapes;
  for (const auto& t : in) {
    if (!t.is_static()) return c;
    shapes.push_back(t.dims);
  }
  if (!eq) return c;
  auto spec = parse_einsum(eq->s, shapes);
  if (!spec.is_ok()) return c;
  double iterations = 1;
  for (int64_t s : spec->label_sizes)
    if (s >= 0) iterations *= static_cast<double>(s);
  c.flops = iterations * static_cast<double>(in.size());  // one multiply-add per operand
  return c;
}

Status infer_det(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& x = ctx.input_type(0);
  if (!dtype_is_float(x.dtype))
    return ctx.error("type " + type_name(x.dtype) + " is not supported (float types only)");
  if (!x.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(x.dtype));
    return Status::ok();
  }
  if (x.rank() < 2) return ctx.error("input must have rank >= 2, got " + std::to_string(x.rank()));
  int64_t rows = x.dims[x.dims.size() - 2], cols = x.dims.back();
  if (rows >= 0 && cols >= 0 && rows != cols)
    return ctx.error("input of shape " + shape_to_string(x.dims) + " is not square");
  ctx.set_output_tensor(0, x.dtype, Shape(x.dims.begin(), x.dims.end() - 2));
  return Status::ok();
}

OpCost det_cost(const ir::Node&, const std::vector<ir::ValueType>& in,
                const std::vector<ir::ValueType>& out) {
  OpCost c = default_cost(in, out);
  if (!in.empty() && in[0].is_static() && in[0].dims.size() >= 2) {
    double n = static_cast<double>(in[0].dims.back()), batch = 1;
    for (size_t i = 0; i + 2 < in[0].dims.size(); ++i) batch *= static_cast<double>(in[0].dims[i]);
    c.flops = batch * 2.0 / 3.0 * n * n * n;
  }
  return c;
}

}  // namespace

void register_matmul_schemas(SchemaRegistry& r) {
  r.add({kOnnxDomain, "MatMul", 1, infer_matmul, matmul_cost});
  r.add({kOnnxDomain, "Gemm", 1, infer_gemm, gemm_cost});
  r.add({kOnnxDomain, "Einsum", 12, infer_einsum, einsum_cost});
  r.add({kOnnxDomain, "Det", 11, infer_det, det_cost});
}

}  // namespace peregrine
