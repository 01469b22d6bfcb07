// Schemas of the sequence family: sequence ops (SequenceConstruct, SequenceAt, ...,
// SplitToSequence, ConcatFromSequence) and optionals (Optional, OptionalHasElement,
// OptionalGetElement). SequenceMap lives with the control-flow ops.
#include <memory>

#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

using Kind = ir::ValueType::Kind;

ir::ValueType sequence_of(DType elem) {
  ir::ValueType t;
  t.kind = Kind::kSequence;
  t.elem = std::make_shared<ir::ValueType>(ir::ValueType::tensor_unknown_shape(elem));
  return t;
}

// Input i must be a sequence (or of a type not known yet); returns its element dtype.
Expected<DType> sequence_input(const InferContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is required");
  const ir::ValueType& t = ctx.input_type(i);
  if (t.kind == Kind::kUnknown) return DType::kUndefined;
  if (t.kind != Kind::kSequence)
    return ctx.error("input '" + ctx.node().inputs[i] + "' must be a sequence");
  return t.elem ? t.elem->dtype : DType::kUndefined;
}

// An optional integer scalar input (a position or a split size).
Status require_int_input(const InferContext& ctx, size_t i, const char* what) {
  if (!ctx.has_input(i)) return Status::ok();
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  DType d = ctx.input_type(i).dtype;
  if (d != DType::kUndefined && d != DType::kInt32 && d != DType::kInt64)
    return ctx.error(std::string(what) + " must be int32 or int64, got " +
                     std::string(dtype_name(d)));
  return Status::ok();
}

Status infer_sequence_construct(InferContext& ctx) {
  if (ctx.num_inputs() == 0) return ctx.error("needs at least one input");
  DType elem = DType::kUndefined;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
    DType d = ctx.input_type(i).dtype;
    if (elem != DType::kUndefined && d != DType::kUndefined && d != elem)
      return ctx.error("inputs have different types (" + std::string(dtype_name(elem)) + " and " +
                       std::string(dtype_name(d)) + ")");
    if (d != DType::kUndefined) elem = d;
  }
  ctx.set_output(0, sequence_of(elem));
  return Status::ok();
}

Status infer_sequence_empty(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(int64_t dtype, ctx.attrs().get_int("dtype", 1));
  if (!dtype_is_valid(static_cast<int32_t>(dtype)) || dtype == 0)
    return ctx.error("dtype " + std::to_string(dtype) + " is not a valid type");
  ctx.set_output(0, sequence_of(static_cast<DType>(dtype)));
  return Status::ok();
}

Status infer_sequence_at(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(DType elem, sequence_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  PG_RETURN_IF_ERROR(require_int_input(ctx, 1, "position"));
  ctx.set_output(0, ir::ValueType::tensor_unknown_shape(elem));
  return Status::ok();
}

Status infer_sequence_insert(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(DType elem, sequence_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  PG_RETURN_IF_ERROR(require_int_input(ctx, 2, "position"));
  DType d = ctx.input_type(1).dtype;
  if (elem != DType::kUndefined && d != DType::kUndefined && d != elem)
    return ctx.error("cannot insert a " + std::string(dtype_name(d)) +
                     " tensor into a sequence of " + std::string(dtype_name(elem)));
  ctx.set_output(0, sequence_of(elem != DType::kUndefined ? elem : d));
  return Status::ok();
}

Status infer_sequence_erase(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(DType elem, sequence_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_int_input(ctx, 1, "position"));
  ctx.set_output(0, sequence_of(elem));
  return Status::ok();
}

Status infer_sequence_length(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(DType elem, sequence_input(ctx, 0));
  (void)elem;
  ctx.set_output_tensor(0, DType::kInt64, {});
  return Status::ok();
}

Status infer_split_to_sequence(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_int_input(ctx, 1, "split"));
  const ir::ValueType& in = ctx.input_type(0);
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  if (in.has_shape) {
    if (in.rank() == 0) return ctx.error("input must have rank >= 1");
    PG_ASSIGN_OR_RETURN(int64_t a, normalize_axis(ctx, axis, in.rank()));
    (void)a;
  }
  ctx.set_output(0, sequence_of(in.dtype));
  return Status::ok();
}

Status infer_concat_from_sequence(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(DType elem, sequence_input(ctx, 0));
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis"));
  PG_ASSIGN_OR_RETURN(int64_t new_axis, ctx.attrs().get_int("new_axis", 0));
  if (new_axis != 0 && new_axis != 1) return ctx.error("new_axis must be 0 or 1");
  (void)axis;
  ctx.set_output(0, ir::ValueType::tensor_unknown_shape(elem));
  return Status::ok();
}

// Optional(input) wraps a value; Optional() with a `type` attribute is an empty optional.
Status infer_optional(InferContext& ctx) {
  ir::ValueType out;
  out.kind = Kind::kOptional;
  if (ctx.has_input(0)) {
    const ir::ValueType& in = ctx.input_type(0);
    if (in.kind == Kind::kOptional) return ctx.error("input must not itself be an optional");
    out.elem = std::make_shared<ir::ValueType>(in);
  } else {
    const ir::Attribute* type = ctx.node().attribute("type");
    if (!type || type->type != ir::Attribute::Type::kTypeProto)
      return ctx.error("an Optional without input needs the 'type' attribute");
    out.elem = std::make_shared<ir::ValueType>(type->type_proto);
  }
  ctx.set_output(0, out);
  return Status::ok();
}

Status infer_optional_has_element(InferContext& ctx) {
  if (ctx.num_inputs() > 1) return ctx.error("takes at most one input");
  ctx.set_output_tensor(0, DType::kBool, {});
  return Status::ok();
}

// The element type of an optional; a tensor or sequence input (allowed from opset 18)
// passes through. Earlier opsets are not rejected: at run time a present optional may
// reach here as its bare value.
Status infer_optional_get_element(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("input 0 is required");
  const ir::ValueType& in = ctx.input_type(0);
  if (in.kind == Kind::kOptional) {
    if (in.elem) ctx.set_output(0, *in.elem);
    return Status::ok();
  }
  ctx.set_output(0, in);
  return Status::ok();
}

}  // namespace

void register_sequence_schemas(SchemaRegistry& r) {
  r.add({kOnnxDomain, "SequenceConstruct", 11, infer_sequence_construct, nullptr});
  r.add({kOnnxDomain, "SequenceEmpty", 11, infer_sequence_empty, nullptr});
  r.add({kOnnxDomain, "SequenceAt", 11, infer_sequence_at, nullptr});
  r.add({kOnnxDomain, "SequenceInsert", 11, infer_sequence_insert, nullptr});
  r.add({kOnnxDomain, "SequenceErase", 11, infer_sequence_erase, nullptr});
  r.add({kOnnxDomain, "SequenceLength", 11, infer_sequence_length, nullptr});
  r.add({kOnnxDomain, "SplitToSequence", 11, infer_split_to_sequence, nullptr});
  r.add({kOnnxDomain, "ConcatFromSequence", 11, infer_concat_from_sequence, nullptr});
  r.add({kOnnxDomain, "Optional", 15, infer_optional, nullptr});
  r.add({kOnnxDomain, "OptionalHasElement", 15, infer_optional_has_element, nullptr});
  r.add({kOnnxDomain, "OptionalGetElement", 15, infer_optional_get_element, nullptr});
}

}  // namespace peregrine
