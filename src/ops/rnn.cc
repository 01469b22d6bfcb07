// Schemas of the rnn family: RNN, GRU, LSTM.
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

// X: (seq, batch, input) or with layout=1 (batch, seq, input).
// Y: (seq, dirs, batch, hidden) / (batch, seq, dirs, hidden); Y_h, Y_c: (dirs, batch, hidden) /
// (batch, dirs, hidden).
Status infer_recurrent(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 3, 3));
  PG_RETURN_IF_ERROR(require_rank(ctx, 1, 3, 3));
  PG_RETURN_IF_ERROR(require_rank(ctx, 2, 3, 3));
  const ir::ValueType& x = ctx.input_type(0);
  if (!dtype_is_float(x.dtype)) return ctx.error("'X' must be a float tensor");
  for (size_t i : {1, 2})
    if (ctx.input_type(i).dtype != x.dtype)
      return ctx.error("input '" + ctx.node().inputs[i] + "' type differs from 'X'");
  PG_ASSIGN_OR_RETURN(std::string direction, ctx.attrs().get_string("direction", "forward"));
  int64_t dirs = 1;
  if (direction == "bidirectional") dirs = 2;
  else if (direction != "forward" && direction != "reverse")
    return ctx.error("direction '" + direction + "' is not forward/reverse/bidirectional");
  int64_t layout = 0;
  if (ctx.opset() >= 14) {
    PG_ASSIGN_OR_RETURN(layout, ctx.attrs().get_int("layout", 0));
    if (layout != 0 && layout != 1) return ctx.error("layout must be 0 or 1");
  }
  int64_t hidden = -1;
  if (ctx.attrs().has("hidden_size")) {
    PG_ASSIGN_OR_RETURN(hidden, ctx.attrs().get_int("hidden_size"));
    if (hidden <= 0 || hidden > (int64_t{1} << 30))
      return ctx.error("hidden_size must be positive");
  } else if (ctx.input_type(2).has_shape) {
    hidden = ctx.input_type(2).dims[2];
  }
  int64_t seq = -1, batch = -1;
  if (x.has_shape) {
    seq = x.dims[layout == 0 ? 0 : 1];
    batch = x.dims[layout == 0 ? 1 : 0];
  }
  Shape y = layout == 0 ? Shape{seq, dirs, batch, hidden} : Shape{batch, seq, dirs, hidden};
  Shape state = layout == 0 ? Shape{dirs, batch, hidden} : Shape{batch, dirs, hidden};
  ctx.set_output_tensor(0, x.dtype, y);
  for (size_t i = 1; i < ctx.num_outputs(); ++i) ctx.set_output_tensor(i, x.dtype, state);
  return Status::ok();
}

}  // namespace

void register_rnn_schemas(SchemaRegistry& r) {
  for (const char* op : {"RNN", "GRU", "LSTM"})
    r.add({kOnnxDomain, op, 1, infer_recurrent, nullptr});
}

}  // namespace peregrine
