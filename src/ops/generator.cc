// Schemas of the generator family: RandomNormal, RandomUniform, RandomNormalLike,
// RandomUniformLike, Multinomial, Bernoulli. Their values are random, so they are
// never folded (see is_deterministic_op); only types and shapes are inferred.
#include <string>
#include <vector>

#include "core/checked_math.h"
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

std::string type_name(DType d) { return std::string(dtype_name(d)); }

// The `dtype` attribute, or `fallback` when absent; must satisfy `allowed`.
Expected<DType> dtype_attr(const InferContext& ctx, DType fallback, bool (*allowed)(DType),
                           const char* allowed_text) {
  if (!ctx.attrs().has("dtype")) return fallback;
  PG_ASSIGN_OR_RETURN(int64_t v, ctx.attrs().get_int("dtype"));
  if (v < 0 || v > kMaxDTypeValue || !dtype_is_valid(static_cast<int32_t>(v)) ||
      !allowed(static_cast<DType>(v)))
    return ctx.error("attribute 'dtype' " + std::to_string(v) + " is not " + allowed_text);
  return static_cast<DType>(v);
}

bool is_float(DType d) { return dtype_is_float(d); }
bool is_multinomial_output(DType d) { return d == DType::kInt32 || d == DType::kInt64; }
bool is_numeric_or_bool(DType d) {
  return dtype_is_float(d) || d == DType::kBool ||
         (dtype_is_integer(d) && dtype_packed_bits(d) == 0);
}

// RandomNormal / RandomUniform: the shape comes from the 'shape' attribute.
Status infer_random(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(DType dtype, dtype_attr(ctx, DType::kFloat32, is_float, "a float type"));
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.attrs().get_ints("shape"));
  for (int64_t d : shape)
    if (d < 0) return ctx.error("attribute 'shape' has a negative dim " + std::to_string(d));
  auto elements = checked_product(shape);
  auto bytes = elements ? checked_mul(*elements, static_cast<int64_t>(dtype_size(dtype)))
                        : std::nullopt;
  if (!bytes || *bytes > kMaxTensorBytes)
    return ctx.error("attribute 'shape' " + shape_to_string(shape) + " is too large");
  ctx.set_output_tensor(0, dtype, shape);
  return Status::ok();
}

// RandomNormalLike / RandomUniformLike: the input's shape; dtype defaults to the input's.
Status infer_random_like(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& x = ctx.input_type(0);
  DType fallback = x.dtype;
  if (!ctx.attrs().has("dtype") && !dtype_is_float(fallback))
    return ctx.error("input type " + type_name(fallback) +
                     " is not a float type and no 'dtype' attribute is given");
  PG_ASSIGN_OR_RETURN(DType dtype, dtype_attr(ctx, fallback, is_float, "a float type"));
  if (x.has_shape) {
    ctx.set_output_tensor(0, dtype, x.dims);
  } else {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(dtype));
  }
  return Status::ok();
}

Status infer_multinomial(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 2, 2));
  const ir::ValueType& x = ctx.input_type(0);
  if (!dtype_is_float(x.dtype))
    return ctx.error("input has type " + type_name(x.dtype) + ", expected a float type");
  PG_ASSIGN_OR_RETURN(DType dtype,
                      dtype_attr(ctx, DType::kInt32, is_multinomial_output, "int32 or int64"));
  PG_ASSIGN_OR_RETURN(int64_t samples, ctx.attrs().get_int("sample_size", 1));
  if (samples < 0)
    return ctx.error("attribute 'sample_size' must be >= 0, got " + std::to_string(samples));
  int64_t batch = x.has_shape ? x.dims[0] : -1;
  ctx.set_output_tensor(0, dtype, {batch, samples});
  return Status::ok();
}

Status infer_bernoulli(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  const ir::ValueType& x = ctx.input_type(0);
  if (!dtype_is_float(x.dtype))
    return ctx.error("input has type " + type_name(x.dtype) + ", expected a float type");
  PG_ASSIGN_OR_RETURN(DType dtype,
                      dtype_attr(ctx, x.dtype, is_numeric_or_bool, "a numeric or bool type"));
  if (x.has_shape) {
    ctx.set_output_tensor(0, dtype, x.dims);
  } else {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(dtype));
  }
  return Status::ok();
}

}  // namespace

void register_generator_schemas(SchemaRegistry& r) {
  r.add({kOnnxDomain, "RandomNormal", 1, infer_random, elementwise_cost(10)});
  r.add({kOnnxDomain, "RandomUniform", 1, infer_random, elementwise_cost(4)});
  r.add({kOnnxDomain, "RandomNormalLike", 1, infer_random_like, elementwise_cost(10)});
  r.add({kOnnxDomain, "RandomUniformLike", 1, infer_random_like, elementwise_cost(4)});
  r.add({kOnnxDomain, "Multinomial", 7, infer_multinomial, elementwise_cost(8)});
  r.add({kOnnxDomain, "Bernoulli", 15, infer_bernoulli, elementwise_cost(4)});
}

}  // namespace peregrine
