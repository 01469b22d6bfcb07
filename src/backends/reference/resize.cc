// Reference kernels of the resize family: Resize, Upsample, GridSample, AffineGrid.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"
#include "core/checked_math.h"
#include "ops/resize_coordinate.h"
#include "ops/resize_util.h"

namespace peregrine {

namespace {

// Stores a double into T: integers round to nearest and saturate.
template <typename T>
T store_as(double v) {
  if constexpr (std::is_integral_v<T>) {
    if (std::isnan(v)) return T{0};
    double r = std::nearbyint(v);
    r = std::clamp(r, static_cast<double>(std::numeric_limits<T>::lowest()),
                   static_cast<double>(std::numeric_limits<T>::max()));
    return static_cast<T>(r);
  } else if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return static_cast<T>(static_cast<float>(v));
  }
}

// ---------------------------------------------------------------------------------------------
// Resize / Upsample

// One input sample contributing to an output position along one axis.
struct Tap {
  int64_t index;
  double weight;
};

struct ResizeSettings {
  std::string mode = "nearest";
  std::string coordinate_mode = "half_pixel";
  std::string nearest_mode = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
  double extrapolation_value = 0.0;
};

// Keys' cubic convolution kernel with parameter a.
double cubic_kernel(double x, double a) {
  x = std::fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

// Taps of output position `x` along an axis of `in_len` inputs resized to `out_len`.
// Returns false when the position lies outside the crop (tf_crop_and_resize).
bool resize_taps(const ResizeSettings& s, int64_t x, int64_t in_len, int64_t out_len,
                 double scale, double roi_start, double roi_end, std::vector<Tap>* taps) {
  taps->clear();
  double x_ori = 0;
  if (!resize_source_coordinate(s.coordinate_mode, x, in_len, out_len, scale, roi_start, roi_end,
                                &x_ori))
    return false;
  // ratio in (0, 1]: the sample point lies in (left, left + 1].
  int64_t left = 0;
  double ratio = 0;
  resize_split_coordinate(x_ori, &left, &ratio);

  // Weights for points left + k, k from `first`.
  std::vector<double> weights;
  int64_t first = 0;
  if (s.mode == "nearest") {
    const bool take_right = resize_nearest_takes_right(s.nearest_mode, ratio, scale);
    weights = {take_right ? 0.0 : 1.0, take_right ? 1.0 : 0.0};
  } else if (s.mode == "linear" && !s.antialias) {
    weights = {1 - ratio, ratio};
  } else if (s.mode == "cubic" && !s.antialias) {
    first = -1;
    for (int k = -1; k <= 2; ++k) weights.push_back(cubic_kernel(k - ratio, s.cubic_a));
  } else {
    // Antialiased filters stretch by 1/scale when downsampling.
    double filter_scale = std::min(scale, 1.0);
    double support = s.mode == "linear" ? 1.0 : 2.0;
    first = static_cast<int64_t>(std::floor(-support / filter_scale) + 1);
    int64_t count = 2 - 2 * first;
    double sum = 0;
    for (int64_t i = 0; i < count; ++i) {
      double arg = filter_scale * (static_cast<double>(first + i) - ratio);
      double w = s.mode == "linear" ? std::clamp(1 - std::fabs(arg), 0.0, 1.0)
                                    : cubic_kernel(arg, s.cubic_a);
      weights.push_back(w);
      sum += w;
    }
    for (double& w : weights) w /= sum;
  }

  double sum = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    int64_t index = left + first + static_cast<int64_t>(i);
    bool outside = index < 0 || index >= in_len;
    double w = (s.exclude_outside && outside) ? 0.0 : weights[i];
    sum += w;
    taps->push_back({std::clamp<int64_t>(index, 0, in_len - 1), w});
  }
  if (s.exclude_outside && sum != 0)
    for (Tap& t : *taps) t.weight /= sum;
  return true;
}

Status read_resize_settings(KernelContext& ctx, ResizeSettings* s) {
  const bool is_upsample = ctx.node().op_type == "Upsample";
  const auto& attrs = ctx.attrs();
  PG_ASSIGN_OR_RETURN(s->mode, attrs.get_string("mode", "nearest"));
  if (s->mode == "bilinear" || s->mode == "trilinear") s->mode = "linear";  // Upsample-7 names
  if (s->mode != "nearest" && s->mode != "linear" && (s->mode != "cubic" || is_upsample ||
                                                      ctx.opset() < 11))
    return ctx.error("mode '" + s->mode + "' is not supported");
  if (is_upsample || ctx.opset() < 11) {
    s->coordinate_mode = "asymmetric";
    s->nearest_mode = "simple";
    return Status::ok();
  }
  PG_ASSIGN_OR_RETURN(s->coordinate_mode,
                      attrs.get_string("coordinate_transformation_mode", "half_pixel"));
  static const char* kModes[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                                 "align_corners", "asymmetric", "tf_crop_and_resize"};
  if (std::none_of(std::begin(kModes), std::end(kModes),
                   [&](const char* m) { return s->coordinate_mode == m; }))
    return ctx.error("coordinate_transformation_mode '" + s->coordinate_mode +
                     "' is not supported");
  PG_ASSIGN_OR_RETURN(s->nearest_mode, attrs.get_string("nearest_mode", "round_prefer_floor"));
  if (s->nearest_mode != "round_prefer_floor" && s->nearest_mode != "round_prefer_ceil" &&
      s->nearest_mode != "floor" && s->nearest_mode != "ceil")
    return ctx.error("nearest_mode '" + s->nearest_mode + "' is not supported");
  PG_ASSIGN_OR_RETURN(float a, attrs.get_float("cubic_coeff_a", -0.75f));
  s->cubic_a = a;
  PG_ASSIGN_OR_RETURN(int64_t exclude, attrs.get_int("exclude_outside", 0));
  s->exclude_outside = exclude != 0;
  PG_ASSIGN_OR_RETURN(int64_t antialias, attrs.get_int("antialias", 0));
  s->antialias = antialias != 0 && ctx.opset() >= 18;
  if (s->antialias && s->mode == "nearest")
    return ctx.error("antialias is not defined for mode 'nearest'");
  PG_ASSIGN_OR_RETURN(float extrapolation, attrs.get_float("extrapolation_value", 0.0f));
  s->extrapolation_value = extrapolation;
  return Status::ok();
}

// Resamples one axis of a row-major buffer `data` of `dims` into `out_len` positions.
void resample_axis(const ResizeSettings& s, std::vector<double>& data, Shape& dims, size_t axis,
                   int64_t out_len, double scale, double roi_start, double roi_end) {
  const int64_t in_len = dims[axis];
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < axis; ++i) outer *= dims[i];
  for (size_t i = axis + 1; i < dims.size(); ++i) inner *= dims[i];
  std::vector<std::vector<Tap>> taps(static_cast<size_t>(out_len));
  std::vector<bool> inside(static_cast<size_t>(out_len));
  for (int64_t x = 0; x < out_len; ++x)
    inside[static_cast<size_t>(x)] = resize_taps(s, x, in_len, out_len, scale, roi_start,
                                                 roi_end, &taps[static_cast<size_t>(x)]);
  std::vector<double> out(static_cast<size_t>(outer * out_len * inner));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t x = 0; x < out_len; ++x) {
      double* dst = out.data() + (o * out_len + x) * inner;  // inner may be 0: out empty
      if (!inside[static_cast<size_t>(x)]) {
        std::fill(dst, dst + inner, s.extrapolation_value);
        continue;
      }
      for (int64_t i = 0; i < inner; ++i) dst[i] = 0;
      for (const Tap& t : taps[static_cast<size_t>(x)]) {
        if (t.weight == 0) continue;
        const double* src = data.data() + (o * in_len + t.index) * inner;
        for (int64_t i = 0; i < inner; ++i) dst[i] += t.weight * src[i];
      }
    }
  }
  data = std::move(out);
  dims[axis] = out_len;
}

Status resize_kernel(KernelContext& ctx) {
  ResizeSettings settings;
  PG_RETURN_IF_ERROR(read_resize_settings(ctx, &settings));
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  ResizePlan plan;
  bool known = false;
  std::string err = plan_resize_node(
      ctx, x.shape(),
      [&](size_t i) -> const Tensor* { return ctx.has_input(i) ? &ctx.input(i) : nullptr; },
      &plan, &known);
  if (!err.empty()) return ctx.error(err);
  if (!known) return ctx.error("'scales' or 'sizes' is missing");

  // Crop box per axis, only used by tf_crop_and_resize.
  std::vector<double> roi_start(static_cast<size_t>(rank), 0.0);
  std::vector<double> roi_end(static_cast<size_t>(rank), 1.0);
  if (settings.coordinate_mode == "tf_crop_and_resize") {
    if (!ctx.has_input(1) || ctx.input(1).numel() == 0)
      return ctx.error("tf_crop_and_resize needs the 'roi' input");
    const Tensor& roi = ctx.input(1);
    std::vector<int64_t> axes;
    if (ctx.opset() >= 18 && ctx.attrs().has("axes")) {
      PG_ASSIGN_OR_RETURN(axes, ctx.attrs().get_ints("axes"));
      for (int64_t& a : axes) a = a < 0 ? a + rank : a;  // validated by the plan
    } else {
      for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
    }
    const int64_t count = static_cast<int64_t>(axes.size());
    if (roi.numel() != 2 * count)
      return ctx.error("'roi' has " + std::to_string(roi.numel()) + " values, expected " +
                       std::to_string(2 * count));
    for (int64_t i = 0; i < count; ++i) {
      roi_start[static_cast<size_t>(axes[static_cast<size_t>(i)])] = roi.get_as_double(i);
      roi_end[static_cast<size_t>(axes[static_cast<size_t>(i)])] = roi.get_as_double(count + i);
    }
  }

  // Intermediate buffers hold up to max(in, out) along every axis.
  int64_t work_elems = 1;
  for (int64_t a = 0; a < rank; ++a) {
    size_t axis = static_cast<size_t>(a);
    auto next = checked_mul(work_elems, std::max(x.dim(a), plan.out_dims[axis]));
    if (!next || *next > kMaxTensorBytes / 8) return ctx.error("the resized tensor is too large");
    work_elems = *next;
  }
  Tensor& y = ctx.output(0);
  return visit_numeric(x.dtype(), [&]<typename T>() {
    const T* src = x.data<T>();
    std::vector<double> data(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i)
      data[static_cast<size_t>(i)] = static_cast<double>(src[i]);
    Shape dims = x.shape();
    // Innermost axis first, like the ONNX reference.
    for (int64_t a = rank - 1; a >= 0; --a) {
      size_t axis = static_cast<size_t>(a);
      bool identity = plan.out_dims[axis] == dims[axis] && plan.scales[axis] == 1.0 &&
                      settings.coordinate_mode != "tf_crop_and_resize";
      if (identity) continue;
      resample_axis(settings, data, dims, axis, plan.out_dims[axis], plan.scales[axis],
                    roi_start[axis], roi_end[axis]);
    }
    T* dst = y.data<T>();
    for (int64_t i = 0; i < y.numel(); ++i) dst[i] = store_as<T>(data[static_cast<size_t>(i)]);
  });
}

// ---------------------------------------------------------------------------------------------
// GridSample

struct GridSampleSettings {
  std::string mode;     // nearest / linear / cubic
  std::string padding;  // zeros / border / reflection
  bool align_corners = false;
};

// Reflects x into [lo, hi] by folding at the borders.
double reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    double dx = lo - x;
    double n = std::floor(dx / range);
    double r = dx - n * range;
    return std::fmod(n, 2.0) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi;
    double n = std::floor(dx / range);
    double r = dx - n * range;
    return std::fmod(n, 2.0) == 0 ? hi - r : lo + r;
  }
  return x;
}

// Maps an integer sample index to an input index per the padding mode; -1 means "zero".
int64_t grid_pixel_index(const GridSampleSettings& s, int64_t i, int64_t len, double lo,
                         double hi) {
  if (s.padding == "zeros") return (i >= 0 && i < len) ? i : -1;
  if (s.padding == "border") return std::clamp<int64_t>(i, 0, len - 1);
  int64_t r = static_cast<int64_t>(reflect(static_cast<double>(i), lo, hi));
  return std::clamp<int64_t>(r, 0, len - 1);
}

Status grid_sample_kernel(KernelContext& ctx) {
  GridSampleSettings s;
  PG_ASSIGN_OR_RETURN(s.mode, ctx.attrs().get_string("mode", ctx.opset() >= 20 ? "linear"
                                                                                : "bilinear"));
  if (s.mode == "bilinear") s.mode = "linear";
  if (s.mode == "bicubic") s.mode = "cubic";
  if (s.mode != "linear" && s.mode != "nearest" && s.mode != "cubic")
    return ctx.error("mode '" + s.mode + "' is not one of linear/nearest/cubic");
  PG_ASSIGN_OR_RETURN(s.padding, ctx.attrs().get_string("padding_mode", "zeros"));
  if (s.padding != "zeros" && s.padding != "border" && s.padding != "reflection")
    return ctx.error("padding_mode '" + s.padding + "' is not one of zeros/border/reflection");
  PG_ASSIGN_OR_RETURN(int64_t align, ctx.attrs().get_int("align_corners", 0));
  s.align_corners = align != 0;

  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  const int64_t spatial = x.rank() - 2;
  if (grid.rank() != x.rank() || grid.dim(grid.rank() - 1) != spatial ||
      grid.dim(0) != x.dim(0))
    return ctx.error("'grid' shape " + shape_to_string(grid.shape()) + " does not match 'X' " +
                     shape_to_string(x.shape()));
  if (s.mode == "cubic" && spatial != 2)
    return ctx.error("cubic mode supports 2-D (4-D input) sampling only");
  Tensor& y = ctx.output(0);
  const int64_t batch = x.dim(0), channels = x.dim(1);
  Shape in_sp(x.shape().begin() + 2, x.shape().end());
  int64_t in_size = 1, out_size = 1;
  for (int64_t d : in_sp) in_size *= d;
  for (int64_t i = 1; i <= spatial; ++i) out_size *= grid.dim(i);
  std::vector<int64_t> in_strides = contiguous_strides(in_sp);
  std::vector<double> lo(static_cast<size_t>(spatial)), hi(static_cast<size_t>(spatial));
  for (size_t d = 0; d < static_cast<size_t>(spatial); ++d) {
    double len = static_cast<double>(in_sp[d]);
    lo[d] = s.align_corners ? 0.0 : -0.5;
    hi[d] = s.align_corners ? len - 1 : len - 0.5;
  }

  if (!dtype_is_float(x.dtype())) return ctx.error("'X' must be a float tensor");
  if (in_size == 0 && y.numel() > 0) return ctx.error("'X' has an empty spatial dim");
  return visit_float(grid.dtype(), [&]<typename G>() {
    const G* g = grid.data<G>();
    (void)visit_float(x.dtype(), [&]<typename T>() {
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      std::vector<std::vector<Tap>> taps(static_cast<size_t>(spatial));
      std::vector<size_t> counter(static_cast<size_t>(spatial));
      for (int64_t n = 0; n < batch; ++n) {
        for (int64_t p = 0; p < out_size; ++p) {
          const G* coords = g + (n * out_size + p) * spatial;
          for (int64_t d = 0; d < spatial; ++d) {
            size_t du = static_cast<size_t>(d);
            int64_t len = in_sp[du];
            // Grid components run innermost-first: (x, y, z) for (W, H, D).
            float nc = static_cast<float>(coords[spatial - 1 - d]);
            float lenf = static_cast<float>(len);
            float c = s.align_corners ? (nc + 1) / 2.0f * (lenf - 1)
                                      : ((nc + 1) * lenf - 1) / 2.0f;
            double cd = std::isnan(c) ? -1e9 : std::clamp(static_cast<double>(c), -1e9, 1e9);
            if (s.mode == "nearest") cd = std::nearbyint(cd);  // ties to even, like PyTorch
            if (cd < lo[du] || cd > hi[du]) {
              if (s.padding == "border") cd = std::clamp(cd, 0.0, static_cast<double>(len - 1));
              else if (s.padding == "reflection") cd = reflect(cd, lo[du], hi[du]);
            }
            cd = static_cast<float>(cd);
            std::vector<Tap>& t = taps[du];
            t.clear();
            if (s.mode == "nearest") {
              t.push_back({static_cast<int64_t>(cd), 1.0});
            } else {
              double base = std::floor(cd);
              double frac = cd - base;
              int64_t i0 = static_cast<int64_t>(base);
              if (s.mode == "linear") {
                t.push_back({i0, 1 - frac});
                t.push_back({i0 + 1, frac});
              } else {
                for (int k = -1; k <= 2; ++k) t.push_back({i0 + k, cubic_kernel(k - frac, -0.75)});
              }
            }
            for (Tap& tap : t) tap.index = grid_pixel_index(s, tap.index, len, lo[du], hi[du]);
          }
          for (int64_t c = 0; c < channels; ++c) {
            const T* plane = src + (n * channels + c) * in_size;
            double acc = 0;
            std::fill(counter.begin(), counter.end(), 0);
            while (true) {
              double w = 1;
              int64_t offset = 0;
              bool zero = false;
              for (size_t d = 0; d < static_cast<size_t>(spatial); ++d) {
                const Tap& tap = taps[d][counter[d]];
                w *= tap.weight;
                if (tap.index < 0) zero = true;
                else offset += tap.index * in_strides[d];
              }
              if (!zero && w != 0) acc += w * static_cast<double>(plane[offset]);
              // Next combination of taps, last axis fastest.
              int64_t d = spatial - 1;
              for (; d >= 0; --d) {
                size_t du = static_cast<size_t>(d);
                if (++counter[du] < taps[du].size()) break;
                counter[du] = 0;
              }
              if (d < 0) break;
            }
            dst[(n * channels + c) * out_size + p] = store_as<T>(acc);
          }
        }
      }
    });
  });
}

// ---------------------------------------------------------------------------------------------
// AffineGrid

Status affine_grid_kernel(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(int64_t align, ctx.attrs().get_int("align_corners", 0));
  const Tensor& theta = ctx.input(0);
  std::vector<int64_t> size = ctx.input(1).to_int64_vector();
  const int64_t spatial = static_cast<int64_t>(size.size()) - 2;
  if (theta.rank() != 3 || theta.dim(0) != size[0] || theta.dim(1) != spatial ||
      theta.dim(2) != spatial + 1)
    return ctx.error("'theta' shape " + shape_to_string(theta.shape()) + " does not match 'size'");
  Shape sp(size.begin() + 2, size.end());
  int64_t points = 1;
  for (int64_t d : sp) points *= d;
  // Normalized base coordinate of index i along an axis of length len.
  auto base = [&](int64_t i, int64_t len) -> double {
    if (align != 0)
      return len > 1 ? -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(len - 1) : -1.0;
    return -1.0 + (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(len);
  };
  Tensor& y = ctx.output(0);
  return visit_float(theta.dtype(), [&]<typename T>() {
    const T* th = theta.data<T>();
    T* dst = y.data<T>();
    std::vector<int64_t> strides = contiguous_strides(sp);
    std::vector<double> homo(static_cast<size_t>(spatial + 1));
    for (int64_t n = 0; n < size[0]; ++n) {
      const T* m = th + n * spatial * (spatial + 1);
      for (int64_t p = 0; p < points; ++p) {
        // homo = (x, y, [z], 1) with x along the last axis.
        for (int64_t d = 0; d < spatial; ++d) {
          int64_t idx = (p / strides[static_cast<size_t>(d)]) % sp[static_cast<size_t>(d)];
          homo[static_cast<size_t>(spatial - 1 - d)] = base(idx, sp[static_cast<size_t>(d)]);
        }
        homo[static_cast<size_t>(spatial)] = 1.0;
        for (int64_t r = 0; r < spatial; ++r) {
          double acc = 0;
          for (int64_t k = 0; k <= spatial; ++k)
            acc += static_cast<double>(m[r * (spatial + 1) + k]) * homo[static_cast<size_t>(k)];
          dst[(n * points + p) * spatial + r] = store_as<T>(acc);
        }
      }
    }
  });
}

}  // namespace

void register_resize_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "Resize", resize_kernel);
  r.add(kOnnxDomain, "Upsample", resize_kernel);
  r.add(kOnnxDomain, "GridSample", grid_sample_kernel);
  r.add(kOnnxDomain, "AffineGrid", affine_grid_kernel);
}

}  // namespace peregrine
