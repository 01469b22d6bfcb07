// What the QDQ fusions (fuse_qdq_*) share: reading Q / DQ parameters, int8 weight scales and
// int32 biases, and putting the fused node in place of the float op and its QuantizeLinear.
#pragma once

#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ops/op_schema.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

inline bool is_8bit(DType t) { return t == DType::kUInt8 || t == DType::kInt8; }

// A (De)QuantizeLinear node's scale (a finite positive float32 initializer with one element)
// and zero point (an 8-bit initializer with one element, or absent: uint8 0).
struct QdqScalarParams {
  float scale;
  double zero;
  DType type;
  // Is a Relu before this quantization the identity (the zero point the type's minimum)?
  bool relu_is_identity() const { return zero == (type == DType::kInt8 ? -128.0 : 0.0); }
  // The same quantization grid: equal scale, zero point and type.
  bool same_grid(const QdqScalarParams& o) const {
    return scale == o.scale && zero == o.zero && type == o.type;
  }
};

inline std::optional<QdqScalarParams> qdq_scalar_params(const ir::Graph& g, const ir::Node& n) {
  if (n.inputs.size() < 2) return std::nullopt;
  const Tensor* s = constant_of(g, n.inputs[1]);
  if (!s || s->dtype() != DType::kFloat32 || s->numel() != 1) return std::nullopt;
  QdqScalarParams p{s->data<float>()[0], 0.0, DType::kUInt8};
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
    const Tensor* z = constant_of(g, n.inputs[2]);
    if (!z || z->numel() != 1 || !is_8bit(z->dtype())) return std::nullopt;
    p.zero = z->get_as_double(0);
    p.type = z->dtype();
  }
  if (!(p.scale > 0.0f) || !std::isfinite(p.scale)) return std::nullopt;
  // QuantizeLinear-21's output_dtype: only where it agrees with the zero point's type (else the
  // output type is not the one read above).
  if (const ir::Attribute* t = n.attribute("output_dtype"); t && t->i != 0) {
    const bool zero_given = n.inputs.size() > 2 && !n.inputs[2].empty();
    const int64_t want = p.type == DType::kInt8 ? 3 : 2;  // TensorProto INT8 / UINT8
    if (!zero_given || t->i != want) return std::nullopt;
  }
  return p;
}

// The scale of DequantizeLinear(W) `dq` when W is an int8 initializer with zero zero points and
// its scale (float32) is per tensor or per slice along W's axis `channel_axis`; else nullptr.
inline const Tensor* qdq_int8_weight_scale(const ir::Graph& g, const ir::Node& dq,
                                           int64_t channel_axis) {
  const Tensor* w = dq.inputs.empty() ? nullptr : constant_of(g, dq.inputs[0]);
  const Tensor* scale = dq.inputs.size() > 1 ? constant_of(g, dq.inputs[1]) : nullptr;
  if (!w || w->dtype() != DType::kInt8 || !scale || scale->dtype() != DType::kFloat32)
    return nullptr;
  if (scale->numel() != 1) {
    const ir::Attribute* a = dq.attribute("axis");
    int64_t axis = a ? a->i : 1;
    if (axis < 0) axis += w->rank();
    if (scale->rank() != 1 || axis != channel_axis || scale->numel() != w->dim(channel_axis))
      return nullptr;
  }
  if (dq.inputs.size() > 2 && !dq.inputs[2].empty()) {
    const Tensor* zero = constant_of(g, dq.inputs[2]);
    if (!zero || zero->dtype() != DType::kInt8 || zero->numel() != scale->numel()) return nullptr;
    for (int64_t i = 0; i < zero->numel(); ++i)
      if (zero->data<int8_t>()[i] != 0) return nullptr;
  }
  return scale;
}

// What a QuantizeLinear `q` quantizes: the op producing its input, through a Relu that the
// quantization makes redundant (y's zero point the type's minimum, the Relu read only by q).
// nullopt when q's parameters are not per-tensor constants or a Relu is not redundant.
struct QuantizedProducer {
  ir::Node* op;    // may be nullptr (a graph input)
  ir::Node* relu;  // nullptr: none
};
inline std::optional<QuantizedProducer> quantized_producer(const ir::Graph& g,
                                                           const GraphIndex& index, ir::Node& q) {
  if (!is_op(&q, "QuantizeLinear") || q.outputs.size() != 1) return std::nullopt;
  auto y = qdq_scalar_params(g, q);
  if (!y) return std::nullopt;
  ir::Node* producer = index.producer(q.inputs[0]);
  if (!is_op(producer, "Relu")) return QuantizedProducer{producer, nullptr};
  if (!y->relu_is_identity() || index.sole_consumer(producer->outputs[0]) != &q)
    return std::nullopt;
  return QuantizedProducer{index.producer(producer->inputs[0]), producer};
}

// `bias` as an int32 initializer named after `base`, or "" (an omitted input) when empty.
inline std::string add_int32_bias(ir::Graph& graph, const std::string& base,
                                  const std::vector<int32_t>& bias) {
  if (bias.empty()) return std::string();
  return add_initializer(graph, base + "_bias_int32",
                         Tensor::from_vector<int32_t>(bias, {static_cast<int64_t>(bias.size())}));
}

// Replaces the float op `op` (with `activation` after it, or nullptr) and the QuantizeLinear `q`
// reading it by one node `op_type` writing q's output, in the peregrine domain when asked;
// trailing omitted inputs are dropped, and the replaced nodes' own values are erased.
inline ir::Node* replace_with_quantized_op(ir::Graph& graph, const std::string& op_type,
                                           bool peregrine_domain, std::vector<std::string> inputs,
                                           ir::Node* op, ir::Node* activation, ir::Node* q) {
  while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
  if (peregrine_domain) import_peregrine_domain(graph);
  ir::Node* fused = add_node(graph, op_type, std::move(inputs), {q->outputs[0]}, op->name);
  if (peregrine_domain) {
    fused->domain = kPeregrineDomain;
    fused->opset = 1;
  }
  std::set<const ir::Node*> dead = {op, q};
  graph.values.erase(op->outputs[0]);
  if (activation) {
    graph.values.erase(activation->outputs[0]);
    dead.insert(activation);
  }
  remove_nodes(graph, dead);
  return fused;
}

// Input i of n, or "" past its end (an omitted optional input).
inline std::string input_or_empty(const ir::Node& n, size_t i) {
  return i < n.inputs.size() ? n.inputs[i] : std::string();
}

// A bias `b` of m values (a float32 initializer, or DequantizeLinear of an int32 initializer) as
// int32 in the accumulator's scale: round(b / (x_scale * w_scale[i])); nullopt when it is
// neither or a value does not fit.
inline std::optional<std::vector<int32_t>> qdq_int32_bias(const ir::Graph& g,
                                                          const GraphIndex& index,
                                                          const std::string& b, float x_scale,
                                                          const Tensor& w_scale, int64_t m) {
  std::vector<double> real(static_cast<size_t>(m));
  if (const Tensor* f = constant_of(g, b)) {
    if (f->dtype() != DType::kFloat32 || f->numel() != m) return std::nullopt;
    for (int64_t i = 0; i < m; ++i) real[i] = f->data<float>()[i];
  } else {
    ir::Node* dq = index.producer(b);
    if (!is_op(dq, "DequantizeLinear") || dq->inputs.size() < 2) return std::nullopt;
    const Tensor* q = constant_of(g, dq->inputs[0]);
    const Tensor* s = constant_of(g, dq->inputs[1]);
    const Tensor* z =
        dq->inputs.size() > 2 && !dq->inputs[2].empty() ? constant_of(g, dq->inputs[2]) : nullptr;
    if (!q || q->dtype() != DType::kInt32 || q->numel() != m || !s ||
        s->dtype() != DType::kFloat32 || (s->numel() != 1 && s->numel() != m) ||
        (dq->inputs.size() > 2 && !dq->inputs[2].empty() && (!z || z->numel() != s->numel())))
      return std::nullopt;
    for (int64_t i = 0; i < m; ++i) {
      const int64_t c = s->numel() == 1 ? 0 : i;
      const double zero = z ? z->get_as_double(c) : 0.0;
      real[i] = (q->get_as_double(i) - zero) * static_cast<double>(s->data<float>()[c]);
    }
  }
  std::vector<int32_t> out(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    const double sw = w_scale.data<float>()[w_scale.numel() == 1 ? 0 : i];
    const double v = std::nearbyint(real[i] / (static_cast<double>(x_scale) * sw));
    if (!(std::fabs(v) < 2147483647.0)) return std::nullopt;
    out[i] = static_cast<int32_t>(v);
  }
  return out;
}

}  // namespace peregrine::passes
