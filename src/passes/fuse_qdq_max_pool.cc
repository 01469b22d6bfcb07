// fuse_qdq_max_pool
//   Matches:  QuantizeLinear(MaxPool(DequantizeLinear(x, s, z)), s, z): the QDQ form of a
//             quantized model's max pool (CNN stems), x 8-bit.
//   Produces: MaxPool(x) writing the QuantizeLinear's output: the pool on the 8-bit values.
//             Dequantization is monotonic (non-decreasing), so it commutes with max, and
//             quantizing a dequantized value with the same parameters gives it back: outputs
//             equal to the unfused graph's. The DequantizeLinear stays for other readers.
//   Preconditions: both nodes' scale and zero point are one-element initializers with equal
//             values and types; MaxPool has no Indices output and its opset takes 8-bit
//             inputs (12+); its output is read only by the QuantizeLinear.
//   Order: with the other QDQ fusions, before fuse_quantize_dequantize.
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"
#include "passes/qdq_util.h"

namespace peregrine::passes {

namespace {

struct Match {
  ir::Node* dq;
  ir::Node* pool;
  ir::Node* q;
  bool dq_has_other_readers;  // then the DequantizeLinear stays
};

std::optional<Match> match(const ir::Graph& g, const GraphIndex& index, ir::Node& pool) {
  if (!is_op(&pool, "MaxPool") || pool.opset < 12 || pool.inputs.empty() ||
      pool.outputs.size() != 1)
    return std::nullopt;
  ir::Node* dq = index.producer(pool.inputs[0]);
  ir::Node* q = index.sole_consumer(pool.outputs[0]);
  if (!is_op(dq, "DequantizeLinear") || !is_op(q, "QuantizeLinear") ||
      q->inputs[0] != pool.outputs[0] || q->outputs.size() != 1)
    return std::nullopt;
  auto dp = qdq_scalar_params(g, *dq);
  auto qp = qdq_scalar_params(g, *q);
  if (!dp || !qp || !dp->same_grid(*qp)) return std::nullopt;
  // The 8-bit input must be of the type the parameters say (a zero point of another type
  // than x would make the DequantizeLinear invalid, and the pool's output type x's).
  const auto it = g.values.find(dq->inputs[0]);
  if (it == g.values.end() || !it->second.type.is_tensor() || it->second.type.dtype != dp->type)
    return std::nullopt;
  const std::string& dequantized = pool.inputs[0];
  const bool others = index.uses(dequantized).size() > 1 || index.is_graph_output(dequantized);
  return Match{dq, &pool, q, others};
}

class FuseQdqMaxPool : public Pass {
 public:
  const char* name() const override { return "fuse_qdq_max_pool"; }
  Expected<bool> run(ir::Graph& g) override {
    auto rewrite = [](ir::Graph& graph, const Match& m) {
      const std::string float_in = m.pool->inputs[0], float_out = m.pool->outputs[0];
      m.pool->inputs[0] = m.dq->inputs[0];
      m.pool->outputs[0] = m.q->outputs[0];
      graph.values.erase(float_out);
      remove_nodes(graph, {m.q});
      // The DequantizeLinear goes with its last reader.
      if (!m.dq_has_other_readers) {
        graph.values.erase(float_in);
        remove_nodes(graph, {m.dq});
      }
    };
    int n = rewrite_each_match(g, match, rewrite);
    count_rewrite(n);
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_qdq_max_pool() { return std::make_unique<FuseQdqMaxPool>(); }

}  // namespace peregrine::passes
