// Schemas of the detection family: RoiAlign, NonMaxSuppression.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

// X (N, C, H, W), rois (num_rois, 4), batch_indices (num_rois) -> (num_rois, C, oh, ow).
Status infer_roi_align(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 4, 4));
  PG_RETURN_IF_ERROR(require_rank(ctx, 1, 2, 2));
  PG_RETURN_IF_ERROR(require_rank(ctx, 2, 1, 1));
  PG_ASSIGN_OR_RETURN(int64_t out_h, ctx.attrs().get_int("output_height", 1));
  PG_ASSIGN_OR_RETURN(int64_t out_w, ctx.attrs().get_int("output_width", 1));
  if (out_h <= 0 || out_w <= 0 || out_h > (int64_t{1} << 30) || out_w > (int64_t{1} << 30))
    return ctx.error("output_height and output_width must be positive");
  const ir::ValueType& x = ctx.input_type(0);
  const ir::ValueType& rois = ctx.input_type(1);
  if (ctx.input_type(1).dtype != x.dtype)
    return ctx.error("'rois' type differs from 'X'");
  int64_t num_rois = rois.has_shape ? rois.dims[0] : -1;
  if (rois.has_shape && rois.dims[1] >= 0 && rois.dims[1] != 4)
    return ctx.error("'rois' must have shape (num_rois, 4)");
  const ir::ValueType& idx = ctx.input_type(2);
  if (idx.has_shape && idx.dims[0] >= 0 && num_rois >= 0 && idx.dims[0] != num_rois)
    return ctx.error("'batch_indices' length differs from the number of rois");
  if (num_rois < 0 && idx.has_shape) num_rois = idx.dims[0];
  int64_t channels = x.has_shape ? x.dims[1] : -1;
  ctx.set_output_tensor(0, x.dtype, {num_rois, channels, out_h, out_w});
  return Status::ok();
}

// Selected (batch, class, box) triples; how many depends on the data.
Status infer_nms(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 3, 3));
  PG_RETURN_IF_ERROR(require_rank(ctx, 1, 3, 3));
  PG_ASSIGN_OR_RETURN(int64_t center, ctx.attrs().get_int("center_point_box", 0));
  if (center != 0 && center != 1) return ctx.error("center_point_box must be 0 or 1");
  ctx.set_output_tensor(0, DType::kInt64, {-1, 3});
  return Status::ok();
}

}  // namespace

void register_detection_schemas(SchemaRegistry& r) {
  r.add({kOnnxDomain, "RoiAlign", 10, infer_roi_align, nullptr});
  r.add({kOnnxDomain, "NonMaxSuppression", 10, infer_nms, nullptr});
}

}  // namespace peregrine
