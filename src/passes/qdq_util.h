// What the QDQ fusions (fuse_qdq_conv, fuse_qdq_add) share: reading a QuantizeLinear /
// DequantizeLinear node's per-tensor parameters.
#pragma once

#include <cmath>
#include <optional>

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

// Input i of n, or "" past its end (an omitted optional input).
inline std::string input_or_empty(const ir::Node& n, size_t i) {
  return i < n.inputs.size() ? n.inputs[i] : std::string();
}

}  // namespace peregrine::passes
