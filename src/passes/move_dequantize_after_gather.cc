// move_dequantize_after_gather
//   Matches:  Gather(DequantizeLinear(T, scale, zp), indices) with T an 8-bit initializer and a
//             per-tensor scale and zero point: a quantized embedding table.
//   Produces: DequantizeLinear(Gather(T, indices), scale, zp): the rows are picked from the
//             8-bit table and only they are dequantized (the same values), instead of the whole
//             table every run (constant folding leaves a table this large alone) or a float32
//             copy four times its size.
//   Preconditions: the scale and zero point are initializers with one element; Gather's
//             output is float32. The original DequantizeLinear stays for other readers (dead
//             code elimination removes it when none are left).
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"
#include "passes/qdq_util.h"

namespace peregrine::passes {

namespace {

struct Match {
  ir::Node* dq;
  ir::Node* gather;
};

std::optional<Match> match(const ir::Graph& g, const GraphIndex& index, ir::Node& gather) {
  if (!is_op(&gather, "Gather") || gather.inputs.size() != 2 || gather.outputs.size() != 1)
    return std::nullopt;
  ir::Node* dq = index.producer(gather.inputs[0]);
  if (!is_op(dq, "DequantizeLinear") || !qdq_scalar_params(g, *dq)) return std::nullopt;
  const Tensor* table = constant_of(g, dq->inputs[0]);
  if (!table || !is_8bit(table->dtype()) || !is_float32(g, gather.outputs[0]))
    return std::nullopt;
  return Match{dq, &gather};
}

class MoveDequantizeAfterGather : public Pass {
 public:
  const char* name() const override { return "move_dequantize_after_gather"; }
  Expected<bool> run(ir::Graph& g) override {
    auto rewrite = [](ir::Graph& graph, const Match& m) {
      const std::string picked = fresh_name(graph, m.gather->outputs[0] + "_quantized");
      ir::Node* gather = add_node(graph, "Gather", {m.dq->inputs[0], m.gather->inputs[1]},
                                  {picked}, m.gather->name);
      gather->attributes = m.gather->attributes;
      std::vector<std::string> dq_inputs = m.dq->inputs;
      dq_inputs[0] = picked;
      ir::Node* dq = add_node(graph, "DequantizeLinear", std::move(dq_inputs),
                              {m.gather->outputs[0]}, m.dq->name + "_after_gather");
      dq->attributes = m.dq->attributes;
      remove_nodes(graph, {m.gather});
    };
    int n = rewrite_each_match(g, match, rewrite);
    count_rewrite(n);
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_move_dequantize_after_gather() {
  return std::make_unique<MoveDequantizeAfterGather>();
}

}  // namespace peregrine::passes
