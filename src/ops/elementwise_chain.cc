// peregrine.ElementwiseChain: program encoding and schema (see
// ops/elementwise_chain.h).
#include "ops/elementwise_chain.h"

#include "ops/infer_helpers.h"

namespace peregrine {

namespace {

constexpr const char *kNames[] = {"Relu", "Sigmoid", "Tanh", "Exp",       "Neg",       "Abs",
                                  "Sqrt", "Erf",     "Clip", "LeakyRelu", "HardSwish", "Add",
                                  "Sub",  "Mul",     "Div",  "Max",       "Min"};

}  // namespace

const char *chain_op_name(ChainOp op) { return kNames[static_cast<int>(op)]; }

std::optional<ChainOp> chain_op_from_name(const std::string &name) {
  for (size_t i = 0; i < std::size(kNames); ++i)
    if (name == kNames[i]) return static_cast<ChainOp>(i);
  return std::nullopt;
}

Expected<std::vector<ChainStep>> read_chain_program(const ir::Node &node) {
  ir::AttrView attrs(node);
  PG_ASSIGN_OR_RETURN(std::vector<std::string> ops, attrs.get_strings("ops"));
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> operands, attrs.get_ints("operands"));
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> swapped, attrs.get_ints("swapped"));
  PG_ASSIGN_OR_RETURN(std::vector<float> params, attrs.get_floats("params"));
  const size_t n = ops.size();
  auto bad = [&](const std::string &why) {
    return invalid_model(node.describe() + ": ElementwiseChain " + why);
  };
  if (n == 0) return bad("has no steps");
  if (operands.size() != n || swapped.size() != n || params.size() != 2 * n)
    return bad("needs one operands / swapped entry and two params per step");
  std::vector<ChainStep> steps(n);
  for (size_t s = 0; s < n; ++s) {
    auto op = chain_op_from_name(ops[s]);
    if (!op) return bad("has unknown step op '" + ops[s] + "'");
    ChainStep &st = steps[s];
    st.op = *op;
    st.operand = static_cast<int>(operands[s]);
    st.swapped = swapped[s] != 0;
    st.p0 = params[2 * s];
    st.p1 = params[2 * s + 1];
    if (chain_op_is_binary(st.op)) {
      if (st.operand != -1 &&
          (st.operand < 1 || static_cast<size_t>(st.operand) >= node.inputs.size()))
        return bad("step " + std::to_string(s) + " reads input " + std::to_string(st.operand) +
                   " of " + std::to_string(node.inputs.size()));
    } else if (st.operand != -1 || st.swapped) {
      return bad("unary step " + std::to_string(s) + " has an operand");
    }
  }
  return steps;
}

Status infer_elementwise_chain(InferContext &ctx) {
  PG_RETURN_IF_ERROR(read_chain_program(ctx.node()).status());
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
    const ir::ValueType &t = ctx.input_type(i);
    if (t.dtype != DType::kFloat32) return ctx.error("inputs must be float32");
    const ir::ValueType &x0 = ctx.input_type(0);
    if (i > 0 && t.is_static() && x0.is_static() && t.dims != x0.dims)
      return ctx.error("input " + std::to_string(i) + " " + shape_to_string(t.dims) +
                       " is not shaped like input 0 " + shape_to_string(x0.dims));
  }
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

OpCost elementwise_chain_cost(const ir::Node &node, const std::vector<ir::ValueType> &in,
                              const std::vector<ir::ValueType> &out) {
  OpCost c = default_cost(in, out);
  const ir::Attribute *ops = node.attribute("ops");
  if (!out.empty() && out[0].is_static() && ops) {
    double n = 1;
    for (int64_t d : out[0].dims) n *= static_cast<double>(d);
    c.flops = n * static_cast<double>(ops->strings.size());
  }
  return c;
}

}  // namespace peregrine
