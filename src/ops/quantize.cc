// Schemas of the quantize family: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv, and
// peregrine.QLinearAdd, peregrine.QGemm and peregrine.TableLookup (what passes/fuse_qdq_add.cc,
// fuse_qdq_matmul.cc and fuse_qdq_lookup_table.cc make of a quantized Add, MatMul or Gemm and
// of a quantized elementwise function) and peregrine.QuantizeDequantize
// (fuse_quantize_dequantize.cc).
#include <string>

#include "ops/infer_helpers.h"
#include "ops/op_list.h"
#include "ops/quantize_util.h"

namespace peregrine {

namespace {

bool quantized_type(DType t) {
  switch (t) {
    case DType::kUInt8: case DType::kInt8: case DType::kUInt16: case DType::kInt16:
    case DType::kUInt4: case DType::kInt4: case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ: case DType::kFloat8E5M2: case DType::kFloat8E5M2FNUZ:
    case DType::kInt2:
    case DType::kUInt2:
    case DType::kFloat4E2M1:
      return true;
    default:
      return false;
  }
}

// Output `i` with input 0's shape (or unknown shape) and element type `d`.
void set_like_input0(InferContext& ctx, size_t i, DType d) {
  const ir::ValueType& in = ctx.input_type(0);
  if (in.has_shape) {
    ir::ValueType out = in;
    out.dtype = d;
    ctx.set_output(i, out);
  } else {
    ctx.set_output(i, ir::ValueType::tensor_unknown_shape(d));
  }
}

// Scale and zero point of (De)QuantizeLinear: scalar, 1-D along `axis`, or
// (opset 21) blocked: x's shape with dim `axis` divided into blocks.
Status check_quant_params(const InferContext& ctx, size_t param) {
  if (!ctx.has_input(param)) return Status::ok();
  const ir::ValueType& x = ctx.input_type(0);
  const ir::ValueType& p = ctx.input_type(param);
  if (!x.has_shape || !p.has_shape) return Status::ok();
  PG_ASSIGN_OR_RETURN(int64_t block_size, ctx.attrs().get_int("block_size", 0));
  if (block_size < 0) return ctx.error("attribute 'block_size' must be >= 0");
  if (p.rank() == 0 || (p.rank() == 1 && p.dims[0] == 1 && block_size == 0)) return Status::ok();
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 1));
  PG_ASSIGN_OR_RETURN(axis, normalize_axis(ctx, axis, x.rank()));
  const std::string& name = ctx.node().inputs[param];
  if (block_size == 0) {
    if (p.rank() != 1)
      return ctx.error("input '" + name + "' must be a scalar or 1-D for per-axis quantization");
    if (p.dims[0] >= 0 && x.dims[axis] >= 0 && p.dims[0] != x.dims[axis])
      return ctx.error("input '" + name + "' has " + std::to_string(p.dims[0]) +
                       " elements, expected " + std::to_string(x.dims[axis]) + " (dim " +
                       std::to_string(axis) + " of the input)");
    return Status::ok();
  }
  if (p.rank() != x.rank())
    return ctx.error("input '" + name + "' must have the input's rank for blocked quantization");
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (p.dims[d] < 0 || x.dims[d] < 0) continue;
    // Blocks along the axis, rounded up without overflowing near 2^63.
    const int64_t expected =
        d == axis ? x.dims[d] / block_size + (x.dims[d] % block_size != 0) : x.dims[d];
    if (p.dims[d] != expected)
      return ctx.error("input '" + name + "' dim " + std::to_string(d) + " is " +
                       std::to_string(p.dims[d]) + ", expected " + std::to_string(expected));
  }
  return Status::ok();
}

Status infer_quantize_linear(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  PG_ASSIGN_OR_RETURN(int64_t output_dtype, ctx.attrs().get_int("output_dtype", 0));
  DType out = DType::kUInt8;
  if (ctx.has_input(2)) {
    out = ctx.input_type(2).dtype;
    if (output_dtype != 0 && output_dtype != static_cast<int64_t>(out))
      return ctx.error("attribute 'output_dtype' disagrees with the zero point's type");
  } else if (output_dtype != 0) {
    if (output_dtype < 0 || output_dtype > kMaxDTypeValue)
      return ctx.error("attribute 'output_dtype' is not a valid element type");
    out = static_cast<DType>(output_dtype);
  }
  if (!quantized_type(out))
    return ctx.error("cannot quantize to element type " + std::string(dtype_name(out)));
  DType x = ctx.input_type(0).dtype;
  if (!dtype_is_float(x) && x != DType::kInt32)
    return ctx.error("input 'x' must be float or int32, got " + std::string(dtype_name(x)));
  PG_RETURN_IF_ERROR(check_quant_params(ctx, 1));
  PG_RETURN_IF_ERROR(check_quant_params(ctx, 2));
  set_like_input0(ctx, 0, out);
  return Status::ok();
}

Status infer_dequantize_linear(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  DType x = ctx.input_type(0).dtype;
  if (!quantized_type(x) && x != DType::kInt32)
    return ctx.error("cannot dequantize element type " + std::string(dtype_name(x)));
  if (ctx.has_input(2) && ctx.input_type(2).dtype != x)
    return ctx.error("the zero point's type differs from the input's");
  DType scale = ctx.input_type(1).dtype;
  if (!dtype_is_float(scale))
    return ctx.error("input 'x_scale' must be a float type, got " +
                     std::string(dtype_name(scale)));
  PG_RETURN_IF_ERROR(check_quant_params(ctx, 1));
  PG_RETURN_IF_ERROR(check_quant_params(ctx, 2));
  set_like_input0(ctx, 0, scale);
  return Status::ok();
}

Status infer_dynamic_quantize_linear(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  if (ctx.input_type(0).dtype != DType::kFloat32)
    return ctx.error("input 'x' must be float32");
  set_like_input0(ctx, 0, DType::kUInt8);
  ctx.set_output_tensor(1, DType::kFloat32, {});
  ctx.set_output_tensor(2, DType::kUInt8, {});
  return Status::ok();
}

bool eight_bit(DType t) { return t == DType::kInt8 || t == DType::kUInt8; }

// Output 0 of a matmul of inputs a_index and b_index with element type `out`.
Status infer_matmul_like(InferContext& ctx, size_t a_index, size_t b_index, DType out) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, a_index));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, b_index));
  const ir::ValueType& a = ctx.input_type(a_index);
  const ir::ValueType& b = ctx.input_type(b_index);
  if (!eight_bit(a.dtype) || !eight_bit(b.dtype))
    return ctx.error("inputs 'a' and 'b' must be int8 or uint8");
  if (!a.has_shape || !b.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(out));
    return Status::ok();
  }
  auto shape = quantize_util::matmul_shape(a.dims, b.dims);
  if (!shape.is_ok()) return ctx.error(shape.status().message());
  ctx.set_output_tensor(0, out, *shape);
  return Status::ok();
}

Status infer_matmul_integer(InferContext& ctx) {
  return infer_matmul_like(ctx, 0, 1, DType::kInt32);
}

Status infer_qlinear_matmul(InferContext& ctx) {
  for (size_t i = 0; i < 8; ++i)
    if (i != 2 && i != 5 && i != 7) PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  DType out = ctx.has_input(7) ? ctx.input_type(7).dtype : ctx.input_type(0).dtype;
  if (!eight_bit(out)) return ctx.error("output type must be int8 or uint8");
  return infer_matmul_like(ctx, 0, 3, out);
}

// Output 0 of a convolution of inputs x_index and w_index with element type `out`.
Status infer_conv_like(InferContext& ctx, size_t x_index, size_t w_index, DType out) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, x_index));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, w_index));
  const ir::ValueType& x = ctx.input_type(x_index);
  const ir::ValueType& w = ctx.input_type(w_index);
  if (!eight_bit(x.dtype) || !eight_bit(w.dtype))
    return ctx.error("inputs 'x' and 'w' must be int8 or uint8");
  if (!x.has_shape || !w.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(out));
    return Status::ok();
  }
  auto geometry = quantize_util::conv_geometry(ctx.attrs(), x.dims, w.dims);
  if (!geometry.is_ok()) return ctx.error(geometry.status().message());
  ctx.set_output_tensor(0, out, geometry->output);
  return Status::ok();
}

Status infer_conv_integer(InferContext& ctx) { return infer_conv_like(ctx, 0, 1, DType::kInt32); }

Status infer_qlinear_conv(InferContext& ctx) {
  for (size_t i = 0; i < 8; ++i)
    if (i != 2 && i != 5 && i != 7) PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  DType out = ctx.has_input(7) ? ctx.input_type(7).dtype : ctx.input_type(0).dtype;
  if (!eight_bit(out)) return ctx.error("output type must be int8 or uint8");
  return infer_conv_like(ctx, 0, 3, out);
}

// peregrine.QLinearAdd(A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale,
// C_zero_point): C = QuantizeLinear(DequantizeLinear(A) + DequantizeLinear(B)), the inputs of
// com.microsoft.QLinearAdd. A and B have one shape; scales and zero points are scalars.
Status infer_qlinear_add(InferContext& ctx) {
  for (size_t i : {0, 1, 3, 4, 6}) PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  const ir::ValueType& a = ctx.input_type(0);
  const ir::ValueType& b = ctx.input_type(3);
  if (!eight_bit(a.dtype) || !eight_bit(b.dtype))
    return ctx.error("inputs 'A' and 'B' must be int8 or uint8");
  if (a.has_shape && b.has_shape && a.dims != b.dims)
    return ctx.error("inputs 'A' and 'B' must have the same shape");
  for (size_t i : {1, 2, 4, 5, 6, 7})
    if (ctx.has_input(i) && ctx.input_type(i).has_shape && ctx.input_type(i).rank() > 1)
      return ctx.error("scales and zero points must be scalars");
  DType out = ctx.has_input(7) ? ctx.input_type(7).dtype : DType::kUInt8;
  if (!eight_bit(out)) return ctx.error("output type must be int8 or uint8");
  set_like_input0(ctx, 0, out);
  return Status::ok();
}

// peregrine.QGemm(A, a_scale, a_zero_point, B, b_scale, b_zero_point, C?, y_scale,
// y_zero_point), attribute transB: Y = saturate(round((sum_k (A - a_zp)(B - b_zp) + C) * a_scale
// * b_scale / y_scale) + y_zp) with A [..., M, K], B 2-D ([K, N], or [N, K] with transB = 1),
// b_scale / b_zero_point scalars or one per column N, C int32 [N]; Y [..., M, N]. (QLinearMatMul
// with a bias, saturating as QuantizeLinear does.)
Status infer_qgemm(InferContext& ctx) {
  for (size_t i : {0, 1, 3, 4, 7}) PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  const ir::ValueType& a = ctx.input_type(0);
  const ir::ValueType& b = ctx.input_type(3);
  if (!eight_bit(a.dtype) || !eight_bit(b.dtype))
    return ctx.error("inputs 'A' and 'B' must be int8 or uint8");
  PG_ASSIGN_OR_RETURN(int64_t trans_b, ctx.attrs().get_int("transB", 0));
  DType out = ctx.has_input(8) ? ctx.input_type(8).dtype : DType::kUInt8;
  if (!eight_bit(out)) return ctx.error("output type must be int8 or uint8");
  if (!a.has_shape || !b.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(out));
    return Status::ok();
  }
  if (a.rank() < 2 || b.rank() != 2) return ctx.error("'A' must have rank >= 2 and 'B' rank 2");
  const int64_t k = trans_b ? b.dims[1] : b.dims[0], n = trans_b ? b.dims[0] : b.dims[1];
  if (a.dims.back() >= 0 && k >= 0 && a.dims.back() != k)
    return ctx.error("inner dimensions differ (" + std::to_string(a.dims.back()) + " vs " +
                     std::to_string(k) + ")");
  Shape y = a.dims;
  y.back() = n;
  ctx.set_output_tensor(0, out, y);
  return Status::ok();
}

// peregrine.TableLookup(X, table): Y[i] = table[byte(X[i])], X int8 or uint8 (its bit pattern
// read as unsigned indexes the table), table 256 int8 or uint8 values; Y has X's shape and the
// table's type.
Status infer_table_lookup(InferContext& ctx) {
  for (size_t i : {0, 1}) PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  const ir::ValueType& table = ctx.input_type(1);
  if (!eight_bit(ctx.input_type(0).dtype) || !eight_bit(table.dtype))
    return ctx.error("inputs 'X' and 'table' must be int8 or uint8");
  if (table.has_shape && (table.rank() != 1 || (table.dims[0] >= 0 && table.dims[0] != 256)))
    return ctx.error("input 'table' must have shape [256]");
  set_like_input0(ctx, 0, table.dtype);
  return Status::ok();
}

// peregrine.QuantizeDequantize(X, scale, zero_point): DequantizeLinear(QuantizeLinear(X)) with
// one-element parameters, X float32: X rounded to its quantization grid, as float32.
Status infer_quantize_dequantize(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  if (ctx.input_type(0).dtype != DType::kFloat32) return ctx.error("input 'X' must be float32");
  if (ctx.has_input(2) && !eight_bit(ctx.input_type(2).dtype))
    return ctx.error("'zero_point' must be int8 or uint8");
  for (size_t i : {1, 2})
    if (ctx.has_input(i) && ctx.input_type(i).has_shape && ctx.input_type(i).rank() > 1)
      return ctx.error("scale and zero point must be scalars");
  set_like_input0(ctx, 0, DType::kFloat32);
  return Status::ok();
}

CostFn matmul_like_cost(size_t a_index) {
  return [a_index](const ir::Node&, const std::vector<ir::ValueType>& inputs,
                   const std::vector<ir::ValueType>& outputs) {
    OpCost c = default_cost(inputs, outputs);
    if (a_index < inputs.size() && inputs[a_index].is_static() && !outputs.empty() &&
        outputs[0].is_static()) {
      double k = inputs[a_index].dims.empty() ? 1.0 : double(inputs[a_index].dims.back());
      double n = 1;
      for (int64_t d : outputs[0].dims) n *= double(d);
      c.flops = 2 * n * k;
    }
    return c;
  };
}

CostFn conv_like_cost(size_t w_index) {
  return [w_index](const ir::Node&, const std::vector<ir::ValueType>& inputs,
                   const std::vector<ir::ValueType>& outputs) {
    OpCost c = default_cost(inputs, outputs);
    if (w_index < inputs.size() && inputs[w_index].is_static() && !outputs.empty() &&
        outputs[0].is_static() && !inputs[w_index].dims.empty()) {
      double per_output = 1;  // multiply-adds per output element: C/group * kernel
      for (size_t i = 1; i < inputs[w_index].dims.size(); ++i)
        per_output *= double(inputs[w_index].dims[i]);
      double n = 1;
      for (int64_t d : outputs[0].dims) n *= double(d);
      c.flops = 2 * n * per_output;
    }
    return c;
  };
}

}  // namespace

void register_quantize_schemas(SchemaRegistry& r) {
  r.add({kOnnxDomain, "QuantizeLinear", 10, infer_quantize_linear, elementwise_cost(2)});
  r.add({kOnnxDomain, "DequantizeLinear", 10, infer_dequantize_linear, elementwise_cost(2)});
  r.add({kOnnxDomain, "DynamicQuantizeLinear", 11, infer_dynamic_quantize_linear,
         elementwise_cost(4)});
  r.add({kOnnxDomain, "MatMulInteger", 10, infer_matmul_integer, matmul_like_cost(0)});
  r.add({kOnnxDomain, "QLinearMatMul", 10, infer_qlinear_matmul, matmul_like_cost(0)});
  r.add({kOnnxDomain, "ConvInteger", 10, infer_conv_integer, conv_like_cost(1)});
  r.add({kOnnxDomain, "QLinearConv", 10, infer_qlinear_conv, conv_like_cost(3)});
  r.add({kPeregrineDomain, "QLinearAdd", 1, infer_qlinear_add, elementwise_cost(6)});
  r.add({kPeregrineDomain, "QGemm", 1, infer_qgemm, matmul_like_cost(0)});
  r.add({kPeregrineDomain, "TableLookup", 1, infer_table_lookup, elementwise_cost(0)});
  r.add(
      {kPeregrineDomain, "QuantizeDequantize", 1, infer_quantize_dequantize, elementwise_cost(3)});
}

}  // namespace peregrine
