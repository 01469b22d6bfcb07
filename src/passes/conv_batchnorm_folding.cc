// conv_batchnorm_folding
//   Matches:  BatchNormalization(Conv(X, W, B?), scale, bias, mean, var).
//   Produces: Conv(X, W', B') writing the BN output, with per output channel c
//             s = scale[c] / sqrt(var[c] + eps), W'[c] = W[c] * s, B'[c] = (B[c] - mean[c]) * s
//             + bias[c]. No new op; W' and B' are new initializers (W may be shared).
//   Preconditions: float32; W, B and all BN parameters are initializers; the Conv
//             output has the BN as its only reader and is not a graph output; BN is in
//             inference mode (one output wanted, training_mode 0).
#include <cmath>

#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

struct Match {
  ir::Node* conv;
  ir::Node* bn;
  const Tensor* w;
  const Tensor* b;  // may be null
  const Tensor* params[4];  // scale, bias, mean, var
  float epsilon;
};

std::optional<Match> match(const ir::Graph& g, const GraphIndex& index, ir::Node& bn) {
  if (!is_op(&bn, "BatchNormalization") || bn.inputs.size() != 5) return std::nullopt;
  for (size_t i = 1; i < bn.outputs.size(); ++i)
    if (!bn.outputs[i].empty()) return std::nullopt;
  if (const ir::Attribute* t = bn.attribute("training_mode"); t && t->i != 0) return std::nullopt;
  if (const ir::Attribute* s = bn.attribute("spatial"); s && s->i == 0 && bn.opset < 9)
    return std::nullopt;
  ir::Node* conv = index.producer(bn.inputs[0]);
  if (!is_op(conv, "Conv") || index.sole_consumer(conv->outputs[0]) != &bn) return std::nullopt;
  if (!is_float32(g, conv->outputs[0]) || !is_float32(g, bn.outputs[0])) return std::nullopt;
  Match m{conv, &bn, constant_of(g, conv->inputs[1]), nullptr, {}, 1e-5f};
  if (!m.w || m.w->dtype() != DType::kFloat32 || m.w->rank() < 3) return std::nullopt;
  const int64_t channels = m.w->dim(0);
  if (conv->inputs.size() > 2 && !conv->inputs[2].empty()) {
    m.b = constant_of(g, conv->inputs[2]);
    if (!m.b || m.b->dtype() != DType::kFloat32 || m.b->numel() != channels) return std::nullopt;
  }
  for (size_t i = 0; i < 4; ++i) {
    m.params[i] = constant_of(g, bn.inputs[i + 1]);
    if (!m.params[i] || m.params[i]->dtype() != DType::kFloat32 ||
        m.params[i]->numel() != channels)
      return std::nullopt;
  }
  if (const ir::Attribute* e = bn.attribute("epsilon")) m.epsilon = e->f;
  return m;
}

void rewrite(ir::Graph& g, const Match& m) {
  const int64_t channels = m.w->dim(0);
  const int64_t per_channel = m.w->numel() / channels;
  Tensor w = m.w->clone();
  Tensor b = Tensor::zeros(DType::kFloat32, {channels});
  const float* scale = m.params[0]->data<float>();
  const float* bias = m.params[1]->data<float>();
  const float* mean = m.params[2]->data<float>();
  const float* var = m.params[3]->data<float>();
  for (int64_t c = 0; c < channels; ++c) {
    const float s = scale[c] / std::sqrt(var[c] + m.epsilon);
    float* wc = w.data<float>() + c * per_channel;
    for (int64_t k = 0; k < per_channel; ++k) wc[k] *= s;
    const float b0 = m.b ? m.b->data<float>()[c] : 0.0f;
    b.data<float>()[c] = (b0 - mean[c]) * s + bias[c];
  }
  ir::Node& conv = *m.conv;
  conv.inputs.resize(3);
  conv.inputs[1] = add_initializer(g, conv.inputs[1] + "_bn", std::move(w));
  conv.inputs[2] = add_initializer(g, m.bn->outputs[0] + "_bias", std::move(b));
  g.values.erase(conv.outputs[0]);
  conv.outputs[0] = m.bn->outputs[0];
  remove_nodes(g, {m.bn});
}

class ConvBatchNormFolding : public Pass {
 public:
  const char* name() const override { return "conv_batchnorm_folding"; }
  Expected<bool> run(ir::Graph& g) override {
    int n = rewrite_each_match(g, match, rewrite);
    count_rewrite(n);
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_conv_batchnorm_folding() {
  return std::make_unique<ConvBatchNormFolding>();
}

}  // namespace peregrine::passes
