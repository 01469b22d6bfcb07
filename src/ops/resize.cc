// Schemas of the resize family: Resize, Upsample, GridSample, AffineGrid.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"
#include "ops/resize_util.h"

namespace peregrine {

namespace {

Status infer_resize(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& x = ctx.input_type(0);
  if (!x.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(x.dtype));
    return Status::ok();
  }
  if (!x.is_static()) {
    ctx.set_output_tensor(0, x.dtype, Shape(x.dims.size(), -1));
    return Status::ok();
  }
  ResizePlan plan;
  bool known = false;
  std::string err = plan_resize_node(
      ctx, x.dims, [&](size_t i) { return ctx.has_input(i) ? ctx.input_value(i) : nullptr; },
      &plan, &known);
  if (!err.empty()) return ctx.error(err);
  if (!known) {
    ctx.set_output_tensor(0, x.dtype, Shape(x.dims.size(), -1));
    return Status::ok();
  }
  ctx.set_output_tensor(0, x.dtype, plan.out_dims);
  return Status::ok();
}

// Y: (N, C, grid spatial dims...); grid: (N, spatial..., rank-2).
Status infer_grid_sample(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 3, 8));
  PG_RETURN_IF_ERROR(require_rank(ctx, 1, 3, 8));
  const ir::ValueType& x = ctx.input_type(0);
  const ir::ValueType& grid = ctx.input_type(1);
  if (!x.has_shape || !grid.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(x.dtype));
    return Status::ok();
  }
  if (x.rank() != grid.rank())
    return ctx.error("'X' has rank " + std::to_string(x.rank()) + " but 'grid' has rank " +
                     std::to_string(grid.rank()));
  if (ctx.opset() < 20 && x.rank() != 4) return ctx.error("GridSample-16 takes 4-D inputs only");
  const int64_t spatial = x.rank() - 2;
  if (grid.dims.back() >= 0 && grid.dims.back() != spatial)
    return ctx.error("'grid' last dim is " + std::to_string(grid.dims.back()) + ", expected " +
                     std::to_string(spatial));
  Shape out = {x.dims[0], x.dims[1]};
  if (out[0] < 0) out[0] = grid.dims[0];
  for (int64_t i = 1; i <= spatial; ++i) out.push_back(grid.dims[static_cast<size_t>(i)]);
  ctx.set_output_tensor(0, x.dtype, out);
  return Status::ok();
}

// theta (N, 2, 3) or (N, 3, 4); size [N, C, (D,) H, W] -> grid (N, (D,) H, W, 2 or 3).
Status infer_affine_grid(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 3, 3));
  PG_RETURN_IF_ERROR(require_rank(ctx, 1, 1, 1));
  DType dtype = ctx.input_type(0).dtype;
  const Tensor* size = ctx.input_value(1);
  if (size == nullptr) {
    const ir::ValueType& st = ctx.input_type(1);
    if (st.is_static() && (st.dims[0] == 4 || st.dims[0] == 5))
      ctx.set_output_tensor(0, dtype, Shape(static_cast<size_t>(st.dims[0]), -1));
    else
      ctx.set_output(0, ir::ValueType::tensor_unknown_shape(dtype));
    return Status::ok();
  }
  std::vector<int64_t> dims = size->to_int64_vector();
  if (dims.size() != 4 && dims.size() != 5)
    return ctx.error("'size' has " + std::to_string(dims.size()) + " values, expected 4 or 5");
  for (int64_t d : dims)
    if (d < 0 || d > (int64_t{1} << 40)) return ctx.error("'size' values must be non-negative");
  Shape out = {dims[0]};
  for (size_t i = 2; i < dims.size(); ++i) out.push_back(dims[i]);
  out.push_back(static_cast<int64_t>(dims.size()) - 2);
  const ir::ValueType& theta = ctx.input_type(0);
  if (theta.has_shape) {
    int64_t spatial = static_cast<int64_t>(dims.size()) - 2;
    if ((theta.dims[1] >= 0 && theta.dims[1] != spatial) ||
        (theta.dims[2] >= 0 && theta.dims[2] != spatial + 1))
      return ctx.error("'theta' shape " + shape_to_string(theta.dims) + " does not match a " +
                       std::to_string(spatial) + "-D 'size'");
    if (theta.dims[0] >= 0 && theta.dims[0] != dims[0])
      return ctx.error("'theta' batch does not match 'size'");
  }
  ctx.set_output_tensor(0, dtype, out);
  return Status::ok();
}

OpCost interpolation_cost(const std::vector<ir::ValueType>& in,
                          const std::vector<ir::ValueType>& out, double flops_per_element) {
  OpCost c = default_cost(in, out);
  if (!out.empty() && out[0].is_static()) {
    double n = 1;
    for (int64_t d : out[0].dims) n *= static_cast<double>(d);
    c.flops = n * flops_per_element;
  }
  return c;
}

}  // namespace

void register_resize_schemas(SchemaRegistry& r) {
  auto resize_cost = [](const ir::Node&, const std::vector<ir::ValueType>& in,
                        const std::vector<ir::ValueType>& out) {
    return interpolation_cost(in, out, 8);
  };
  r.add({kOnnxDomain, "Resize", 10, infer_resize, resize_cost});
  r.add({kOnnxDomain, "Upsample", 7, infer_resize, resize_cost});
  r.add({kOnnxDomain, "GridSample", 16, infer_grid_sample, resize_cost});
  r.add({kOnnxDomain, "AffineGrid", 20, infer_affine_grid,
         [](const ir::Node&, const std::vector<ir::ValueType>& in,
            const std::vector<ir::ValueType>& out) { return interpolation_cost(in, out, 6); }});
}

}  // namespace peregrine
