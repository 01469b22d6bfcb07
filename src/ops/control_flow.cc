// Schemas of the control-flow ops: If, Loop, Scan and SequenceMap. Their output
// types come from the bodies' declared outputs; shapes that can change between
// iterations or branches are left unknown and fixed at run time.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

ir::ValueType declared_output(const ir::Graph& g, size_t i) {
  if (i >= g.outputs.size()) return {};
  const ir::Value* v = g.find_value(g.outputs[i]);
  return v ? v->type : ir::ValueType{};
}

// Keeps what two types agree on: dims that differ become unknown.
ir::ValueType merge_types(const ir::ValueType& a, const ir::ValueType& b) {
  if (a.kind != b.kind || !a.is_tensor()) return a.kind == ir::ValueType::Kind::kUnknown ? b : a;
  ir::ValueType m = a;
  if (m.dtype == DType::kUndefined) m.dtype = b.dtype;
  if (!a.has_shape || !b.has_shape || a.dims.size() != b.dims.size()) {
    m.has_shape = false;
    m.dims.clear();
    m.dim_names.clear();
    return m;
  }
  for (size_t i = 0; i < m.dims.size(); ++i)
    if (a.dims[i] != b.dims[i]) m.dims[i] = -1;
  return m;
}

// A tensor type with the same dtype and an unknown shape (loop state can change shape).
ir::ValueType loosen(const ir::ValueType& t) {
  if (!t.is_tensor()) return t;
  return ir::ValueType::tensor_unknown_shape(t.dtype);
}

Status require_graph(const InferContext& ctx, const char* name, const ir::Graph** g) {
  *g = ctx.attrs().get_graph(name);
  if (!*g) return ctx.error("graph attribute '" + std::string(name) + "' is missing");
  return Status::ok();
}

Status infer_if(InferContext& ctx) {
  const ir::Graph *then_g, *else_g;
  PG_RETURN_IF_ERROR(require_graph(ctx, "then_branch", &then_g));
  PG_RETURN_IF_ERROR(require_graph(ctx, "else_branch", &else_g));
  if (then_g->outputs.size() != ctx.num_outputs() || else_g->outputs.size() != ctx.num_outputs())
    return ctx.error("then_branch and else_branch must each produce " +
                     std::to_string(ctx.num_outputs()) + " outputs");
  for (size_t i = 0; i < ctx.num_outputs(); ++i)
    ctx.set_output(i, merge_types(declared_output(*then_g, i), declared_output(*else_g, i)));
  return Status::ok();
}

Status infer_loop(InferContext& ctx) {
  const ir::Graph* body;
  PG_RETURN_IF_ERROR(require_graph(ctx, "body", &body));
  if (ctx.num_inputs() < 2) return ctx.error("needs inputs M and cond (either may be empty)");
  size_t carried = ctx.num_inputs() - 2;
  if (body->inputs.size() != carried + 2)
    return ctx.error("body takes " + std::to_string(body->inputs.size()) + " inputs, expected " +
                     std::to_string(carried + 2) + " (iteration, cond, loop-carried values)");
  if (body->outputs.size() < carried + 1)
    return ctx.error("body must produce cond and " + std::to_string(carried) + " loop-carried values");
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (i < carried) {
      ir::ValueType t = ctx.has_input(i + 2) ? ctx.input_type(i + 2) : declared_output(*body, i + 1);
      ctx.set_output(i, loosen(t.kind == ir::ValueType::Kind::kUnknown ? declared_output(*body, i + 1) : t));
    } else {
      ir::ValueType t = declared_output(*body, i + 1);
      ctx.set_output(i, t.is_tensor() ? ir::ValueType::tensor_unknown_shape(t.dtype) : t);
    }
  }
  return Status::ok();
}

Status infer_scan(InferContext& ctx) {
  const ir::Graph* body;
  PG_RETURN_IF_ERROR(require_graph(ctx, "body", &body));
  PG_ASSIGN_OR_RETURN(int64_t num_scan_inputs, ctx.attrs().get_int("num_scan_inputs"));
  size_t first = ctx.opset() < 9 ? 1 : 0;  // opset 8 has sequence_lens first
  if (num_scan_inputs < 1 || static_cast<size_t>(num_scan_inputs) + first > ctx.num_inputs())
    return ctx.error("num_scan_inputs " + std::to_string(num_scan_inputs) + " does not fit the inputs");
  size_t states = ctx.num_inputs() - first - static_cast<size_t>(num_scan_inputs);
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    ir::ValueType t = i < states && ctx.has_input(first + i) ? ctx.input_type(first + i)
                                                             : declared_output(*body, i);
    ctx.set_output(i, loosen(t));
  }
  return Status::ok();
}

Status infer_sequence_map(InferContext& ctx) {
  const ir::Graph* body;
  PG_RETURN_IF_ERROR(require_graph(ctx, "body", &body));
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    ir::ValueType t;
    t.kind = ir::ValueType::Kind::kSequence;
    t.elem = std::make_shared<ir::ValueType>(loosen(declared_output(*body, i)));
    ctx.set_output(i, t);
  }
  return Status::ok();
}

}  // namespace

void register_control_flow_schemas(SchemaRegistry& r) {
  r.add({kOnnxDomain, "If", 1, infer_if, nullptr});
  r.add({kOnnxDomain, "Loop", 1, infer_loop, nullptr});
  r.add({kOnnxDomain, "Scan", 8, infer_scan, nullptr});
  r.add({kOnnxDomain, "SequenceMap", 17, infer_sequence_map, nullptr});
}

}  // namespace peregrine
