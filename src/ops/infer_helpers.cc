#include "ops/infer_helpers.h"

namespace peregrine {

Expected<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == 1) {
      out[i] = db;
    } else if (db == 1) {
      out[i] = da;
    } else if (da == -1 || db == -1) {
      out[i] = da == -1 ? db : da;
    } else if (da == db) {
      out[i] = da;
    } else {
      return invalid_model("shapes " + shape_to_string(a) + " and " + shape_to_string(b) +
                           " cannot be broadcast (dim " + std::to_string(i) + ": " +
                           std::to_string(da) + " vs " + std::to_string(db) + ")");
    }
  }
  return out;
}

Status infer_broadcast_output(InferContext& ctx, DType out_dtype, size_t output) {
  Shape shape;
  bool known = true;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const ir::ValueType& t = ctx.input_type(i);
    if (!t.has_shape) {
      known = false;
      continue;
    }
    auto s = broadcast_shapes(shape, t.dims);
    if (!s.is_ok()) return ctx.error(s.status().message());
    shape = *s;
  }
  if (known) {
    ctx.set_output_tensor(output, out_dtype, shape);
  } else {
    ctx.set_output(output, ir::ValueType::tensor_unknown_shape(out_dtype));
  }
  return Status::ok();
}

Status infer_same_as_input(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

Expected<int64_t> normalize_axis(const InferContext& ctx, int64_t axis, int64_t rank,
                                 const char* what) {
  if (axis < -rank || axis >= rank)
    return ctx.error(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

Status require_tensor_input(const InferContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is required");
  const ir::ValueType& t = ctx.input_type(i);
  if (t.kind != ir::ValueType::Kind::kTensor)
    return ctx.error("input '" + ctx.node().inputs[i] + "' must be a tensor");
  return Status::ok();
}

Status require_rank(const InferContext& ctx, size_t i, int64_t lo, int64_t hi) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  const ir::ValueType& t = ctx.input_type(i);
  if (t.has_shape && (t.rank() < lo || t.rank() > hi)) {
    std::string expected = lo == hi ? std::to_string(lo)
                                    : std::to_string(lo) + ".." + std::to_string(hi);
    return ctx.error("input '" + ctx.node().inputs[i] + "' has rank " + std::to_string(t.rank()) +
                     ", expected " + expected);
  }
  return Status::ok();
}

CostFn elementwise_cost(double flops_per_element) {
  return [flops_per_element](const ir::Node&, const std::vector<ir::ValueType>& in,
                             const std::vector<ir::ValueType>& out) {
    OpCost c = default_cost(in, out);
    if (!out.empty() && out[0].is_static()) {
      double n = 1;
      for (int64_t d : out[0].dims) n *= static_cast<double>(d);
      c.flops = n * flops_per_element;
    }
    return c;
  };
}

}  // namespace peregrine
