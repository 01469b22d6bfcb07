// fuse_qdq_matmul
//   Matches:  QuantizeLinear(MatMul(DequantizeLinear(x), DequantizeLinear(w))) and
//             QuantizeLinear(Gemm(DequantizeLinear(x), DequantizeLinear(w), b?)) (alpha = beta
//             = 1, transA = 0): the QDQ form of a quantized linear layer; b as for
//             fuse_qdq_conv (DequantizeLinear of int32, or float32).
//   Produces: peregrine.QGemm(x, x_scale, x_zp, w, w_scale, w_zp, B, y_scale, y_zp) with
//             Gemm's transB, writing the QuantizeLinear's output; B = round(b / (x_scale *
//             w_scale)) as int32.
//   Preconditions: w a 2-D int8 initializer with zero zero points, its scale per tensor or per
//             output column (DequantizeLinear axis 1 for [K, N], 0 for Gemm's transposed
//             [N, K]); x 8-bit with per-tensor parameters and rank >= 2 (MatMul) or 2 (Gemm);
//             y's parameters per tensor; the product's output read only by the
//             QuantizeLinear and not a graph output. Matrix products of two activations (an
//             attention's) do not match: their second operand is not an initializer.
#include "ops/op_schema.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"
#include "passes/qdq_util.h"

namespace peregrine::passes {

namespace {

struct Match {
  ir::Node* dq_x;
  ir::Node* dq_w;
  ir::Node* product;
  ir::Node* q;
  int64_t trans_b = 0;
  std::vector<int32_t> bias;  // empty: no bias
};

int64_t int_attr_or(const ir::Node& n, const char* name, int64_t fallback) {
  const ir::Attribute* a = n.attribute(name);
  return a ? a->i : fallback;
}

std::optional<Match> match(const ir::Graph& g, const GraphIndex& index, ir::Node& q) {
  if (!is_op(&q, "QuantizeLinear") || q.outputs.size() != 1 || !qdq_scalar_params(g, q))
    return std::nullopt;
  ir::Node* p = index.producer(q.inputs[0]);
  const bool gemm = is_op(p, "Gemm");
  if (!(gemm || is_op(p, "MatMul")) || p->inputs.size() < 2 || p->outputs.size() != 1 ||
      index.sole_consumer(p->outputs[0]) != &q)
    return std::nullopt;
  int64_t trans_b = 0;
  if (gemm) {
    const ir::Attribute* alpha = p->attribute("alpha");
    const ir::Attribute* beta = p->attribute("beta");
    if ((alpha && alpha->f != 1.0f) || (beta && beta->f != 1.0f) ||
        int_attr_or(*p, "transA", 0) != 0)
      return std::nullopt;
    trans_b = int_attr_or(*p, "transB", 0);
  }
  ir::Node* dq_x = index.producer(p->inputs[0]);
  ir::Node* dq_w = index.producer(p->inputs[1]);
  if (!is_op(dq_x, "DequantizeLinear") || !is_op(dq_w, "DequantizeLinear")) return std::nullopt;
  auto x = qdq_scalar_params(g, *dq_x);
  const ir::Value* xv = g.find_value(dq_x->inputs[0]);
  if (!x || !xv || !xv->type.has_shape || xv->type.rank() < 2 || (gemm && xv->type.rank() != 2))
    return std::nullopt;
  const Tensor* w = constant_of(g, dq_w->inputs[0]);
  if (!w || w->rank() != 2) return std::nullopt;
  const int64_t n = trans_b ? w->dim(0) : w->dim(1);
  const Tensor* w_scale = qdq_int8_weight_scale(g, *dq_w, trans_b ? 0 : 1);
  if (!w_scale) return std::nullopt;
  Match m{dq_x, dq_w, p, &q, trans_b, {}};
  if (gemm && p->inputs.size() > 2 && !p->inputs[2].empty()) {
    auto bias = qdq_int32_bias(g, index, p->inputs[2], x->scale, *w_scale, n);
    if (!bias) return std::nullopt;
    m.bias = std::move(*bias);
  }
  return m;
}

class FuseQdqMatMul : public Pass {
 public:
  const char* name() const override { return "fuse_qdq_matmul"; }
  Expected<bool> run(ir::Graph& g) override {
    auto rewrite = [](ir::Graph& graph, const Match& m) {
      const std::string bias = add_int32_bias(graph, m.product->name, m.bias);
      std::vector<std::string> inputs = {m.dq_x->inputs[0],
                                         input_or_empty(*m.dq_x, 1),
                                         input_or_empty(*m.dq_x, 2),
                                         m.dq_w->inputs[0],
                                         input_or_empty(*m.dq_w, 1),
                                         input_or_empty(*m.dq_w, 2),
                                         bias,
                                         input_or_empty(*m.q, 1),
                                         input_or_empty(*m.q, 2)};
      const bool trans_b = m.trans_b != 0;
      ir::Node* fused = replace_with_quantized_op(graph, "QGemm", true, std::move(inputs),
                                                  m.product, nullptr, m.q);
      if (trans_b) fused->attributes["transB"] = int_attr("transB", 1);
    };
    int n = rewrite_each_match(g, match, rewrite);
    count_rewrite(n);
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_qdq_matmul() { return std::make_unique<FuseQdqMatMul>(); }

}  // namespace peregrine::passes
