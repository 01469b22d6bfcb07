// Schemas of the string family: StringConcat, StringSplit, StringNormalizer, RegexFullMatch,
// TfIdfVectorizer.
#include <algorithm>

#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

Status require_string_input(const InferContext& ctx, size_t i) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  DType d = ctx.input_type(i).dtype;
  if (d != DType::kUndefined && d != DType::kString)
    return ctx.error("input '" + ctx.node().inputs[i] + "' must be a string tensor, got " +
                     std::string(dtype_name(d)));
  return Status::ok();
}

Status infer_string_concat(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_string_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_string_input(ctx, 1));
  return infer_broadcast_output(ctx, DType::kString);
}

// Output 0: the input's shape plus one dim (the most substrings of any element);
// output 1: the number of substrings of each element.
Status infer_string_split(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_string_input(ctx, 0));
  PG_ASSIGN_OR_RETURN(int64_t maxsplit, ctx.attrs().get_int("maxsplit", -1));
  (void)maxsplit;
  const ir::ValueType& in = ctx.input_type(0);
  if (!in.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(DType::kString));
    ctx.set_output(1, ir::ValueType::tensor_unknown_shape(DType::kInt64));
    return Status::ok();
  }
  Shape dims = in.dims;
  ctx.set_output_tensor(1, DType::kInt64, dims);
  dims.push_back(-1);
  ctx.set_output_tensor(0, DType::kString, dims);
  return Status::ok();
}

// [C] or [1, C]; stopword removal makes the last dim data-dependent.
Status infer_string_normalizer(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_string_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 1, 2));
  PG_ASSIGN_OR_RETURN(std::string action, ctx.attrs().get_string("case_change_action", "NONE"));
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    return ctx.error("case_change_action '" + action + "' must be NONE, LOWER or UPPER");
  const ir::ValueType& in = ctx.input_type(0);
  if (!in.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(DType::kString));
    return Status::ok();
  }
  if (in.rank() == 2 && in.dims[0] != 1 && in.dims[0] != -1)
    return ctx.error("a rank-2 input must have shape [1, C], got " + shape_to_string(in.dims));
  Shape dims = in.dims;
  dims.back() = -1;
  ctx.set_output_tensor(0, DType::kString, dims);
  return Status::ok();
}

Status infer_regex_full_match(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_string_input(ctx, 0));
  PG_ASSIGN_OR_RETURN(std::string pattern, ctx.attrs().get_string("pattern"));
  (void)pattern;
  const ir::ValueType& in = ctx.input_type(0);
  if (in.has_shape) {
    ctx.set_output_tensor(0, DType::kBool, in.dims);
  } else {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(DType::kBool));
  }
  return Status::ok();
}

Status infer_tfidf(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 0, 2));
  DType d = ctx.input_type(0).dtype;
  if (d != DType::kUndefined && d != DType::kString && d != DType::kInt32 && d != DType::kInt64)
    return ctx.error("input must be string, int32 or int64, got " + std::string(dtype_name(d)));
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> indexes, ctx.attrs().get_ints("ngram_indexes"));
  if (indexes.empty()) return ctx.error("attribute 'ngram_indexes' must not be empty");
  for (int64_t i : indexes)
    if (i < 0 || i > (int64_t{1} << 30))
      return ctx.error("ngram_indexes entry " + std::to_string(i) + " is out of range");
  PG_ASSIGN_OR_RETURN(std::string mode, ctx.attrs().get_string("mode"));
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
    return ctx.error("mode '" + mode + "' must be TF, IDF or TFIDF");
  int64_t output_size = *std::max_element(indexes.begin(), indexes.end()) + 1;
  const ir::ValueType& in = ctx.input_type(0);
  if (!in.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(DType::kFloat32));
  } else if (in.rank() == 2) {
    ctx.set_output_tensor(0, DType::kFloat32, {in.dims[0], output_size});
  } else {
    ctx.set_output_tensor(0, DType::kFloat32, {output_size});
  }
  return Status::ok();
}

}  // namespace

void register_string_schemas(SchemaRegistry& r) {
  r.add({kOnnxDomain, "StringConcat", 20, infer_string_concat, elementwise_cost(1)});
  r.add({kOnnxDomain, "StringSplit", 20, infer_string_split, nullptr});
  r.add({kOnnxDomain, "StringNormalizer", 10, infer_string_normalizer, nullptr});
  r.add({kOnnxDomain, "RegexFullMatch", 20, infer_regex_full_match, nullptr});
  r.add({kOnnxDomain, "TfIdfVectorizer", 9, infer_tfidf, nullptr});
}

}  // namespace peregrine
