// Schemas of the pool family: MaxPool, AveragePool, LpPool, their global forms,
// MaxUnpool and MaxRoiPool.
#include <string>
#include <vector>

#include "ops/conv_geometry.h"
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

const std::string& input_name(const InferContext& ctx, size_t i) { return ctx.node().inputs[i]; }

Status require_dtype(const InferContext& ctx, size_t i, bool allow_int8) {
  DType d = ctx.input_type(i).dtype;
  if (dtype_is_float(d)) return Status::ok();
  if (allow_int8 && (d == DType::kInt8 || d == DType::kUInt8)) return Status::ok();
  return ctx.error(
      "input '" + input_name(ctx, i) + "' has type " + std::string(dtype_name(d)) +
      (allow_int8 ? ", expected a float type, int8 or uint8" : ", expected a float type"));
}

Status require_flag(const InferContext& ctx, const char* name, int64_t fallback = 0) {
  PG_ASSIGN_OR_RETURN(int64_t v, ctx.attrs().get_int(name, fallback));
  if (v != 0 && v != 1)
    return ctx.error(std::string("attribute '") + name + "' is " + std::to_string(v) +
                     ", expected 0 or 1");
  return Status::ok();
}

// Input 0 is [N, C, D...] with rank 2 + `spatial` when known.
Status require_pool_input(const InferContext& ctx, size_t spatial) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& x = ctx.input_type(0);
  if (x.has_shape && x.rank() != static_cast<int64_t>(spatial) + 2)
    return ctx.error("input '" + input_name(ctx, 0) + "' has rank " + std::to_string(x.rank()) +
                     ", expected " + std::to_string(spatial + 2) + " (N, C and one dim per " +
                     "kernel_shape entry)");
  return Status::ok();
}

Expected<std::vector<int64_t>> read_kernel_shape(const InferContext& ctx) {
  if (!ctx.attrs().has("kernel_shape")) return ctx.error("attribute 'kernel_shape' is required");
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, ctx.attrs().get_ints("kernel_shape"));
  if (kernel.empty()) return ctx.error("attribute 'kernel_shape' is empty");
  return kernel;
}

// MaxPool, AveragePool, LpPool: Y (and MaxPool's int64 Indices) of shape [N, C, out...].
Status infer_pool(InferContext& ctx) {
  const std::string& op = ctx.node().op_type;
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_dtype(ctx, 0, op == "MaxPool"));
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, read_kernel_shape(ctx));
  PG_RETURN_IF_ERROR(require_pool_input(ctx, kernel.size()));
  PG_RETURN_IF_ERROR(require_flag(ctx, "ceil_mode"));
  if (op == "MaxPool") PG_RETURN_IF_ERROR(require_flag(ctx, "storage_order"));
  if (op == "AveragePool") PG_RETURN_IF_ERROR(require_flag(ctx, "count_include_pad"));
  if (op == "LpPool") {
    const ir::Attribute* p = ctx.node().attribute("p");
    if (p && p->type == ir::Attribute::Type::kInt && p->i < 1)
      return ctx.error("attribute 'p' is " + std::to_string(p->i) + ", expected >= 1");
  }
  PG_ASSIGN_OR_RETURN(int64_t ceil_mode, ctx.attrs().get_int("ceil_mode", 0));
  const ir::ValueType& x = ctx.input_type(0);
  Shape in(kernel.size(), -1);
  if (x.has_shape)
    for (size_t i = 0; i < kernel.size(); ++i) in[i] = x.dims[i + 2];
  PG_ASSIGN_OR_RETURN(WindowGeometry g, resolve_window(ctx.node(), in, kernel, ceil_mode != 0));
  Shape out{x.has_shape ? x.dims[0] : -1, x.has_shape ? x.dims[1] : -1};
  out.insert(out.end(), g.output.begin(), g.output.end());
  ctx.set_output_tensor(0, x.dtype, out);
  if (op == "MaxPool" && ctx.num_outputs() > 1) ctx.set_output_tensor(1, DType::kInt64, out);
  return Status::ok();
}

// GlobalAveragePool, GlobalMaxPool, GlobalLpPool: [N, C, D...] -> [N, C, 1...].
Status infer_global_pool(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_dtype(ctx, 0, false));
  const ir::ValueType& x = ctx.input_type(0);
  if (!x.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(x.dtype));
    return Status::ok();
  }
  if (x.rank() < 3)
    return ctx.error("input '" + input_name(ctx, 0) + "' has rank " + std::to_string(x.rank()) +
                     ", expected at least 3 (N, C and a spatial dim)");
  Shape out(x.dims.size(), 1);
  out[0] = x.dims[0];
  out[1] = x.dims[1];
  ctx.set_output_tensor(0, x.dtype, out);
  return Status::ok();
}

// X: [N, C, D...], I: int64 like X, optional output_shape -> [N, C, (D - 1) * s + k - pads].
Status infer_max_unpool(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  PG_RETURN_IF_ERROR(require_dtype(ctx, 0, false));
  if (ctx.input_type(1).dtype != DType::kInt64)
    return ctx.error("input '" + input_name(ctx, 1) + "' must be int64");
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, read_kernel_shape(ctx));
  const size_t spatial = kernel.size();
  PG_RETURN_IF_ERROR(require_pool_input(ctx, spatial));
  for (int64_t k : kernel)
    if (k < 1)
      return ctx.error("attribute 'kernel_shape' " + ints_to_string(kernel) +
                       " has a value below 1");
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> strides,
                      read_window_ints(ctx.node(), "strides", spatial, 1, 1));
  std::vector<int64_t> pads_begin, pads_end;
  PG_RETURN_IF_ERROR(read_pads(ctx.node(), spatial, pads_begin, pads_end));
  const ir::ValueType& x = ctx.input_type(0);
  const ir::ValueType& indices = ctx.input_type(1);
  if (x.has_shape && indices.has_shape && x.dims != indices.dims) {
    bool conflict = x.rank() != indices.rank();
    for (size_t i = 0; !conflict && i < x.dims.size(); ++i)
      conflict = x.dims[i] >= 0 && indices.dims[i] >= 0 && x.dims[i] != indices.dims[i];
    if (conflict)
      return ctx.error("input '" + input_name(ctx, 1) + "' has shape " +
                       shape_to_string(indices.dims) + ", expected the shape of '" +
                       input_name(ctx, 0) + "' (" + shape_to_string(x.dims) + ")");
  }
  const size_t rank = spatial + 2;
  if (ctx.has_input(2)) {
    PG_RETURN_IF_ERROR(require_rank(ctx, 2, 1, 1));
    const Tensor* shape = ctx.input_value(2);
    if (!shape) {
      ctx.set_output_tensor(0, x.dtype, Shape(rank, -1));
      return Status::ok();
    }
    Shape out = shape->to_int64_vector();
    if (out.size() != rank)
      return ctx.error("input '" + input_name(ctx, 2) + "' has " + std::to_string(out.size()) +
                       " values, expected " + std::to_string(rank));
    for (int64_t d : out)
      if (d < 0 || d > (int64_t{1} << 40))
        return ctx.error("input '" + input_name(ctx, 2) + "' " + ints_to_string(out) +
                         " has a value out of range");
    ctx.set_output_tensor(0, x.dtype, out);
    return Status::ok();
  }
  Shape out(rank, -1);
  if (x.has_shape) {
    out[0] = x.dims[0];
    out[1] = x.dims[1];
    for (size_t i = 0; i < spatial; ++i) {
      if (x.dims[i + 2] < 0) continue;
      if (strides[i] > (int64_t{1} << 31) || kernel[i] > (int64_t{1} << 31) ||
          x.dims[i + 2] > (int64_t{1} << 31))
        return ctx.error("window attributes or input dims are too large");
      out[i + 2] = (x.dims[i + 2] - 1) * strides[i] + kernel[i] - pads_begin[i] - pads_end[i];
      if (out[i + 2] < 0) return ctx.error("pads are larger than the unpooled output");
    }
  }
  ctx.set_output_tensor(0, x.dtype, out);
  return Status::ok();
}

// X: [N, C, H, W], rois: [num_rois, 5] -> [num_rois, C, pooled_h, pooled_w].
Status infer_max_roi_pool(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 4, 4));
  PG_RETURN_IF_ERROR(require_rank(ctx, 1, 2, 2));
  PG_RETURN_IF_ERROR(require_dtype(ctx, 0, false));
  const ir::ValueType& x = ctx.input_type(0);
  const ir::ValueType& rois = ctx.input_type(1);
  if (rois.dtype != x.dtype)
    return ctx.error("input '" + input_name(ctx, 1) + "' has type " +
                     std::string(dtype_name(rois.dtype)) + ", expected " +
                     std::string(dtype_name(x.dtype)));
  if (rois.has_shape && rois.dims[1] >= 0 && rois.dims[1] != 5)
    return ctx.error("input '" + input_name(ctx, 1) + "' has shape " + shape_to_string(rois.dims) +
                     ", expected [num_rois, 5]");
  if (!ctx.attrs().has("pooled_shape")) return ctx.error("attribute 'pooled_shape' is required");
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> pooled,
                      read_window_ints(ctx.node(), "pooled_shape", 2, 1, 1));
  PG_ASSIGN_OR_RETURN(float scale, ctx.attrs().get_float("spatial_scale", 1.0f));
  if (!(scale > 0)) return ctx.error("attribute 'spatial_scale' must be positive");
  ctx.set_output_tensor(
      0, x.dtype,
      {rois.has_shape ? rois.dims[0] : -1, x.has_shape ? x.dims[1] : -1, pooled[0], pooled[1]});
  return Status::ok();
}

// Each output element reads one window: output size x kernel size.
OpCost pool_cost(const ir::Node& node, const std::vector<ir::ValueType>& in,
                 const std::vector<ir::ValueType>& out) {
  OpCost c = default_cost(in, out);
  if (out.empty() || !out[0].is_static()) return c;
  double window = 1;
  if (const ir::Attribute* k = node.attribute("kernel_shape"))
    for (int64_t d : k->ints) window *= static_cast<double>(d);
  if (const ir::Attribute* k = node.attribute("pooled_shape");
      k && !in.empty() && in[0].is_static()) {
    // An RoI bin covers about (H / pooled_h) x (W / pooled_w) input elements.
    window = static_cast<double>(in[0].dims[2] * in[0].dims[3]);
    for (int64_t d : k->ints) window /= static_cast<double>(std::max<int64_t>(d, 1));
  }
  double n = 1;
  for (int64_t d : out[0].dims) n *= static_cast<double>(d);
  c.flops = n * window;
  return c;
}

// Every input element is read once.
OpCost global_pool_cost(const ir::Node&, const std::vector<ir::ValueType>& in,
                        const std::vector<ir::ValueType>& out) {
  OpCost c = default_cost(in, out);
  if (in.empty() || !in[0].is_static()) return c;
  double n = 1;
  for (int64_t d : in[0].dims) n *= static_cast<double>(d);
  c.flops = n;
  return c;
}

}  // namespace

void register_pool_schemas(SchemaRegistry& r) {
  for (const char* op : {"MaxPool", "AveragePool", "LpPool"})
    r.add({kOnnxDomain, op, 1, infer_pool, pool_cost});
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"})
    r.add({kOnnxDomain, op, 1, infer_global_pool, global_pool_cost});
  r.add({kOnnxDomain, "MaxUnpool", 9, infer_max_unpool, elementwise_cost(1)});
  r.add({kOnnxDomain, "MaxRoiPool", 1, infer_max_roi_pool, pool_cost});
}

}  // namespace peregrine
