// Schemas of the loss family: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
#include <string>

#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

// Input 0 is [N, C, d1..dk], input 1 the targets [N, d1..dk], optional input 2 the weights [C].
// Output 0 is the loss ([N, d1..dk] for reduction 'none', else a scalar); the optional
// output 1 (SoftmaxCrossEntropyLoss's log_prob) has input 0's type.
Status infer_loss(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 2, 64));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  const ir::ValueType& scores = ctx.input_type(0);
  const ir::ValueType& target = ctx.input_type(1);
  if (!dtype_is_float(scores.dtype))
    return ctx.error("input '" + ctx.node().inputs[0] + "' must have a float type");
  if (!dtype_is_integer(target.dtype))
    return ctx.error("input '" + ctx.node().inputs[1] + "' must have an integer type");
  if (ctx.has_input(2)) {
    PG_RETURN_IF_ERROR(require_rank(ctx, 2, 1, 1));
    if (ctx.input_type(2).dtype != scores.dtype)
      return ctx.error("input 'weight' must have the scores' type");
  }
  PG_ASSIGN_OR_RETURN(std::string reduction, ctx.attrs().get_string("reduction", "mean"));
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return ctx.error("attribute 'reduction' is '" + reduction + "', expected none, sum or mean");
  if (scores.has_shape && target.has_shape) {
    bool match = target.rank() + 1 == scores.rank();
    for (int64_t d = 0; match && d < target.rank(); ++d) {
      int64_t t = target.dims[static_cast<size_t>(d)];
      int64_t s = scores.dims[static_cast<size_t>(d == 0 ? 0 : d + 1)];
      if (t >= 0 && s >= 0 && t != s) match = false;
    }
    if (!match)
      return ctx.error("target shape " + shape_to_string(target.dims) +
                       " does not match scores shape " + shape_to_string(scores.dims) +
                       " without its class dim");
  }
  if (reduction != "none") {
    ctx.set_output_tensor(0, scores.dtype, {});
  } else if (scores.has_shape) {
    Shape out = scores.dims;
    out.erase(out.begin() + 1);
    ctx.set_output_tensor(0, scores.dtype, out);
  } else if (target.has_shape) {
    ctx.set_output_tensor(0, scores.dtype, target.dims);
  } else {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(scores.dtype));
  }
  if (ctx.num_outputs() > 1) ctx.set_output(1, scores);
  return Status::ok();
}

}  // namespace

void register_loss_schemas(SchemaRegistry& r) {
  r.add({kOnnxDomain, "NegativeLogLikelihoodLoss", 12, infer_loss, nullptr});
  r.add({kOnnxDomain, "SoftmaxCrossEntropyLoss", 12, infer_loss, nullptr});
}

}  // namespace peregrine
