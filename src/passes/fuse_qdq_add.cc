// fuse_qdq_add
//   Matches:  QuantizeLinear(Add(DequantizeLinear(a), DequantizeLinear(b))), optionally with a
//             Relu between Add and QuantizeLinear: a quantized residual sum in QDQ form.
//   Produces: peregrine.QLinearAdd(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp) writing
//             the QuantizeLinear's output (8-bit in, 8-bit out: no float tensor in between).
//   Preconditions: every scale and zero point a per-tensor initializer (float32 scales); a
//             and b of one static shape; the Add's output (and the Relu's) read only by the
//             next node and not graph outputs; a Relu only where quantizing makes it the
//             identity (y's zero point the minimum of its type).
#include "ops/op_schema.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"
#include "passes/qdq_util.h"

namespace peregrine::passes {

namespace {

struct Match {
  ir::Node* dq_a;
  ir::Node* dq_b;
  ir::Node* add;
  ir::Node* relu;  // or nullptr
  ir::Node* q;
};

std::optional<Match> match(const ir::Graph& g, const GraphIndex& index, ir::Node& q) {
  auto produced = quantized_producer(g, index, q);
  if (!produced) return std::nullopt;
  ir::Node* relu = produced->relu;
  ir::Node* add = produced->op;
  if (!is_op(add, "Add") || add->inputs.size() != 2 ||
      index.sole_consumer(add->outputs[0]) != (relu ? relu : &q))
    return std::nullopt;
  ir::Node* dq_a = index.producer(add->inputs[0]);
  ir::Node* dq_b = index.producer(add->inputs[1]);
  if (!is_op(dq_a, "DequantizeLinear") || !is_op(dq_b, "DequantizeLinear") ||
      !qdq_scalar_params(g, *dq_a) || !qdq_scalar_params(g, *dq_b))
    return std::nullopt;
  const ir::Value* a = g.find_value(dq_a->inputs[0]);
  const ir::Value* b = g.find_value(dq_b->inputs[0]);
  if (!a || !b || !a->type.is_static() || !b->type.is_static() || a->type.dims != b->type.dims ||
      !is_8bit(a->type.dtype) || !is_8bit(b->type.dtype))
    return std::nullopt;
  return Match{dq_a, dq_b, add, relu, &q};
}

class FuseQdqAdd : public Pass {
 public:
  const char* name() const override { return "fuse_qdq_add"; }
  Expected<bool> run(ir::Graph& g) override {
    auto rewrite = [](ir::Graph& graph, const Match& m) {
      std::vector<std::string> inputs = {
          m.dq_a->inputs[0], input_or_empty(*m.dq_a, 1), input_or_empty(*m.dq_a, 2),
          m.dq_b->inputs[0], input_or_empty(*m.dq_b, 1), input_or_empty(*m.dq_b, 2),
          input_or_empty(*m.q, 1), input_or_empty(*m.q, 2)};
      replace_with_quantized_op(graph, "QLinearAdd", true, std::move(inputs), m.add, m.relu, m.q);
    };
    int n = rewrite_each_match(g, match, rewrite);
    count_rewrite(n);
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_qdq_add() { return std::make_unique<FuseQdqAdd>(); }

}  // namespace peregrine::passes
