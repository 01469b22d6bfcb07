// What the QDQ fusions (fuse_qdq_conv, fuse_qdq_add) share: reading a QuantizeLinear /
// DequantizeLinear node's per-tensor parameters.
#pragma once

#include <cmath>
#include <optional>
#include <vector>

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
