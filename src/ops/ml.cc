// Schemas of the ml family (ai.onnx.ml domain): Binarizer, ArrayFeatureExtractor,
// LabelEncoder and TreeEnsemble.
#include <algorithm>
#include <optional>
#include <string>

#include "core/checked_math.h"
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

Status infer_binarizer(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  DType t = ctx.input_type(0).dtype;
  if (!dtype_is_float(t) && !dtype_is_integer(t))
    return ctx.error("input 'X' must be numeric, got " + std::string(dtype_name(t)));
  return infer_same_as_input(ctx);
}

Status infer_array_feature_extractor(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  const ir::ValueType& x = ctx.input_type(0);
  const ir::ValueType& y = ctx.input_type(1);
  if (y.dtype != DType::kInt64) return ctx.error("input 'Y' must be int64");
  if (!x.has_shape || !y.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(x.dtype));
    return Status::ok();
  }
  if (x.rank() < 1) return ctx.error("input 'X' must have rank >= 1");
  int64_t count = -1;  // the number of indices selected (-1: unknown)
  if (std::none_of(y.dims.begin(), y.dims.end(), [](int64_t d) { return d < 0; })) {
    const std::optional<int64_t> product = checked_product(y.dims);
    if (!product) return ctx.error("input 'Y' has more elements than a tensor can hold");
    count = *product;
  }
  Shape out = x.rank() == 1 ? Shape{1} : Shape(x.dims.begin(), x.dims.end() - 1);
  out.push_back(count);
  ctx.set_output_tensor(0, x.dtype, out);
  return Status::ok();
}

// The element type LabelEncoder produces, from which values_* attribute is present.
Expected<DType> label_encoder_output_type(const InferContext& ctx) {
  if (ctx.opset() < 2) {  // ai.onnx.ml LabelEncoder-1: string <-> int64 via classes_strings
    DType in = ctx.input_type(0).dtype;
    if (in == DType::kString) return DType::kInt64;
    if (in == DType::kInt64) return DType::kString;
    return ctx.error("input must be string or int64");
  }
  const ir::AttrView& a = ctx.attrs();
  if (const Tensor* t = a.get_tensor("values_tensor")) return t->dtype();
  if (a.has("values_strings")) return DType::kString;
  if (a.has("values_int64s")) return DType::kInt64;
  if (a.has("values_floats")) return DType::kFloat32;
  return ctx.error("one of values_strings, values_int64s, values_floats or values_tensor is "
                   "required");
}

Status infer_label_encoder(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_ASSIGN_OR_RETURN(DType out, label_encoder_output_type(ctx));
  const ir::ValueType& in = ctx.input_type(0);
  if (in.has_shape) {
    ir::ValueType t = in;
    t.dtype = out;
    ctx.set_output(0, t);
  } else {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(out));
  }
  return Status::ok();
}

Status infer_tree_ensemble(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 2, 2));
  const ir::ValueType& x = ctx.input_type(0);
  if (!dtype_is_float(x.dtype)) return ctx.error("input 'X' must be a float type");
  PG_ASSIGN_OR_RETURN(int64_t n_targets, ctx.attrs().get_int("n_targets"));
  if (n_targets < 1) return ctx.error("attribute 'n_targets' must be >= 1");
  ctx.set_output_tensor(0, x.dtype, {x.has_shape ? x.dims[0] : -1, n_targets});
  return Status::ok();
}

}  // namespace

void register_ml_schemas(SchemaRegistry& r) {
  r.add({kMlDomain, "Binarizer", 1, infer_binarizer, elementwise_cost(1)});
  r.add({kMlDomain, "ArrayFeatureExtractor", 1, infer_array_feature_extractor, nullptr});
  r.add({kMlDomain, "LabelEncoder", 1, infer_label_encoder, elementwise_cost(1)});
  r.add({kMlDomain, "TreeEnsemble", 5, infer_tree_ensemble, nullptr});
}

}  // namespace peregrine
