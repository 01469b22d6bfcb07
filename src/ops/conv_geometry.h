// Window geometry shared by the conv and pool families: how kernel_shape, strides,
// dilations, pads and auto_pad map input spatial dims to output spatial dims.
// Used both by schemas (inference) and by reference kernels (which re-resolve the
// geometry from the real input shapes so pads from auto_pad are known).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/checked_math.h"
#include "ir/attributes.h"
#include "ir/graph.h"
#include "peregrine/status.h"

namespace peregrine {

// Spatial-only geometry of a windowed op; every vector has one entry per spatial dim
// (pads split into begin and end). Output dims are -1 where the input dim is unknown.
struct WindowGeometry {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads_begin;
  std::vector<int64_t> pads_end;
  std::vector<int64_t> output;

  size_t rank() const { return kernel.size(); }
  int64_t effective_kernel(size_t i) const { return (kernel[i] - 1) * dilations[i] + 1; }
};

inline Status node_error(const ir::Node& node, const std::string& message) {
  return invalid_model(node.describe() + ": " + message);
}

inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

inline std::string ints_to_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Reads an ints attribute that must have `count` entries, each >= min_value.
inline Expected<std::vector<int64_t>> read_window_ints(const ir::Node& node, const char* name,
                                                       size_t count, int64_t fallback,
                                                       int64_t min_value) {
  ir::AttrView attrs(node);
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                      attrs.get_ints(name, std::vector<int64_t>(count, fallback)));
  if (v.size() != count)
    return node_error(node, std::string("attribute '") + name + "' has " +
                                std::to_string(v.size()) + " values, expected " +
                                std::to_string(count));
  for (int64_t x : v)
    if (x < min_value)
      return node_error(node, std::string("attribute '") + name + "' " + ints_to_string(v) +
                                  " has a value below " + std::to_string(min_value));
  return v;
}

// Reads auto_pad; "" counts as NOTSET.
inline Expected<std::string> read_auto_pad(const ir::Node& node) {
  ir::AttrView attrs(node);
  PG_ASSIGN_OR_RETURN(std::string auto_pad, attrs.get_string("auto_pad", "NOTSET"));
  if (auto_pad.empty()) auto_pad = "NOTSET";
  if (auto_pad != "NOTSET" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER" &&
      auto_pad != "VALID")
    return node_error(node, "attribute 'auto_pad' is '" + auto_pad +
                                "', expected NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  return auto_pad;
}

// Reads pads (2 * rank values, >= 0) into begin/end halves.
inline Status read_pads(const ir::Node& node, size_t rank, std::vector<int64_t>& begin,
                        std::vector<int64_t>& end) {
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> pads, read_window_ints(node, "pads", 2 * rank, 0, 0));
  begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(rank));
  end.assign(pads.begin() + static_cast<std::ptrdiff_t>(rank), pads.end());
  return Status::ok();
}

// Resolves a forward window (Conv, pools, DeformConv, Col2Im) for spatial input dims `in`
// (-1 = unknown) and the given kernel. `ceil_mode` rounds the output size up, dropping a
// last window that would start in the end padding. `allow_dilations` is false for ops
// without a dilations attribute in this opset.
inline Expected<WindowGeometry> resolve_window(const ir::Node& node, const Shape& in,
                                               const std::vector<int64_t>& kernel, bool ceil_mode,
                                               bool allow_dilations = true) {
  const size_t rank = kernel.size();
  if (in.size() != rank)
    return node_error(node, "kernel has " + std::to_string(rank) +
                                " spatial dims but the input has " + std::to_string(in.size()));
  WindowGeometry g;
  g.kernel = kernel;
  for (int64_t k : kernel)
    if (k < 1)
      return node_error(node, "kernel shape " + ints_to_string(kernel) + " has a value below 1");
  PG_ASSIGN_OR_RETURN(g.strides, read_window_ints(node, "strides", rank, 1, 1));
  if (allow_dilations) {
    PG_ASSIGN_OR_RETURN(g.dilations, read_window_ints(node, "dilations", rank, 1, 1));
  } else {
    g.dilations.assign(rank, 1);
  }
  PG_ASSIGN_OR_RETURN(std::string auto_pad, read_auto_pad(node));
  if (auto_pad == "NOTSET") {
    PG_RETURN_IF_ERROR(read_pads(node, rank, g.pads_begin, g.pads_end));
  } else {
    g.pads_begin.assign(rank, 0);
    g.pads_end.assign(rank, 0);
  }
  // Bounds keep every later product and sum far from overflow.
  constexpr int64_t kLimit = int64_t{1} << 31;
  for (size_t i = 0; i < rank; ++i) {
    if (g.kernel[i] > kLimit || g.strides[i] > kLimit || g.dilations[i] > kLimit ||
        g.pads_begin[i] > kLimit || g.pads_end[i] > kLimit || in[i] > (int64_t{1} << 40))
      return node_error(node, "window attributes or input dims are too large");
  }
  g.output.assign(rank, -1);
  for (size_t i = 0; i < rank; ++i) {
    if (in[i] < 0) continue;
    const int64_t eff = g.effective_kernel(i), s = g.strides[i];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (in[i] + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + eff - in[i]);
      const int64_t small = total / 2, large = total - small;
      g.pads_begin[i] = auto_pad == "SAME_UPPER" ? small : large;
      g.pads_end[i] = auto_pad == "SAME_UPPER" ? large : small;
      g.output[i] = out;
      continue;
    }
    const int64_t span = in[i] + g.pads_begin[i] + g.pads_end[i] - eff;
    if (span < 0)
      return node_error(node,
                        "spatial dim " + std::to_string(i) + " of size " + std::to_string(in[i]) +
                            " (padded " + std::to_string(in[i] + g.pads_begin[i] + g.pads_end[i]) +
                            ") is smaller than the effective kernel size " + std::to_string(eff));
    int64_t out = span / s + 1;
    if (ceil_mode && span % s != 0) {
      ++out;
      // A last window that starts inside the end padding is dropped.
      if ((out - 1) * s >= in[i] + g.pads_begin[i]) --out;
    }
    g.output[i] = out;
  }
  return g;
}

// ConvTranspose's geometry (defined in ops/conv.cc): output = stride * (in - 1) +
// output_padding + effective kernel - pads, or the output_shape attribute with pads derived
// from it, or in * stride for SAME auto_pad.
Expected<WindowGeometry> resolve_transpose_window(const ir::Node& node, const Shape& in,
                                                  const std::vector<int64_t>& kernel);

}  // namespace peregrine
