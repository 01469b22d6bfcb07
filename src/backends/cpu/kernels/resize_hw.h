// What the CPU Resize kernels (kernels/resize_nearest.cc, kernels/resize_linear.cc) share: a
// 4-D Resize of the two trailing axes only, planned as the reference plans it (ops/resize_util.h),
// with the coordinate mode of the node. Crops, exclude_outside, antialias, an unknown mode and
// resizing N or C are left to the reference kernel (which also reports the errors).
#pragma once

#include <algorithm>
#include <iterator>
#include <string>

#include "backends/backend.h"
#include "ops/resize_util.h"

namespace peregrine::cpu {

struct ResizeHw {
  std::string ctm = "asymmetric";  // coordinate_transformation_mode (Resize-10: asymmetric)
  ResizePlan plan;
};

// Fills `r` for the node of `ctx` on input `x`; false when the case belongs to the reference.
inline Expected<bool> plan_resize_hw(KernelContext& ctx, const Tensor& x, ResizeHw* r) {
  if (x.rank() != 4 || !ctx.output_type(0).is_static()) return false;
  if (ctx.opset() >= 11) {
    PG_ASSIGN_OR_RETURN(r->ctm,
                        ctx.attrs().get_string("coordinate_transformation_mode", "half_pixel"));
    PG_ASSIGN_OR_RETURN(int64_t exclude, ctx.attrs().get_int("exclude_outside", 0));
    PG_ASSIGN_OR_RETURN(int64_t antialias, ctx.attrs().get_int("antialias", 0));
    static const char* kModes[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                                   "align_corners", "asymmetric"};
    const bool known_ctm = std::any_of(std::begin(kModes), std::end(kModes),
                                       [&](const char* m) { return r->ctm == m; });
    if (!known_ctm || exclude != 0 || antialias != 0) return false;
  }
  bool known = false;
  const std::string err = plan_resize_node(
      ctx, x.shape(),
      [&](size_t i) -> const Tensor* { return ctx.has_input(i) ? &ctx.input(i) : nullptr; },
      &r->plan, &known);
  if (!err.empty() || !known) return false;
  for (size_t a = 0; a < 2; ++a)
    if (r->plan.out_dims[a] != x.dim(static_cast<int64_t>(a)) || r->plan.scales[a] != 1.0)
      return false;
  return r->plan.out_dims == ctx.output_type(0).dims && x.dim(2) > 0 && x.dim(3) > 0;
}

}  // namespace peregrine::cpu
