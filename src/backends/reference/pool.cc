// Reference kernels of the pool family: MaxPool, AveragePool, LpPool, the global
// pools, MaxUnpool and MaxRoiPool. Windowed pools list each window's in-bounds input
// elements (row-major, so the first maximum is the one with the smallest index) and
// reduce them.
#include <cmath>
#include <limits>
#include <vector>

#include "backends/reference/conv_util.h"
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"
#include "ops/conv_geometry.h"

namespace peregrine {

namespace {

Shape spatial_of(const Shape& shape) { return Shape(shape.begin() + 2, shape.end()); }

// For each output position of one plane, the flat (row-major, plane-relative) indices of
// the input elements its window covers, padding excluded.
class WindowLister {
 public:
  WindowLister(const Shape& in_dims, const WindowGeometry& g) : in_dims_(in_dims), g_(g) {}

  // Calls fn(output_index, indices) for every output position in row-major order.
  template <typename F>
  void for_each(F&& fn) const {
    const size_t rank = g_.rank();
    for (int64_t d : g_.output)
      if (d == 0) return;
    std::vector<int64_t> out_index(rank, 0);
    std::vector<int64_t> indices, next;
    int64_t out_flat = 0;
    do {
      indices.assign(1, 0);
      for (size_t d = 0; d < rank; ++d) {
        const int64_t start = out_index[d] * g_.strides[d] - g_.pads_begin[d];
        next.clear();
        for (int64_t base : indices) {
          for (int64_t k = 0; k < g_.kernel[d]; ++k) {
            const int64_t pos = start + k * g_.dilations[d];
            if (pos >= 0 && pos < in_dims_[d]) next.push_back(base * in_dims_[d] + pos);
          }
        }
        indices.swap(next);
      }
      fn(out_flat++, indices);
    } while (next_index(out_index, g_.output));
  }

 private:
  Shape in_dims_;
  const WindowGeometry& g_;
};

Expected<WindowGeometry> pool_geometry(const KernelContext& ctx, const Tensor& x) {
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, ctx.attrs().get_ints("kernel_shape"));
  PG_ASSIGN_OR_RETURN(int64_t ceil_mode, ctx.attrs().get_int("ceil_mode", 0));
  if (x.rank() != static_cast<int64_t>(kernel.size()) + 2)
    return ctx.error("input rank " + std::to_string(x.rank()) + " does not match kernel_shape");
  return resolve_window(ctx.node(), spatial_of(x.shape()), kernel, ceil_mode != 0);
}

// Row-major plane index -> column-major plane index (MaxPool storage_order = 1).
int64_t column_major_index(int64_t row_major, const Shape& dims) {
  std::vector<int64_t> coords(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    coords[d] = row_major % dims[d];
    row_major /= dims[d];
  }
  int64_t index = 0;
  for (size_t d = dims.size(); d-- > 0;) index = index * dims[d] + coords[d];
  return index;
}

Status max_pool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  PG_ASSIGN_OR_RETURN(WindowGeometry g, pool_geometry(ctx, x));
  PG_ASSIGN_OR_RETURN(int64_t storage_order, ctx.attrs().get_int("storage_order", 0));
  Tensor& y = ctx.output(0);
  Tensor* indices = ctx.wants_output(1) ? &ctx.output(1) : nullptr;
  const Shape in_dims = spatial_of(x.shape());
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t in_size = product_of(in_dims), out_size = product_of(g.output);
  WindowLister lister(in_dims, g);
  return visit_numeric(x.dtype(), [&]<typename T>() {
    using A = AccumulatorOf<T>;
    for (int64_t plane = 0; plane < planes; ++plane) {
      const T* src = x.data<T>() + plane * in_size;
      T* dst = y.data<T>() + plane * out_size;
      int64_t* idx = indices ? indices->data<int64_t>() + plane * out_size : nullptr;
      lister.for_each([&](int64_t o, const std::vector<int64_t>& window) {
        int64_t best = window.empty() ? -1 : window[0];
        for (int64_t i : window)
          if (static_cast<A>(src[i]) > static_cast<A>(src[best])) best = i;
        dst[o] = best < 0 ? T(0) : src[best];
        if (idx) {
          const int64_t spatial = best < 0        ? 0
                                  : storage_order ? column_major_index(best, in_dims)
                                                  : best;
          idx[o] = plane * in_size + spatial;
        }
      });
    }
  });
}

Status average_pool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  PG_ASSIGN_OR_RETURN(WindowGeometry g, pool_geometry(ctx, x));
  PG_ASSIGN_OR_RETURN(int64_t count_include_pad, ctx.attrs().get_int("count_include_pad", 0));
  Tensor& y = ctx.output(0);
  const Shape in_dims = spatial_of(x.shape());
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t in_size = product_of(in_dims), out_size = product_of(g.output);
  // With count_include_pad the divisor counts the window's taps inside the input and its
  // explicit (or auto_pad) padding, the padding as zeros; taps past the end padding, which
  // only ceil_mode's last window reaches, do not count (onnx's reference, PyTorch).
  // padded_taps[o]: that count for output position o (row-major).
  std::vector<int64_t> padded_taps;
  if (count_include_pad) {
    const size_t rank = g.rank();
    std::vector<std::vector<int64_t>> per_dim(rank);  // taps inside, per output index
    for (size_t d = 0; d < rank; ++d)
      for (int64_t o = 0; o < g.output[d]; ++o) {
        const int64_t start = o * g.strides[d] - g.pads_begin[d];
        int64_t taps = 0;
        for (int64_t k = 0; k < g.kernel[d]; ++k)
          taps += start + k * g.dilations[d] < in_dims[d] + g.pads_end[d];
        per_dim[d].push_back(taps);
      }
    padded_taps.assign(static_cast<size_t>(out_size), 1);
    std::vector<int64_t> index(rank, 0);
    for (int64_t o = 0; o < out_size; ++o) {
      for (size_t d = 0; d < rank; ++d)
        padded_taps[static_cast<size_t>(o)] *= per_dim[d][static_cast<size_t>(index[d])];
      next_index(index, g.output);
    }
  }
  WindowLister lister(in_dims, g);
  return visit_float(x.dtype(), [&]<typename T>() {
    using A = AccumulatorOf<T>;
    for (int64_t plane = 0; plane < planes; ++plane) {
      const T* src = x.data<T>() + plane * in_size;
      T* dst = y.data<T>() + plane * out_size;
      lister.for_each([&](int64_t o, const std::vector<int64_t>& window) {
        A sum = 0;
        for (int64_t i : window) sum += static_cast<A>(src[i]);
        const int64_t count = count_include_pad ? padded_taps[static_cast<size_t>(o)]
                                                : static_cast<int64_t>(window.size());
        dst[o] = static_cast<T>(count > 0 ? sum / static_cast<A>(count) : A(0));
      });
    }
  });
}

// LpPool's p: an int from opset 2, a float in opset 1.
Expected<double> read_p(const KernelContext& ctx) {
  const ir::Attribute* attr = ctx.node().attribute("p");
  double p = 2;
  if (attr) p = attr->type == ir::Attribute::Type::kFloat ? attr->f : static_cast<double>(attr->i);
  if (!(p > 0)) return ctx.error("attribute 'p' must be positive");
  return p;
}

// (sum |x|^p)^(1/p), in double for accuracy.
template <typename T>
T lp_norm(const T* src, const int64_t* indices, int64_t count, int64_t stride, double p) {
  double sum = 0;
  for (int64_t j = 0; j < count; ++j) {
    const double v = std::fabs(static_cast<double>(src[indices ? indices[j] : j * stride]));
    sum += p == 2 ? v * v : p == 1 ? v : std::pow(v, p);
  }
  return static_cast<T>(p == 2 ? std::sqrt(sum) : p == 1 ? sum : std::pow(sum, 1.0 / p));
}

Status lp_pool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  PG_ASSIGN_OR_RETURN(WindowGeometry g, pool_geometry(ctx, x));
  PG_ASSIGN_OR_RETURN(double p, read_p(ctx));
  Tensor& y = ctx.output(0);
  const Shape in_dims = spatial_of(x.shape());
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t in_size = product_of(in_dims), out_size = product_of(g.output);
  WindowLister lister(in_dims, g);
  return visit_float(x.dtype(), [&]<typename T>() {
    for (int64_t plane = 0; plane < planes; ++plane) {
      const T* src = x.data<T>() + plane * in_size;
      T* dst = y.data<T>() + plane * out_size;
      lister.for_each([&](int64_t o, const std::vector<int64_t>& window) {
        dst[o] = lp_norm(src, window.data(), static_cast<int64_t>(window.size()), 1, p);
      });
    }
  });
}

// Global pools: one value per (n, c) plane.
template <typename Reduce>
Status global_pool(KernelContext& ctx, Reduce reduce) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t size = product_of(spatial_of(x.shape()));
  return visit_float(x.dtype(), [&]<typename T>() {
    for (int64_t plane = 0; plane < planes; ++plane)
      y.data<T>()[plane] = reduce(x.data<T>() + plane * size, size);
  });
}

Status global_average_pool_kernel(KernelContext& ctx) {
  return global_pool(ctx, []<typename T>(const T* src, int64_t n) {
    using A = AccumulatorOf<T>;
    A sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<A>(src[i]);
    return static_cast<T>(n > 0 ? sum / static_cast<A>(n) : A(0));
  });
}

Status global_max_pool_kernel(KernelContext& ctx) {
  return global_pool(ctx, []<typename T>(const T* src, int64_t n) {
    using A = AccumulatorOf<T>;
    if (n == 0) return T(0);
    A best = static_cast<A>(src[0]);
    for (int64_t i = 1; i < n; ++i) best = std::max(best, static_cast<A>(src[i]));
    return static_cast<T>(best);
  });
}

Status global_lp_pool_kernel(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(double p, read_p(ctx));
  return global_pool(
      ctx, [p]<typename T>(const T* src, int64_t n) { return lp_norm<T>(src, nullptr, n, 1, p); });
}

// Copies the region both shapes share from src to dst (both row-major, same rank).
template <typename T>
void copy_overlap(const T* src, const Shape& src_dims, T* dst, const Shape& dst_dims) {
  const size_t rank = src_dims.size();
  Shape overlap(rank);
  for (size_t d = 0; d < rank; ++d) overlap[d] = std::min(src_dims[d], dst_dims[d]);
  for (int64_t d : overlap)
    if (d == 0) return;
  std::vector<int64_t> index(rank, 0);
  do {
    int64_t s = 0, t = 0;
    for (size_t d = 0; d < rank; ++d) {
      s = s * src_dims[d] + index[d];
      t = t * dst_dims[d] + index[d];
    }
    dst[t] = src[s];
  } while (next_index(index, overlap));
}

// Scatters X into zeros of the unpooled shape at the flat indices I; an explicit
// output_shape gets that tensor in its leading corner (as the ONNX reference does).
Status max_unpool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, ctx.attrs().get_ints("kernel_shape"));
  const size_t spatial = kernel.size();
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> strides,
                      read_window_ints(ctx.node(), "strides", spatial, 1, 1));
  std::vector<int64_t> pads_begin, pads_end;
  PG_RETURN_IF_ERROR(read_pads(ctx.node(), spatial, pads_begin, pads_end));
  if (x.rank() != static_cast<int64_t>(spatial) + 2 || indices.shape() != x.shape())
    return ctx.error("inputs X " + shape_to_string(x.shape()) + " and I " +
                     shape_to_string(indices.shape()) + " must match and have rank " +
                     std::to_string(spatial + 2));
  Shape unpooled{x.dim(0), x.dim(1)};
  for (size_t d = 0; d < spatial; ++d)
    unpooled.push_back((x.dim(static_cast<int64_t>(d) + 2) - 1) * strides[d] + kernel[d] -
                       pads_begin[d] - pads_end[d]);
  auto total = checked_product(unpooled);
  if (!total) return ctx.error("unpooled shape " + shape_to_string(unpooled) + " is invalid");
  Tensor& y = ctx.output(0);
  const int64_t* idx = indices.data<int64_t>();
  for (int64_t i = 0; i < indices.numel(); ++i)
    if (idx[i] < 0 || idx[i] >= *total)
      return ctx.error("index " + std::to_string(idx[i]) + " in I is outside the unpooled output " +
                       shape_to_string(unpooled));
  return visit_float(x.dtype(), [&]<typename T>() {
    const bool direct = y.shape() == unpooled;
    std::vector<T> buffer(direct ? 0 : static_cast<size_t>(*total));
    T* out = direct ? y.data<T>() : buffer.data();
    for (int64_t i = 0; i < x.numel(); ++i) out[idx[i]] = x.data<T>()[i];
    if (!direct) copy_overlap(buffer.data(), unpooled, y.data<T>(), y.shape());
  });
}

// Max over each of pooled_h x pooled_w bins of every RoI (batch, x1, y1, x2, y2), with the
// box scaled by spatial_scale and rounded to whole pixels.
Status max_roi_pool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  PG_ASSIGN_OR_RETURN(float scale, ctx.attrs().get_float("spatial_scale", 1.0f));
  Tensor& y = ctx.output(0);
  const int64_t batch = x.dim(0), channels = x.dim(1), height = x.dim(2), width = x.dim(3);
  const int64_t pooled_h = y.dim(2), pooled_w = y.dim(3), num_rois = rois.dim(0);
  if (rois.rank() != 2 || rois.dim(1) != 5) return ctx.error("rois must have shape [num_rois, 5]");
  for (int64_t r = 0; r < num_rois; ++r) {
    const double b = rois.get_as_double(r * 5);
    if (!(b >= 0 && b < static_cast<double>(batch)))
      return ctx.error("RoI " + std::to_string(r) + " has batch index " + std::to_string(b) +
                       ", expected 0.." + std::to_string(batch - 1));
  }
  return visit_float(x.dtype(), [&]<typename T>() {
    using A = AccumulatorOf<T>;
    for (int64_t r = 0; r < num_rois; ++r) {
      const T* roi = rois.data<T>() + r * 5;
      const int64_t n = static_cast<int64_t>(static_cast<float>(roi[0]));
      auto scaled = [&](int i) {
        return static_cast<int64_t>(
            std::round(static_cast<double>(static_cast<float>(roi[i])) * scale));
      };
      const int64_t x1 = scaled(1), y1 = scaled(2), x2 = scaled(3), y2 = scaled(4);
      const double bin_h =
          static_cast<double>(std::max<int64_t>(y2 - y1 + 1, 1)) / static_cast<double>(pooled_h);
      const double bin_w =
          static_cast<double>(std::max<int64_t>(x2 - x1 + 1, 1)) / static_cast<double>(pooled_w);
      for (int64_t c = 0; c < channels; ++c) {
        const T* plane = x.data<T>() + (n * channels + c) * height * width;
        T* dst = y.data<T>() + (r * channels + c) * pooled_h * pooled_w;
        for (int64_t ph = 0; ph < pooled_h; ++ph) {
          const int64_t h0 =
              std::clamp<int64_t>(static_cast<int64_t>(std::floor(ph * bin_h)) + y1, 0, height);
          const int64_t h1 = std::clamp<int64_t>(
              static_cast<int64_t>(std::ceil((ph + 1) * bin_h)) + y1, 0, height);
          for (int64_t pw = 0; pw < pooled_w; ++pw) {
            const int64_t w0 =
                std::clamp<int64_t>(static_cast<int64_t>(std::floor(pw * bin_w)) + x1, 0, width);
            const int64_t w1 = std::clamp<int64_t>(
                static_cast<int64_t>(std::ceil((pw + 1) * bin_w)) + x1, 0, width);
            A best = -std::numeric_limits<A>::infinity();
            bool empty = true;
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w) {
                best = std::max(best, static_cast<A>(plane[h * width + w]));
                empty = false;
              }
            dst[ph * pooled_w + pw] = static_cast<T>(empty ? A(0) : best);
          }
        }
      }
    }
  });
}

}  // namespace

void register_pool_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "MaxPool", max_pool_kernel);
  r.add(kOnnxDomain, "AveragePool", average_pool_kernel);
  r.add(kOnnxDomain, "LpPool", lp_pool_kernel);
  r.add(kOnnxDomain, "GlobalAveragePool", global_average_pool_kernel);
  r.add(kOnnxDomain, "GlobalMaxPool", global_max_pool_kernel);
  r.add(kOnnxDomain, "GlobalLpPool", global_lp_pool_kernel);
  r.add(kOnnxDomain, "MaxUnpool", max_unpool_kernel);
  r.add(kOnnxDomain, "MaxRoiPool", max_roi_pool_kernel);
}

}  // namespace peregrine
