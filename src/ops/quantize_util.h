// Shape rules the quantize family shares between its schemas and its reference
// kernels: MatMul-style broadcasting (MatMulInteger, QLinearMatMul) and Conv
// geometry (ConvInteger, QLinearConv).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/checked_math.h"
#include "ir/attributes.h"
#include "peregrine/tensor.h"

namespace peregrine::quantize_util {

// numpy.matmul's output shape for a and b (rank >= 1); errors are plain messages.
inline Expected<Shape> matmul_shape(const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) return invalid_model("matmul inputs must have rank >= 1");
  Shape a2 = a.size() == 1 ? Shape{1, a[0]} : a;
  Shape b2 = b.size() == 1 ? Shape{b[0], 1} : b;
  int64_t k_a = a2[a2.size() - 1], k_b = b2[b2.size() - 2];
  if (k_a >= 0 && k_b >= 0 && k_a != k_b)
    return invalid_model("inner dimensions differ (" + std::to_string(k_a) + " vs " +
                         std::to_string(k_b) + ")");
  Shape batch_a(a2.begin(), a2.end() - 2), batch_b(b2.begin(), b2.end() - 2);
  size_t rank = std::max(batch_a.size(), batch_b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - batch_a.size() ? 1 : batch_a[i - (rank - batch_a.size())];
    int64_t db = i < rank - batch_b.size() ? 1 : batch_b[i - (rank - batch_b.size())];
    if (da == 1) {
      out[i] = db;
    } else if (db == 1 || da == db) {
      out[i] = da;
    } else if (da == -1 || db == -1) {
      out[i] = da == -1 ? db : da;
    } else {
      return invalid_model("batch dimensions cannot be broadcast");
    }
  }
  if (a.size() > 1) out.push_back(a2[a2.size() - 2]);
  if (b.size() > 1) out.push_back(b2[b2.size() - 1]);
  return out;
}

// Spatial geometry of a convolution: x is [N, C, D1...], w is [M, C/group, k1...].
struct ConvGeometry {
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end;
  int64_t group = 1;
  Shape output;  // full output shape [N, M, O1...]
};

inline Expected<ConvGeometry> conv_geometry(const ir::AttrView& attrs, const Shape& x,
                                            const Shape& w) {
  if (x.size() < 3) return invalid_model("input 'x' must have rank >= 3");
  if (w.size() != x.size()) return invalid_model("input 'w' must have the rank of 'x'");
  const size_t spatial = x.size() - 2;
  ConvGeometry g;
  PG_ASSIGN_OR_RETURN(g.group, attrs.get_int("group", 1));
  PG_ASSIGN_OR_RETURN(g.kernel, attrs.get_ints("kernel_shape", Shape(w.begin() + 2, w.end())));
  PG_ASSIGN_OR_RETURN(g.strides, attrs.get_ints("strides", std::vector<int64_t>(spatial, 1)));
  PG_ASSIGN_OR_RETURN(g.dilations,
                      attrs.get_ints("dilations", std::vector<int64_t>(spatial, 1)));
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                      attrs.get_ints("pads", std::vector<int64_t>(2 * spatial, 0)));
  PG_ASSIGN_OR_RETURN(std::string auto_pad, attrs.get_string("auto_pad", "NOTSET"));
  if (g.kernel.size() != spatial || g.strides.size() != spatial ||
      g.dilations.size() != spatial || pads.size() != 2 * spatial)
    return invalid_model("kernel_shape/strides/dilations/pads do not match the spatial rank " +
                         std::to_string(spatial));
  if (g.group < 1) return invalid_model("attribute 'group' must be >= 1");
  if (x[1] >= 0 && w[1] >= 0 && x[1] != w[1] * g.group)
    return invalid_model("input channels " + std::to_string(x[1]) + " != w channels " +
                         std::to_string(w[1]) + " x group " + std::to_string(g.group));
  if (w[0] >= 0 && w[0] % g.group != 0)
    return invalid_model("output channels are not divisible by group");
  g.output = {x[0], w[0]};
  g.pads_begin.assign(spatial, 0);
  g.pads_end.assign(spatial, 0);
  for (size_t i = 0; i < spatial; ++i) {
    int64_t k = g.kernel[i], s = g.strides[i], d = g.dilations[i], in = x[i + 2];
    if (k < 1 || s < 1 || d < 1) return invalid_model("kernel, strides and dilations must be >= 1");
    if (w[i + 2] >= 0 && w[i + 2] != k) return invalid_model("kernel_shape does not match 'w'");
    if (pads[i] < 0 || pads[i + spatial] < 0) return invalid_model("pads must be >= 0");
    const auto extent = checked_mul(d, k - 1);
    const auto span = extent ? checked_add(*extent, 1) : std::nullopt;
    if (!span) return invalid_model("kernel extent (dilations x (kernel - 1) + 1) overflows");
    if (in < 0) {
      g.output.push_back(-1);
      continue;
    }
    int64_t out;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out = (in + s - 1) / s;
      int64_t total = std::max<int64_t>(0, (out - 1) * s + *span - in);
      int64_t small = total / 2;
      g.pads_begin[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      g.pads_end[i] = total - g.pads_begin[i];
    } else {
      if (auto_pad == "NOTSET") {
        g.pads_begin[i] = pads[i];
        g.pads_end[i] = pads[i + spatial];
      } else if (auto_pad != "VALID") {
        return invalid_model("unknown auto_pad '" + auto_pad + "'");
      }
      auto pad_total = checked_add(g.pads_begin[i], g.pads_end[i]);
      auto padded = pad_total ? checked_add(in, *pad_total) : std::nullopt;
      if (!padded) return invalid_model("pads overflow");
      if (*padded < *span) return invalid_model("kernel is larger than padded input");
      out = (*padded - *span) / s + 1;
    }
    g.output.push_back(out);
  }
  return g;
}

}  // namespace peregrine::quantize_util
