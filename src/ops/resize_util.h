// Output sizes and per-axis scale factors of Resize / Upsample, shared by the
// schema (static shapes) and the reference kernel (coordinate mapping).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/checked_math.h"
#include "ir/attributes.h"
#include "peregrine/tensor.h"

namespace peregrine {

struct ResizePlan {
  Shape out_dims;
  std::vector<double> scales;  // per axis of the input; 1 for axes not resized
};

// Largest output dim we accept; far beyond any real image, small enough to never overflow.
inline constexpr double kMaxResizeDim = 1e12;

// Fills `plan` from either `scales` or `sizes` (exactly one non-null), given per `axes`
// (already normalized, unique). Returns an error message, or "" on success.
inline std::string plan_resize(const Shape& in_dims, const std::vector<double>* scales,
                               const std::vector<int64_t>* sizes,
                               const std::vector<int64_t>& axes, const std::string& policy,
                               ResizePlan* plan) {
  const size_t rank = in_dims.size();
  const size_t count = axes.size();
  if (scales != nullptr && scales->size() != count)
    return "'scales' has " + std::to_string(scales->size()) + " values, expected " +
           std::to_string(count);
  if (sizes != nullptr && sizes->size() != count)
    return "'sizes' has " + std::to_string(sizes->size()) + " values, expected " +
           std::to_string(count);
  plan->out_dims = in_dims;
  plan->scales.assign(rank, 1.0);
  if (scales != nullptr) {
    for (size_t i = 0; i < count; ++i) {
      double s = (*scales)[i];
      if (!(s > 0) || !std::isfinite(s)) return "'scales' values must be positive and finite";
      size_t axis = static_cast<size_t>(axes[i]);
      double out = std::floor(s * static_cast<double>(in_dims[axis]));
      if (out > kMaxResizeDim) return "output dim is too large";
      plan->scales[axis] = s;
      plan->out_dims[axis] = static_cast<int64_t>(out);
    }
    return "";
  }
  for (size_t i = 0; i < count; ++i) {
    int64_t size = (*sizes)[i];
    if (size < 0 || static_cast<double>(size) > kMaxResizeDim)
      return "'sizes' values must be in [0, 1e12]";
    size_t axis = static_cast<size_t>(axes[i]);
    if (in_dims[axis] == 0) return "cannot resize an axis of size 0 to a given size";
    plan->scales[axis] = static_cast<double>(size) / static_cast<double>(in_dims[axis]);
    plan->out_dims[axis] = size;
  }
  if (policy == "stretch" || count == 0) return "";
  if (policy != "not_larger" && policy != "not_smaller")
    return "keep_aspect_ratio_policy '" + policy + "' is not one of stretch/not_larger/not_smaller";
  double scale = plan->scales[static_cast<size_t>(axes[0])];
  for (int64_t axis : axes) {
    double s = plan->scales[static_cast<size_t>(axis)];
    scale = policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
  }
  for (int64_t axis : axes) {
    size_t a = static_cast<size_t>(axis);
    plan->scales[a] = scale;
    double out = std::floor(scale * static_cast<double>(in_dims[a]) + 0.5);
    if (out > kMaxResizeDim) return "output dim is too large";
    plan->out_dims[a] = static_cast<int64_t>(out);
  }
  return "";
}

// Reads a Resize / Upsample node's scales or sizes (per the op and opset) and plans it.
// `value(i)` returns input i's tensor or nullptr when absent or unknown. Sets *known to
// false (and returns "") when a needed value is not known yet.
template <typename Ctx, typename ValueFn>
std::string plan_resize_node(const Ctx& ctx, const Shape& in_dims, ValueFn value,
                             ResizePlan* plan, bool* known) {
  *known = true;
  const int64_t rank = static_cast<int64_t>(in_dims.size());
  const bool is_upsample = ctx.node().op_type == "Upsample";
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  bool have_scales = false, have_sizes = false;
  auto read_scales = [&](const Tensor* t) {
    if (t == nullptr || t->numel() == 0) return;
    have_scales = true;
    for (int64_t i = 0; i < t->numel(); ++i) scales.push_back(t->get_as_double(i));
  };
  if (is_upsample && ctx.opset() < 9) {
    auto attr = ctx.attrs().get_floats("scales");
    if (!attr.is_ok()) return attr.status().message();
    for (float f : attr.value()) scales.push_back(f);
    have_scales = true;
  } else if (is_upsample || ctx.opset() < 11) {
    if (value(1) == nullptr) { *known = false; return ""; }
    read_scales(value(1));
    have_scales = true;
  } else {
    const Tensor* scales_t = value(2);
    const Tensor* sizes_t = value(3);
    bool scales_listed = ctx.has_input(2), sizes_listed = ctx.has_input(3);
    if ((scales_listed && scales_t == nullptr) || (sizes_listed && sizes_t == nullptr)) {
      *known = false;
      return "";
    }
    read_scales(scales_t);
    if (sizes_t != nullptr && sizes_t->numel() > 0) {
      have_sizes = true;
      sizes = sizes_t->to_int64_vector();
    }
    if (have_scales == have_sizes) return "exactly one of 'scales' and 'sizes' must be given";
  }
  std::vector<int64_t> axes;
  if (!is_upsample && ctx.opset() >= 18 && ctx.attrs().has("axes")) {
    auto attr = ctx.attrs().get_ints("axes");
    if (!attr.is_ok()) return attr.status().message();
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (int64_t a : attr.value()) {
      if (a < -rank || a >= rank) return "'axes' value " + std::to_string(a) + " is out of range";
      if (a < 0) a += rank;
      if (seen[static_cast<size_t>(a)]) return "'axes' has a repeated axis";
      seen[static_cast<size_t>(a)] = true;
      axes.push_back(a);
    }
  } else {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  std::string policy = "stretch";
  if (!is_upsample && ctx.opset() >= 18) {
    auto attr = ctx.attrs().get_string("keep_aspect_ratio_policy", "stretch");
    if (!attr.is_ok()) return attr.status().message();
    policy = attr.value();
  }
  std::string err = plan_resize(in_dims, have_scales ? &scales : nullptr,
                                have_sizes ? &sizes : nullptr, axes, policy, plan);
  if (!err.empty()) return err;
  if (!checked_product(plan->out_dims).has_value() ||
      *checked_product(plan->out_dims) > kMaxTensorBytes)
    return "output shape " + shape_to_string(plan->out_dims) + " is too large";
  return "";
}

}  // namespace peregrine
