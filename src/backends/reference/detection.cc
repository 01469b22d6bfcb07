// Reference kernels of the detection family: RoiAlign, NonMaxSuppression.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

namespace {

// Bilinear sample of one point: four positions in the H*W plane and their weights.
struct BilinearSample {
  int64_t pos[4] = {0, 0, 0, 0};
  double weight[4] = {0, 0, 0, 0};
};

BilinearSample bilinear_sample(double y, double x, int64_t height, int64_t width) {
  BilinearSample s;
  const double h = static_cast<double>(height), w = static_cast<double>(width);
  if (y < -1.0 || y > h || x < -1.0 || x > w) return s;  // outside: contributes zero
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x);
  int64_t y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<double>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<double>(x_low);
  } else {
    x_high = x_low + 1;
  }
  double ly = y - static_cast<double>(y_low), lx = x - static_cast<double>(x_low);
  double hy = 1 - ly, hx = 1 - lx;
  s.pos[0] = y_low * width + x_low;
  s.pos[1] = y_low * width + x_high;
  s.pos[2] = y_high * width + x_low;
  s.pos[3] = y_high * width + x_high;
  s.weight[0] = hy * hx;
  s.weight[1] = hy * lx;
  s.weight[2] = ly * hx;
  s.weight[3] = ly * lx;
  return s;
}

Status roi_align_kernel(KernelContext& ctx) {
  const auto& attrs = ctx.attrs();
  PG_ASSIGN_OR_RETURN(std::string mode, attrs.get_string("mode", "avg"));
  if (mode != "avg" && mode != "max") return ctx.error("mode '" + mode + "' is not avg or max");
  std::string ctm = "output_half_pixel";  // RoiAlign-10 behaviour
  if (ctx.opset() >= 16) {
    PG_ASSIGN_OR_RETURN(ctm, attrs.get_string("coordinate_transformation_mode", "half_pixel"));
  }
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return ctx.error("coordinate_transformation_mode '" + ctm + "' is not supported");
  const bool half_pixel = ctm == "half_pixel";
  PG_ASSIGN_OR_RETURN(int64_t sampling_ratio, attrs.get_int("sampling_ratio", 0));
  if (sampling_ratio < 0 || sampling_ratio > 1024)
    return ctx.error("sampling_ratio must be in [0, 1024]");
  PG_ASSIGN_OR_RETURN(float spatial_scale_f, attrs.get_float("spatial_scale", 1.0f));
  const double spatial_scale = spatial_scale_f;

  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  const Tensor& batch_indices = ctx.input(2);
  Tensor& y = ctx.output(0);
  const int64_t batch = x.dim(0), channels = x.dim(1), height = x.dim(2), width = x.dim(3);
  const int64_t num_rois = y.dim(0), out_h = y.dim(2), out_w = y.dim(3);
  if (rois.rank() != 2 || rois.dim(0) != num_rois || rois.dim(1) != 4 ||
      batch_indices.numel() != num_rois)
    return ctx.error("'rois' must be (num_rois, 4) and 'batch_indices' (num_rois)");
  for (int64_t n = 0; n < num_rois; ++n) {
    int64_t b = batch_indices.get_as_int64(n);
    if (b < 0 || b >= batch)
      return ctx.error("batch index " + std::to_string(b) + " is out of range");
  }
  for (int64_t i = 0; i < rois.numel(); ++i)
    if (!std::isfinite(rois.get_as_double(i))) return ctx.error("'rois' has a non-finite value");
  if ((height == 0 || width == 0) && y.numel() > 0) return ctx.error("'X' has an empty plane");

  return visit_float(x.dtype(), [&]<typename T>() {
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    const double offset = half_pixel ? 0.5 : 0.0;
    for (int64_t n = 0; n < num_rois; ++n) {
      const int64_t b = batch_indices.get_as_int64(n);
      double start_w = rois.get_as_double(n * 4 + 0) * spatial_scale - offset;
      double start_h = rois.get_as_double(n * 4 + 1) * spatial_scale - offset;
      double end_w = rois.get_as_double(n * 4 + 2) * spatial_scale - offset;
      double end_h = rois.get_as_double(n * 4 + 3) * spatial_scale - offset;
      double roi_w = end_w - start_w, roi_h = end_h - start_h;
      if (!half_pixel) {  // legacy: force malformed rois to 1x1
        roi_w = std::max(roi_w, 1.0);
        roi_h = std::max(roi_h, 1.0);
      }
      const double bin_h = roi_h / static_cast<double>(out_h);
      const double bin_w = roi_w / static_cast<double>(out_w);
      const int64_t grid_h = sampling_ratio > 0
          ? sampling_ratio : static_cast<int64_t>(std::ceil(std::clamp(bin_h, 0.0, 1e6)));
      const int64_t grid_w = sampling_ratio > 0
          ? sampling_ratio : static_cast<int64_t>(std::ceil(std::clamp(bin_w, 0.0, 1e6)));
      const double count = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
      // The sample points are the same for every channel.
      std::vector<BilinearSample> samples;
      samples.reserve(static_cast<size_t>(out_h * out_w * grid_h * grid_w));
      for (int64_t ph = 0; ph < out_h; ++ph)
        for (int64_t pw = 0; pw < out_w; ++pw)
          for (int64_t iy = 0; iy < grid_h; ++iy) {
            double yy = start_h + static_cast<double>(ph) * bin_h +
                        (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(grid_h);
            for (int64_t ix = 0; ix < grid_w; ++ix) {
              double xx = start_w + static_cast<double>(pw) * bin_w +
                          (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(grid_w);
              samples.push_back(bilinear_sample(yy, xx, height, width));
            }
          }
      for (int64_t c = 0; c < channels; ++c) {
        const T* plane = src + (b * channels + c) * height * width;
        T* out = dst + (n * channels + c) * out_h * out_w;
        size_t k = 0;
        for (int64_t p = 0; p < out_h * out_w; ++p) {
          double acc = 0;
          bool first = true;
          for (int64_t g = 0; g < grid_h * grid_w; ++g, ++k) {
            const BilinearSample& s = samples[k];
            if (mode == "avg") {
              for (int i = 0; i < 4; ++i)
                acc += s.weight[i] * static_cast<double>(plane[s.pos[i]]);
            } else {
              // Max of the weighted corners, as in the ONNX reference and onnxruntime.
              double v = s.weight[0] * static_cast<double>(plane[s.pos[0]]);
              for (int i = 1; i < 4; ++i)
                v = std::max(v, s.weight[i] * static_cast<double>(plane[s.pos[i]]));
              acc = first ? v : std::max(acc, v);
              first = false;
            }
          }
          if (mode == "avg") acc /= count;
          if constexpr (std::is_same_v<T, double>) out[p] = acc;
          else out[p] = static_cast<T>(static_cast<float>(acc));
        }
      }
    }
  });
}

// Corners (x_min, y_min, x_max, y_max) of box i of one batch.
struct Box {
  double x_min, y_min, x_max, y_max;
};

Box read_box(const Tensor& boxes, int64_t offset, bool center_point) {
  double a = boxes.get_as_double(offset), b = boxes.get_as_double(offset + 1);
  double c = boxes.get_as_double(offset + 2), d = boxes.get_as_double(offset + 3);
  if (center_point) return {a - c / 2, b - d / 2, a + c / 2, b + d / 2};
  // [y1, x1, y2, x2], corners may come in either order.
  return {std::min(b, d), std::min(a, c), std::max(b, d), std::max(a, c)};
}

// True when the IoU of the two boxes exceeds the threshold.
bool overlaps_too_much(const Box& p, const Box& q, double iou_threshold) {
  double ix_min = std::max(p.x_min, q.x_min), ix_max = std::min(p.x_max, q.x_max);
  if (ix_max <= ix_min) return false;
  double iy_min = std::max(p.y_min, q.y_min), iy_max = std::min(p.y_max, q.y_max);
  if (iy_max <= iy_min) return false;
  double inter = (ix_max - ix_min) * (iy_max - iy_min);
  double area_p = (p.x_max - p.x_min) * (p.y_max - p.y_min);
  double area_q = (q.x_max - q.x_min) * (q.y_max - q.y_min);
  double uni = area_p + area_q - inter;
  if (inter <= 0 || area_p <= 0 || area_q <= 0 || uni <= 0) return false;
  return inter / uni > iou_threshold;
}

Status nms_kernel(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(int64_t center, ctx.attrs().get_int("center_point_box", 0));
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  if (boxes.rank() != 3 || boxes.dim(2) != 4)
    return ctx.error("'boxes' must have shape (batches, boxes, 4)");
  if (scores.rank() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1))
    return ctx.error("'scores' must have shape (batches, classes, boxes) matching 'boxes'");
  if (!dtype_is_float(boxes.dtype()) || !dtype_is_float(scores.dtype()))
    return ctx.error("'boxes' and 'scores' must be float tensors");
  int64_t max_per_class = 0;
  if (ctx.has_input(2) && ctx.input(2).numel() > 0)
    max_per_class = std::max<int64_t>(ctx.input(2).get_as_int64(0), 0);
  double iou_threshold = 0;
  if (ctx.has_input(3) && ctx.input(3).numel() > 0) iou_threshold = ctx.input(3).get_as_double(0);
  bool use_score_threshold = ctx.has_input(4) && ctx.input(4).numel() > 0;
  double score_threshold = use_score_threshold ? ctx.input(4).get_as_double(0) : 0.0;

  const int64_t num_batches = boxes.dim(0), num_boxes = boxes.dim(1), num_classes = scores.dim(1);
  std::vector<int64_t> selected;  // flattened (batch, class, box) triples
  for (int64_t b = 0; b < num_batches; ++b) {
    std::vector<Box> batch_boxes;
    batch_boxes.reserve(static_cast<size_t>(num_boxes));
    for (int64_t i = 0; i < num_boxes; ++i)
      batch_boxes.push_back(read_box(boxes, (b * num_boxes + i) * 4, center != 0));
    for (int64_t c = 0; c < num_classes; ++c) {
      std::vector<std::pair<double, int64_t>> candidates;  // (score, box)
      for (int64_t i = 0; i < num_boxes; ++i) {
        double s = scores.get_as_double((b * num_classes + c) * num_boxes + i);
        if (!use_score_threshold || s > score_threshold) candidates.push_back({s, i});
      }
      // Highest score first; ties keep the lower box index first.
      std::stable_sort(candidates.begin(), candidates.end(),
                       [](const auto& p, const auto& q) { return p.first > q.first; });
      std::vector<int64_t> kept;
      for (const auto& cand : candidates) {
        if (static_cast<int64_t>(kept.size()) >= max_per_class) break;
        const Box& box = batch_boxes[static_cast<size_t>(cand.second)];
        bool suppressed = std::any_of(kept.begin(), kept.end(), [&](int64_t k) {
          return overlaps_too_much(box, batch_boxes[static_cast<size_t>(k)], iou_threshold);
        });
        if (suppressed) continue;
        kept.push_back(cand.second);
        selected.insert(selected.end(), {b, c, cand.second});
      }
    }
  }
  const int64_t count = static_cast<int64_t>(selected.size() / 3);
  Tensor& out = ctx.allocate_output(0, DType::kInt64, {count, 3});
  std::copy(selected.begin(), selected.end(), out.data<int64_t>());
  return Status::ok();
}

}  // namespace

void register_detection_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "RoiAlign", roi_align_kernel);
  r.add(kOnnxDomain, "NonMaxSuppression", nms_kernel);
}

}  // namespace peregrine
