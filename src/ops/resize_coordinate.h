// Resize's per-axis coordinate math: output index -> source coordinate (ONNX
// coordinate_transformation_mode) and, for mode "nearest", the source index it rounds to.
// Shared by the reference kernel and the CPU nearest kernel so the two cannot disagree.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace peregrine {

// Source coordinate of output position `x` along an axis of `in_len` inputs resized to
// `out_len` by `scale`. Returns false when the position lies outside the crop
// (tf_crop_and_resize; roi_start / roi_end are only read there).
inline bool resize_source_coordinate(const std::string& ctm, int64_t x, int64_t in_len,
                                     int64_t out_len, double scale, double roi_start,
                                     double roi_end, double* x_ori) {
  const double in_f = static_cast<double>(in_len);
  const double out_w = scale * in_f;  // the unrounded output length
  const double xf = static_cast<double>(x);
  if (ctm == "half_pixel") {
    *x_ori = (xf + 0.5) / scale - 0.5;
  } else if (ctm == "half_pixel_symmetric") {
    double adjustment = static_cast<double>(out_len) / out_w;
    double offset = in_f / 2 * (1 - adjustment);
    *x_ori = offset + (xf + 0.5) / scale - 0.5;
  } else if (ctm == "pytorch_half_pixel") {
    *x_ori = out_len > 1 ? (xf + 0.5) / scale - 0.5 : -0.5;
  } else if (ctm == "align_corners") {
    *x_ori = out_w == 1 ? 0.0 : xf * (in_f - 1) / (out_w - 1);
  } else if (ctm == "asymmetric") {
    *x_ori = xf / scale;
  } else {  // tf_crop_and_resize
    double span = (roi_end - roi_start) * (in_f - 1);
    double v = out_w == 1 ? span / 2 : xf * span / (out_w - 1);
    v += roi_start * (in_f - 1);
    *x_ori = v;
    if (!(v >= 0 && v <= in_f - 1)) return false;  // also catches NaN
  }
  return true;
}

// Splits a source coordinate into `left` and `ratio` in (0, 1]: it lies in (left, left + 1].
inline void resize_split_coordinate(double x_ori, int64_t* left, double* ratio) {
  const double floor_x = std::floor(x_ori);
  *ratio = x_ori == floor_x ? 1.0 : x_ori - floor_x;
  *left = static_cast<int64_t>(x_ori == floor_x ? floor_x - 1 : floor_x);
}

// Mode "nearest": whether the sample in (left, left + 1] at `ratio` takes left + 1.
// "simple" is Resize-10 / Upsample: ceil when downsampling.
inline bool resize_nearest_takes_right(const std::string& nearest_mode, double ratio,
                                       double scale) {
  if (ratio == 1.0) return true;
  if (nearest_mode == "round_prefer_floor") return ratio > 0.5;
  if (nearest_mode == "round_prefer_ceil") return ratio >= 0.5;
  if (nearest_mode == "floor") return false;
  if (nearest_mode == "ceil") return true;
  return scale < 1;
}

// Mode "nearest": the (clamped) source index of output position `x`, for any mode but
// tf_crop_and_resize.
inline int64_t resize_nearest_index(const std::string& ctm, const std::string& nearest_mode,
                                    int64_t x, int64_t in_len, int64_t out_len, double scale) {
  double x_ori = 0;
  resize_source_coordinate(ctm, x, in_len, out_len, scale, 0.0, 1.0, &x_ori);
  int64_t left = 0;
  double ratio = 0;
  resize_split_coordinate(x_ori, &left, &ratio);
  const int64_t index = left + (resize_nearest_takes_right(nearest_mode, ratio, scale) ? 1 : 0);
  return std::clamp<int64_t>(index, 0, in_len - 1);
}

}  // namespace peregrine
