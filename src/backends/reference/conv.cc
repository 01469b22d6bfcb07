// Reference kernels of the conv family: Conv, ConvTranspose, DeformConv, Col2Im.
// Conv lowers each group to im2col rows plus a row-wise product; ConvTranspose is the
// reverse (product into columns, then col2im scatter); Col2Im is that scatter alone.
#include <cmath>
#include <type_traits>
#include <vector>

#include "backends/reference/conv_util.h"
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"
#include "ops/conv_geometry.h"

namespace peregrine {

namespace {

Shape dims_from(const Tensor& t, int64_t first) {
  return Shape(t.shape().begin() + first, t.shape().end());
}

// The kernel offsets (k * dilation - pad_begin) of every kernel position, row-major.
std::vector<std::vector<int64_t>> kernel_offsets(const WindowGeometry& g) {
  std::vector<std::vector<int64_t>> all;
  std::vector<int64_t> index(g.rank(), 0);
  do {
    std::vector<int64_t> offset(g.rank());
    for (size_t d = 0; d < g.rank(); ++d) offset[d] = index[d] * g.dilations[d] - g.pads_begin[d];
    all.push_back(std::move(offset));
  } while (next_index(index, g.kernel));
  return all;
}

// The data of `t` as accumulation type A: a view when T is A, else a converted copy.
template <typename T, typename A>
const A* as_accumulator(const Tensor& t, std::vector<A>& storage) {
  if constexpr (std::is_same_v<T, A>) {
    return t.data<T>();
  } else {
    storage = to_accumulator<T, A>(t.data<T>(), t.numel());
    return storage.data();
  }
}

// Fills each of `channels` rows of `row_len` with the bias value of its channel (or 0).
template <typename T, typename A>
void fill_bias(A* out, const Tensor* bias, int64_t channels, int64_t row_len) {
  for (int64_t c = 0; c < channels; ++c) {
    const A v = bias ? static_cast<A>(bias->data<T>()[c]) : A(0);
    std::fill(out + c * row_len, out + (c + 1) * row_len, v);
  }
}

// Writes `n` accumulated values to the output data (rounding narrow floats).
template <typename T, typename A>
void store(const A* src, T* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(src[i]);
}

Expected<int64_t> read_group(const KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(int64_t group, ctx.attrs().get_int("group", 1));
  if (group < 1) return ctx.error("attribute 'group' must be >= 1");
  return group;
}

// Checks the sizes the loops rely on (schema inference already did, this guards the kernel).
Status check_conv_shapes(const KernelContext& ctx, const Tensor& x, const Tensor& w, int64_t group,
                         bool transpose) {
  if (x.rank() < 3 || w.rank() != x.rank())
    return ctx.error("input and weight ranks " + std::to_string(x.rank()) + " and " +
                     std::to_string(w.rank()) + " do not match (expected >= 3)");
  const int64_t channels = x.dim(1);
  const bool ok = transpose ? w.dim(0) == channels && channels % group == 0
                            : w.dim(1) * group == channels && w.dim(0) % group == 0;
  if (!ok) return ctx.error("input channels do not match the weight and group");
  return Status::ok();
}

template <typename T>
void run_conv(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
              const WindowGeometry& g, int64_t group) {
  using A = AccumulatorOf<T>;
  const int64_t batch = x.dim(0), channels = x.dim(1), out_channels = w.dim(0);
  const int64_t channels_per_group = channels / group, out_per_group = out_channels / group;
  const Shape in_dims = dims_from(x, 2);
  const int64_t in_size = product_of(in_dims), out_size = product_of(g.output);
  const int64_t kernel_size = product_of(g.kernel);
  const int64_t rows = channels_per_group * kernel_size;  // im2col rows per group

  std::vector<A> x_storage, w_storage, out_storage;
  const A* xs = as_accumulator<T, A>(x, x_storage);
  const A* ws = as_accumulator<T, A>(w, w_storage);
  bool pointwise = kernel_size == 1;
  for (size_t d = 0; d < g.rank(); ++d)
    pointwise = pointwise && g.strides[d] == 1 && g.pads_begin[d] == 0 && g.pads_end[d] == 0;
  const auto offsets = kernel_offsets(g);
  // im2col works on slabs of the outermost output dim to bound the column buffer.
  const int64_t outer = g.output[0];
  const int64_t slice = outer > 0 ? out_size / outer : 0;
  const int64_t slab = pointwise ? 0 : slab_height(rows, slice, outer);
  std::vector<A> col(static_cast<size_t>(rows * slab * slice));
  if constexpr (!std::is_same_v<T, A>)
    out_storage.resize(static_cast<size_t>(out_channels * out_size));

  for (int64_t n = 0; n < batch; ++n) {
    A* out_n;
    if constexpr (std::is_same_v<T, A>) {
      out_n = y.data<T>() + n * out_channels * out_size;
    } else {
      out_n = out_storage.data();
    }
    fill_bias<T, A>(out_n, bias, out_channels, out_size);
    for (int64_t grp = 0; grp < group; ++grp) {
      const A* x_group = xs + (n * channels + grp * channels_per_group) * in_size;
      const A* w_group = ws + grp * out_per_group * rows;
      A* out_group = out_n + grp * out_per_group * out_size;
      if (pointwise) {
        // A 1x1 unpadded, unstrided kernel reads the input planes as the columns.
        accumulate_product(w_group, rows, x_group, in_size, out_group, out_size, out_per_group,
                           rows, out_size);
        continue;
      }
      for (int64_t first = 0; first < outer; first += slab) {
        const int64_t height = std::min(slab, outer - first), cols = height * slice;
        std::vector<int64_t> grid = g.output;
        grid[0] = height;
        for (int64_t ic = 0; ic < channels_per_group; ++ic) {
          for (int64_t k = 0; k < kernel_size; ++k) {
            std::vector<int64_t> offset = offsets[static_cast<size_t>(k)];
            offset[0] += first * g.strides[0];
            gather_strided(x_group + ic * in_size, in_dims,
                           col.data() + (ic * kernel_size + k) * cols, grid, g.strides, offset);
          }
        }
        accumulate_product(w_group, rows, col.data(), cols, out_group + first * slice, out_size,
                           out_per_group, rows, cols);
      }
    }
    if constexpr (!std::is_same_v<T, A>)
      store(out_n, y.data<T>() + n * out_channels * out_size, out_channels * out_size);
  }
}

Status conv_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  PG_ASSIGN_OR_RETURN(int64_t group, read_group(ctx));
  PG_RETURN_IF_ERROR(check_conv_shapes(ctx, x, w, group, false));
  PG_ASSIGN_OR_RETURN(WindowGeometry g,
                      resolve_window(ctx.node(), dims_from(x, 2), dims_from(w, 2), false));
  Tensor& y = ctx.output(0);
  return visit_float(x.dtype(), [&]<typename T>() { run_conv<T>(x, w, bias, y, g, group); });
}

template <typename T>
void run_conv_transpose(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
                        const WindowGeometry& g, int64_t group) {
  using A = AccumulatorOf<T>;
  const int64_t batch = x.dim(0), channels = x.dim(1);
  const int64_t channels_per_group = channels / group, out_per_group = w.dim(1);
  const int64_t out_channels = out_per_group * group;
  const Shape in_dims = dims_from(x, 2);
  const int64_t in_size = product_of(in_dims), out_size = product_of(g.output);
  const int64_t kernel_size = product_of(g.kernel);
  const int64_t rows = out_per_group * kernel_size;  // column rows per group: (oc, k)

  std::vector<A> x_storage, w_storage, out_storage;
  const A* xs = as_accumulator<T, A>(x, x_storage);
  const A* ws = as_accumulator<T, A>(w, w_storage);
  // W is [C, M/group, k...]; the product wants it per group as [(oc, k), ic].
  std::vector<A> wt(static_cast<size_t>(group * rows * channels_per_group));
  for (int64_t grp = 0; grp < group; ++grp)
    for (int64_t ic = 0; ic < channels_per_group; ++ic)
      for (int64_t r = 0; r < rows; ++r)
        wt[static_cast<size_t>((grp * rows + r) * channels_per_group + ic)] =
            ws[(grp * channels_per_group + ic) * rows + r];
  const auto offsets = kernel_offsets(g);
  // Columns cover slabs of the outermost input dim to bound the buffer.
  const int64_t outer = in_dims[0];
  const int64_t slice = outer > 0 ? in_size / outer : 0;
  const int64_t slab = slab_height(rows, slice, outer);
  std::vector<A> col(static_cast<size_t>(rows * slab * slice));
  if constexpr (!std::is_same_v<T, A>)
    out_storage.resize(static_cast<size_t>(out_channels * out_size));

  for (int64_t n = 0; n < batch; ++n) {
    A* out_n;
    if constexpr (std::is_same_v<T, A>) {
      out_n = y.data<T>() + n * out_channels * out_size;
    } else {
      out_n = out_storage.data();
    }
    fill_bias<T, A>(out_n, bias, out_channels, out_size);
    for (int64_t grp = 0; grp < group; ++grp) {
      const A* x_group = xs + (n * channels + grp * channels_per_group) * in_size;
      for (int64_t first = 0; first < outer; first += slab) {
        const int64_t height = std::min(slab, outer - first), cols = height * slice;
        std::fill(col.begin(), col.begin() + rows * cols, A(0));
        accumulate_product(wt.data() + grp * rows * channels_per_group, channels_per_group,
                           x_group + first * slice, in_size, col.data(), cols, rows,
                           channels_per_group, cols);
        std::vector<int64_t> grid = in_dims;
        grid[0] = height;
        for (int64_t oc = 0; oc < out_per_group; ++oc) {
          for (int64_t k = 0; k < kernel_size; ++k) {
            std::vector<int64_t> offset = offsets[static_cast<size_t>(k)];
            offset[0] += first * g.strides[0];
            scatter_add_strided(col.data() + (oc * kernel_size + k) * cols, grid,
                                out_n + (grp * out_per_group + oc) * out_size, g.output, g.strides,
                                offset);
          }
        }
      }
    }
    if constexpr (!std::is_same_v<T, A>)
      store(out_n, y.data<T>() + n * out_channels * out_size, out_channels * out_size);
  }
}

Status conv_transpose_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  PG_ASSIGN_OR_RETURN(int64_t group, read_group(ctx));
  PG_RETURN_IF_ERROR(check_conv_shapes(ctx, x, w, group, true));
  PG_ASSIGN_OR_RETURN(WindowGeometry g,
                      resolve_transpose_window(ctx.node(), dims_from(x, 2), dims_from(w, 2)));
  Tensor& y = ctx.output(0);
  return visit_float(x.dtype(),
                     [&]<typename T>() { run_conv_transpose<T>(x, w, bias, y, g, group); });
}

// Bilinear sample of an H x W plane at (row, col); points outside read as 0.
template <typename A>
A bilinear(const A* plane, int64_t height, int64_t width, A row, A col) {
  if (!(row > -1 && row < static_cast<A>(height) && col > -1 && col < static_cast<A>(width)))
    return A(0);
  const A r0f = std::floor(row), c0f = std::floor(col);
  const int64_t r0 = static_cast<int64_t>(r0f), c0 = static_cast<int64_t>(c0f);
  const A fr = row - r0f, fc = col - c0f;
  auto at = [&](int64_t r, int64_t c) {
    return r >= 0 && r < height && c >= 0 && c < width ? plane[r * width + c] : A(0);
  };
  return (1 - fr) * ((1 - fc) * at(r0, c0) + fc * at(r0, c0 + 1)) +
         fr * ((1 - fc) * at(r0 + 1, c0) + fc * at(r0 + 1, c0 + 1));
}

template <typename T>
void run_deform_conv(const Tensor& x, const Tensor& w, const Tensor& offset, const Tensor* bias,
                     const Tensor* mask, Tensor& y, const WindowGeometry& g, int64_t group,
                     int64_t offset_group) {
  using A = AccumulatorOf<T>;
  const int64_t batch = x.dim(0), channels = x.dim(1), out_channels = w.dim(0);
  const int64_t height = x.dim(2), width = x.dim(3);
  const int64_t out_h = y.dim(2), out_w = y.dim(3), out_size = out_h * out_w;
  const int64_t kernel_h = g.kernel[0], kernel_w = g.kernel[1], kernel_size = kernel_h * kernel_w;
  const int64_t channels_per_group = channels / group, out_per_group = out_channels / group;
  const int64_t channels_per_offset_group = channels / offset_group;
  const int64_t rows = channels_per_group * kernel_size;

  std::vector<A> x_storage, w_storage, offset_storage, mask_storage, out_storage;
  const A* xs = as_accumulator<T, A>(x, x_storage);
  const A* ws = as_accumulator<T, A>(w, w_storage);
  const A* offsets = as_accumulator<T, A>(offset, offset_storage);
  const A* masks = mask ? as_accumulator<T, A>(*mask, mask_storage) : nullptr;
  std::vector<A> col(static_cast<size_t>(rows * out_size));
  out_storage.resize(static_cast<size_t>(out_channels * out_size));

  for (int64_t n = 0; n < batch; ++n) {
    A* out_n = out_storage.data();
    fill_bias<T, A>(out_n, bias, out_channels, out_size);
    for (int64_t grp = 0; grp < group; ++grp) {
      for (int64_t ic = 0; ic < channels_per_group; ++ic) {
        const int64_t c = grp * channels_per_group + ic;
        const int64_t og = c / channels_per_offset_group;
        const A* plane = xs + (n * channels + c) * height * width;
        for (int64_t k = 0; k < kernel_size; ++k) {
          const int64_t ki = k / kernel_w, kj = k % kernel_w;
          // offset channels per offset group: (kernel position, {row, col}).
          const A* dy = offsets + ((n * offset_group + og) * kernel_size * 2 + 2 * k) * out_size;
          const A* dx = dy + out_size;
          const A* m =
              masks ? masks + ((n * offset_group + og) * kernel_size + k) * out_size : nullptr;
          A* dst = col.data() + (ic * kernel_size + k) * out_size;
          for (int64_t oy = 0; oy < out_h; ++oy) {
            for (int64_t ox = 0; ox < out_w; ++ox) {
              const int64_t p = oy * out_w + ox;
              const A row =
                  static_cast<A>(oy * g.strides[0] - g.pads_begin[0] + ki * g.dilations[0]) + dy[p];
              const A col_pos =
                  static_cast<A>(ox * g.strides[1] - g.pads_begin[1] + kj * g.dilations[1]) + dx[p];
              const A v = bilinear(plane, height, width, row, col_pos);
              dst[p] = m ? v * m[p] : v;
            }
          }
        }
      }
      accumulate_product(ws + grp * out_per_group * rows, rows, col.data(), out_size,
                         out_n + grp * out_per_group * out_size, out_size, out_per_group, rows,
                         out_size);
    }
    store(out_n, y.data<T>() + n * out_channels * out_size, out_channels * out_size);
  }
}

Status deform_conv_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& offset = ctx.input(2);
  const Tensor* bias = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  const Tensor* mask = ctx.has_input(4) ? &ctx.input(4) : nullptr;
  if (x.rank() != 4)
    return unsupported(ctx.node().describe() + ": only 2-D DeformConv (rank-4 input) is supported");
  PG_ASSIGN_OR_RETURN(int64_t group, read_group(ctx));
  PG_ASSIGN_OR_RETURN(int64_t offset_group, ctx.attrs().get_int("offset_group", 1));
  PG_RETURN_IF_ERROR(check_conv_shapes(ctx, x, w, group, false));
  if (offset_group < 1 || x.dim(1) % offset_group != 0)
    return ctx.error("attribute 'offset_group' must divide the input channels");
  PG_ASSIGN_OR_RETURN(WindowGeometry g,
                      resolve_window(ctx.node(), dims_from(x, 2), dims_from(w, 2), false));
  Tensor& y = ctx.output(0);
  const int64_t kernel_size = g.kernel[0] * g.kernel[1];
  const Shape expected_offset{x.dim(0), offset_group * 2 * kernel_size, y.dim(2), y.dim(3)};
  if (offset.shape() != expected_offset)
    return ctx.error("offset has shape " + shape_to_string(offset.shape()) + ", expected " +
                     shape_to_string(expected_offset));
  const Shape expected_mask{x.dim(0), offset_group * kernel_size, y.dim(2), y.dim(3)};
  if (mask && mask->shape() != expected_mask)
    return ctx.error("mask has shape " + shape_to_string(mask->shape()) + ", expected " +
                     shape_to_string(expected_mask));
  return visit_float(x.dtype(), [&]<typename T>() {
    run_deform_conv<T>(x, w, offset, bias, mask, y, g, group, offset_group);
  });
}

template <typename T>
void run_col2im(const Tensor& data, Tensor& y, const WindowGeometry& g, const Shape& image) {
  using A = AccumulatorOf<T>;
  const int64_t batch = data.dim(0), blocks = data.dim(2);
  const int64_t kernel_size = product_of(g.kernel);
  const int64_t channels = data.dim(1) / kernel_size;
  const int64_t image_size = product_of(image);
  const auto offsets = kernel_offsets(g);
  std::vector<A> data_storage;
  const A* src = as_accumulator<T, A>(data, data_storage);
  std::vector<A> plane(static_cast<size_t>(image_size));
  for (int64_t nc = 0; nc < batch * channels; ++nc) {
    std::fill(plane.begin(), plane.end(), A(0));
    for (int64_t k = 0; k < kernel_size; ++k)
      scatter_add_strided(src + (nc * kernel_size + k) * blocks, g.output, plane.data(), image,
                          g.strides, offsets[static_cast<size_t>(k)]);
    store(plane.data(), y.data<T>() + nc * image_size, image_size);
  }
}

Status col2im_kernel(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Shape image = ctx.input(1).to_int64_vector();
  const std::vector<int64_t> block = ctx.input(2).to_int64_vector();
  PG_ASSIGN_OR_RETURN(WindowGeometry g, resolve_window(ctx.node(), image, block, false));
  if (data.rank() != 3 || data.dim(1) % product_of(block) != 0 ||
      data.dim(2) != product_of(g.output))
    return ctx.error("input shape " + shape_to_string(data.shape()) +
                     " does not match the image, block, pads and strides");
  Tensor& y = ctx.output(0);
  return visit_numeric(data.dtype(), [&]<typename T>() { run_col2im<T>(data, y, g, image); });
}

}  // namespace

void register_conv_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "Conv", conv_kernel);
  r.add(kOnnxDomain, "ConvTranspose", conv_transpose_kernel);
  r.add(kOnnxDomain, "DeformConv", deform_conv_kernel);
  r.add(kOnnxDomain, "Col2Im", col2im_kernel);
}

}  // namespace peregrine
