// drop_repeated_fake_quantize
//   Matches:  peregrine.QuantizeDequantize(x, s, z) where x comes, directly or through ops that
//             only move values (Reshape, Transpose, Squeeze, Unsqueeze, Flatten, Identity),
//             from a peregrine.QuantizeDequantize or a DequantizeLinear with the same scale,
//             zero point and type: QDQ models quantize a tensor again after each reshape or
//             transpose of it (BERT's attention heads).
//   Produces: the node's readers read x; the node goes. Exact: x is already on the
//             quantization grid (a dequantized 8-bit value), and rounding a grid value to the
//             grid returns it (|q - z| <= 255, so the float32 division by the scale is within
//             far less than half a step of q - z).
//   Preconditions: one-element scale and zero point initializers on both nodes; the node's
//             output is not a graph output and no subgraph reads it.
//   Order: after fuse_quantize_dequantize, which makes the QuantizeDequantize nodes.
#include <set>

#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"
#include "passes/qdq_util.h"

namespace peregrine::passes {

namespace {

bool is_fake_quantize(const ir::Node* n) {
  return n && n->domain == kPeregrineDomain && n->op_type == "QuantizeDequantize";
}

bool moves_values_only(const ir::Node* n) {
  for (const char* op : {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity"})
    if (is_op(n, op)) return true;
  return false;
}

std::optional<ir::Node*> match(const ir::Graph& g, const GraphIndex& index, ir::Node& n) {
  if (!is_fake_quantize(&n) || n.outputs.size() != 1 || index.is_graph_output(n.outputs[0]) ||
      !index.only_local_uses(n.outputs[0]))
    return std::nullopt;
  auto params = qdq_scalar_params(g, n);
  if (!params) return std::nullopt;
  const ir::Node* source = index.producer(n.inputs[0]);
  while (moves_values_only(source) && !source->inputs.empty())
    source = index.producer(source->inputs[0]);
  if (!is_fake_quantize(source) && !is_op(source, "DequantizeLinear")) return std::nullopt;
  auto before = qdq_scalar_params(g, *source);
  if (!before || !before->same_grid(*params)) return std::nullopt;
  return &n;
}

class DropRepeatedFakeQuantize : public Pass {
 public:
  const char* name() const override { return "drop_repeated_fake_quantize"; }
  Expected<bool> run(ir::Graph& g) override {
    // Every match of one indexing goes at once (BERT has hundreds): dropping a node only sends
    // its readers to its input, a value with the same grid, so the other matches still hold.
    int count = 0;
    for (bool again = true; again;) {
      std::set<const ir::Node*> dead;
      {
        GraphIndex index(g);
        for (auto& node : g.nodes)
          if (auto m = match(g, index, *node)) dead.insert(*m);
      }
      for (const ir::Node* n : dead) {
        replace_uses(g, n->outputs[0], n->inputs[0]);
        g.values.erase(n->outputs[0]);
      }
      remove_nodes(g, dead);
      count += static_cast<int>(dead.size());
      again = !dead.empty();
    }
    count_rewrite(count);
    return count > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_drop_repeated_fake_quantize() {
  return std::make_unique<DropRepeatedFakeQuantize>();
}

}  // namespace peregrine::passes
