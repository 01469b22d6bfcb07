// fuse_quantize_dequantize
//   Matches:  DequantizeLinear(QuantizeLinear(x, s, z), s, z) where the 8-bit value has no other
//             reader: the "fake quantization" a QDQ model keeps in front of ops that have no
//             integer form (attention products, LayerNorm, Reshape / Transpose, float pools).
//   Produces: peregrine.QuantizeDequantize(x, s, z) writing the DequantizeLinear's output: one
//             pass over float32 instead of a float32 -> 8-bit -> float32 round trip through
//             memory. The same float32 values (the reference kernel runs the two ops).
//   Preconditions: x float32; both nodes' scale and zero point are the same one-element
//             initializers (the same values); the 8-bit value is not a graph output.
//   Order: last of the QDQ passes, so every integer fusion takes its Q / DQ pairs first.
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"
#include "passes/qdq_util.h"

namespace peregrine::passes {

namespace {

struct Match {
  ir::Node* q;
  ir::Node* dq;
};

std::optional<Match> match(const ir::Graph& g, const GraphIndex& index, ir::Node& q) {
  if (!is_op(&q, "QuantizeLinear") || q.outputs.size() != 1 || !is_float32(g, q.inputs[0]))
    return std::nullopt;
  auto qp = qdq_scalar_params(g, q);
  ir::Node* dq = index.sole_consumer(q.outputs[0]);
  if (!qp || !is_op(dq, "DequantizeLinear") || dq->inputs[0] != q.outputs[0]) return std::nullopt;
  auto dp = qdq_scalar_params(g, *dq);
  if (!dp || !dp->same_grid(*qp)) return std::nullopt;
  return Match{&q, dq};
}

class FuseQuantizeDequantize : public Pass {
 public:
  const char* name() const override { return "fuse_quantize_dequantize"; }
  Expected<bool> run(ir::Graph& g) override {
    auto rewrite = [](ir::Graph& graph, const Match& m) {
      std::vector<std::string> inputs = m.q->inputs;
      inputs.resize(std::min<size_t>(inputs.size(), 3));
      const std::string output = m.dq->outputs[0], name = m.q->name;
      graph.values.erase(m.q->outputs[0]);
      remove_nodes(graph, {m.q, m.dq});
      import_peregrine_domain(graph);
      ir::Node* fused = add_node(graph, "QuantizeDequantize", std::move(inputs), {output}, name);
      fused->domain = kPeregrineDomain;
      fused->opset = 1;
    };
    int n = rewrite_each_match(g, match, rewrite);
    count_rewrite(n);
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_quantize_dequantize() {
  return std::make_unique<FuseQuantizeDequantize>();
}

}  // namespace peregrine::passes
