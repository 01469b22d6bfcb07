// fuse_qdq_conv
//   Matches:  QuantizeLinear(Conv(DequantizeLinear(x), DequantizeLinear(w), b?)), optionally
//             with a Relu between Conv and QuantizeLinear: the QDQ form of a quantized
//             convolution that quantizers (ONNX Runtime's quantize_static, ...) write; b is
//             DequantizeLinear of an int32 initializer or a float32 initializer.
//   Produces: QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B) writing the
//             QuantizeLinear's output, with Conv's attributes; B = round(b / (x_scale *
//             w_scale)) per output channel as int32 (exactly the quantizer's int32 bias when
//             its scale is x_scale * w_scale, as quantizers write it).
//   Preconditions: every scale and zero point an initializer: x's and y's scalars (float32
//             scales), w's scalar or one per output channel along axis 0; x and y 8-bit, w an
//             int8 initializer with zero zero points (symmetric, as quantizers write weights:
//             the integer kernels take only those); the Conv's output (and the Relu's) read only by
//             the next node and not graph outputs; a Relu only where quantizing makes it the
//             identity (y's zero point the minimum of its type). Runs before constant_folding,
//             which would otherwise turn DequantizeLinear(w) into float weights.
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"
#include "passes/qdq_util.h"

namespace peregrine::passes {

namespace {

struct Match {
  ir::Node* dq_x;
  ir::Node* dq_w;
  ir::Node* conv;
  ir::Node* relu;  // or nullptr
  ir::Node* q;
  std::vector<int32_t> bias;  // empty: no bias
};

std::optional<Match> match(const ir::Graph& g, const GraphIndex& index, ir::Node& q) {
  auto produced = quantized_producer(g, index, q);
  if (!produced) return std::nullopt;
  ir::Node* relu = produced->relu;
  ir::Node* conv = produced->op;
  if (!is_op(conv, "Conv") || conv->inputs.size() < 2 || conv->outputs.size() != 1 ||
      index.sole_consumer(conv->outputs[0]) != (relu ? relu : &q))
    return std::nullopt;
  ir::Node* dq_x = index.producer(conv->inputs[0]);
  ir::Node* dq_w = index.producer(conv->inputs[1]);
  if (!is_op(dq_x, "DequantizeLinear") || !is_op(dq_w, "DequantizeLinear")) return std::nullopt;
  auto x = qdq_scalar_params(g, *dq_x);
  if (!x) return std::nullopt;
  // W: int8, its scale per tensor or per output channel (axis 0).
  const Tensor* w = constant_of(g, dq_w->inputs[0]);
  if (!w || w->rank() < 3) return std::nullopt;
  const int64_t m = w->dim(0);
  const Tensor* w_scale = qdq_int8_weight_scale(g, *dq_w, 0);
  if (!w_scale) return std::nullopt;
  Match mt{dq_x, dq_w, conv, relu, &q, {}};
  if (conv->inputs.size() > 2 && !conv->inputs[2].empty()) {
    auto bias = qdq_int32_bias(g, index, conv->inputs[2], x->scale, *w_scale, m);
    if (!bias) return std::nullopt;
    mt.bias = std::move(*bias);
  }
  return mt;
}

class FuseQdqConv : public Pass {
 public:
  const char* name() const override { return "fuse_qdq_conv"; }
  Expected<bool> run(ir::Graph& g) override {
    auto rewrite = [](ir::Graph& graph, const Match& m) {
      auto param = [](const ir::Node* n, size_t i) { return input_or_empty(*n, i); };
      const std::string bias = add_int32_bias(graph, m.conv->name, m.bias);
      std::vector<std::string> inputs = {
          m.dq_x->inputs[0], param(m.dq_x, 1), param(m.dq_x, 2), m.dq_w->inputs[0],
          param(m.dq_w, 1),  param(m.dq_w, 2), param(m.q, 1),    param(m.q, 2), bias};
      auto attributes = m.conv->attributes;
      replace_with_quantized_op(graph, "QLinearConv", false, std::move(inputs), m.conv, m.relu, m.q)
          ->attributes = std::move(attributes);
    };
    int n = rewrite_each_match(g, match, rewrite);
    count_rewrite(n);
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_qdq_conv() { return std::make_unique<FuseQdqConv>(); }

}  // namespace peregrine::passes
