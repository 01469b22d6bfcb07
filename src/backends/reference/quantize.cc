// Reference kernels of the quantize family: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv.
// Arithmetic follows onnx's reference (numpy) precision so results match bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/reference/evaluate.h"
#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"
#include "core/checked_math.h"
#include "core/narrow_float.h"
#include "ops/infer_helpers.h"
#include "ops/quantize_util.h"

namespace peregrine {

namespace {

// ---- element access for the quantized types -----------------------------------

// Integer range of a quantized integer type.
void integer_range(DType t, double& lo, double& hi) {
  switch (t) {
    case DType::kInt8: lo = -128; hi = 127; return;
    case DType::kUInt8: lo = 0; hi = 255; return;
    case DType::kInt16: lo = -32768; hi = 32767; return;
    case DType::kUInt16: lo = 0; hi = 65535; return;
    case DType::kInt4: lo = -8; hi = 7; return;
    case DType::kUInt4: lo = 0; hi = 15; return;
    case DType::kInt2:
      lo = -2;
      hi = 1;
      return;
    case DType::kUInt2:
      lo = 0;
      hi = 3;
      return;
    default: lo = 0; hi = 0; return;
  }
}

// Stores an already rounded and clamped integer value into element i.
void write_integer(Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::kInt8:
    case DType::kInt4:
    case DType::kInt2:
      t.data<int8_t>()[i] = static_cast<int8_t>(v);
      return;
    case DType::kUInt8:
    case DType::kUInt4:
    case DType::kUInt2:
      t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
      return;
    case DType::kInt16: t.data<int16_t>()[i] = static_cast<int16_t>(v); return;
    case DType::kUInt16: t.data<uint16_t>()[i] = static_cast<uint16_t>(v); return;
    default: return;
  }
}

// Rounds half to even, adds the zero point and saturates to `t`'s range.
double requantize(double v, double zero_point, DType t) {
  double lo, hi;
  integer_range(t, lo, hi);
  if (std::isnan(v)) return std::clamp(zero_point, lo, hi);
  return std::clamp(std::nearbyint(v) + zero_point, lo, hi);
}

// a / b rounded to the precision of the float type `t` (numpy computes in that type).
double divide_in(DType t, double a, double b) {
  switch (t) {
    case DType::kFloat64: return a / b;
    case DType::kFloat16:
      return static_cast<float>(Float16(static_cast<float>(a) / static_cast<float>(b)));
    case DType::kBFloat16:
      return static_cast<float>(BFloat16(static_cast<float>(a) / static_cast<float>(b)));
    default: return static_cast<float>(a) / static_cast<float>(b);
  }
}

double multiply_in(DType t, double a, double b) {
  switch (t) {
    case DType::kFloat64: return a * b;
    case DType::kFloat16:
      return static_cast<float>(Float16(static_cast<float>(a) * static_cast<float>(b)));
    case DType::kBFloat16:
      return static_cast<float>(BFloat16(static_cast<float>(a) * static_cast<float>(b)));
    default: return static_cast<float>(a) * static_cast<float>(b);
  }
}

// ---- (De)QuantizeLinear parameter layout --------------------------------------

// Maps a flat index of x to the flat index of its scale / zero point: per tensor,
// per axis (1-D along `axis`) or blocked (x's shape with `axis` cut into blocks).
struct ParamIndexer {
  int64_t axis_dim = 1, inner = 1, block = 0, param_axis_dim = 1;
  bool per_tensor = true;

  int64_t operator()(int64_t i) const {
    if (per_tensor) return 0;
    int64_t a = (i / inner) % axis_dim;
    if (block == 0) return a;
    int64_t outer = i / (inner * axis_dim);
    return (outer * param_axis_dim + a / block) * inner + i % inner;
  }
};

Expected<ParamIndexer> make_param_indexer(KernelContext& ctx, const Shape& x,
                                          const Tensor& param) {
  PG_ASSIGN_OR_RETURN(int64_t block_size, ctx.attrs().get_int("block_size", 0));
  ParamIndexer p;
  if (param.rank() == 0 || (param.numel() == 1 && block_size == 0)) return p;
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 1));
  int64_t rank = static_cast<int64_t>(x.size());
  if (axis < -rank || axis >= rank)
    return ctx.error("attribute 'axis' " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  p.per_tensor = false;
  p.axis_dim = x[axis];
  for (int64_t d = axis + 1; d < rank; ++d) p.inner *= x[d];
  if (block_size <= 0) {
    if (param.rank() != 1 || param.numel() != p.axis_dim)
      return ctx.error("per-axis scale/zero point must be 1-D with " +
                       std::to_string(p.axis_dim) + " elements");
    return p;
  }
  p.block = block_size;
  p.param_axis_dim = (p.axis_dim + block_size - 1) / block_size;
  Shape expected = x;
  expected[axis] = p.param_axis_dim;
  if (param.shape() != expected)
    return ctx.error("blocked scale/zero point has shape " + shape_to_string(param.shape()) +
                     ", expected " + shape_to_string(expected));
  return p;
}

Status quantize_linear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const bool has_zero_point = ctx.has_input(2);
  Tensor& y = ctx.output(0);
  PG_ASSIGN_OR_RETURN(int64_t saturate, ctx.attrs().get_int("saturate", 1));
  PG_ASSIGN_OR_RETURN(ParamIndexer scale_index, make_param_indexer(ctx, x.shape(), scale));
  ParamIndexer zero_index;
  if (has_zero_point) {
    PG_ASSIGN_OR_RETURN(zero_index, make_param_indexer(ctx, x.shape(), ctx.input(2)));
  }
  // numpy divides in the input's type; int32 input divides in double.
  DType compute = x.dtype() == DType::kInt32 ? DType::kFloat64 : x.dtype();
  const DType out = y.dtype();
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = divide_in(compute, x.get_as_double(i), scale.get_as_double(scale_index(i)));
    if (dtype_is_float8(out)) {
      // The float8 zero point must be 0 (onnx's reference ignores it).
      y.data<uint8_t>()[i] =
          float_to_float8(static_cast<float>(v), float8_format(out), saturate != 0);
    } else if (out == DType::kFloat4E2M1) {
      // E2M1 has no infinity to overflow to: it always saturates. The zero point is added
      // before rounding, as onnx's reference does.
      const double zero = has_zero_point ? ctx.input(2).get_as_double(zero_index(i)) : 0.0;
      y.data<uint8_t>()[i] = float_to_float4e2m1(static_cast<float>(v + zero));
    } else {
      double zero = has_zero_point ? ctx.input(2).get_as_double(zero_index(i)) : 0.0;
      write_integer(y, i, requantize(v, zero, out));
    }
  }
  return Status::ok();
}

Status dequantize_linear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  // The float formats' zero point is 0 by rule; onnx's reference ignores it.
  const bool has_zero_point =
      ctx.has_input(2) && !dtype_is_float8(x.dtype()) && x.dtype() != DType::kFloat4E2M1;
  Tensor& y = ctx.output(0);
  PG_ASSIGN_OR_RETURN(ParamIndexer scale_index, make_param_indexer(ctx, x.shape(), scale));
  ParamIndexer zero_index;
  if (has_zero_point) {
    PG_ASSIGN_OR_RETURN(zero_index, make_param_indexer(ctx, x.shape(), ctx.input(2)));
  }
  return visit_float(y.dtype(), [&]<typename T>() {
    T* out = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      // numpy: x.astype(float32) - zero_point, then times the scale.
      float shifted = static_cast<float>(x.get_as_double(i));
      if (has_zero_point)
        shifted -= static_cast<float>(ctx.input(2).get_as_double(zero_index(i)));
      double s = scale.get_as_double(scale_index(i));
      if constexpr (std::is_same_v<T, double>) {
        out[i] = static_cast<double>(shifted) * s;
      } else {
        out[i] = T(shifted * static_cast<float>(s));
      }
    }
  });
}

Status dynamic_quantize_linear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const float* in = x.data<float>();
  float max_x = 0, min_x = 0;  // the range always includes 0
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (std::isnan(in[i])) continue;
    max_x = std::max(max_x, in[i]);
    min_x = std::min(min_x, in[i]);
  }
  float scale = (max_x == min_x ? 1.0f : max_x - min_x) / 255.0f;
  float initial_zero = 0.0f - min_x / scale;
  float zero = std::nearbyint(std::clamp(initial_zero, 0.0f, 255.0f));
  Tensor& y = ctx.output(0);
  for (int64_t i = 0; i < x.numel(); ++i)
    y.data<uint8_t>()[i] = static_cast<uint8_t>(
        std::clamp(std::nearbyint(in[i] / scale) + zero, 0.0f, 255.0f));
  if (ctx.wants_output(1)) ctx.output(1).data<float>()[0] = scale;
  if (ctx.wants_output(2)) ctx.output(2).data<uint8_t>()[0] = static_cast<uint8_t>(zero);
  return Status::ok();
}

// ---- integer matmul ---------------------------------------------------------

// x - zero_point as int32, with a zero point that is a scalar, 1-D along `axis_dim`
// of x (rows of A, columns of B) or broadcastable to x.
Expected<std::vector<int32_t>> shifted_values(KernelContext& ctx, const Tensor& x, size_t zp_input,
                                              int64_t axis_from_end) {
  std::vector<int32_t> v(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) v[i] = static_cast<int32_t>(x.get_as_int64(i));
  if (!ctx.has_input(zp_input)) return v;
  const Tensor& zp = ctx.input(zp_input);
  if (zp.numel() == 1) {
    int32_t z = static_cast<int32_t>(zp.get_as_int64(0));
    for (int32_t& e : v) e -= z;
    return v;
  }
  Shape zp_shape = zp.shape();
  if (zp.rank() == 1 && x.rank() >= 2) {
    // 1-D: one zero point per row (axis_from_end 2) or per column (axis_from_end 1).
    zp_shape.assign(static_cast<size_t>(axis_from_end), 1);
    zp_shape[0] = zp.dim(0);
  }
  auto b = broadcast_shapes(zp_shape, x.shape());
  if (!b.is_ok() || *b != x.shape())
    return ctx.error("zero point of shape " + shape_to_string(zp.shape()) +
                     " does not fit input of shape " + shape_to_string(x.shape()));
  BroadcastIndexer index(zp_shape, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) v[i] -= static_cast<int32_t>(zp.get_as_int64(index(i)));
  return v;
}

// numpy.matmul of int32 values; calls emit(out_index, row, column, sum).
template <typename Emit>
void integer_matmul(const std::vector<int32_t>& a, const Shape& a_shape,
                    const std::vector<int32_t>& b, const Shape& b_shape, const Shape& out_shape,
                    Emit emit) {
  Shape a2 = a_shape.size() == 1 ? Shape{1, a_shape[0]} : a_shape;
  Shape b2 = b_shape.size() == 1 ? Shape{b_shape[0], 1} : b_shape;
  const int64_t m = a2[a2.size() - 2], k = a2.back(), n = b2.back();
  Shape batch_a(a2.begin(), a2.end() - 2), batch_b(b2.begin(), b2.end() - 2);
  size_t batch_rank = std::max(batch_a.size(), batch_b.size());
  Shape batch_out(out_shape.begin(), out_shape.begin() + static_cast<int64_t>(batch_rank));
  int64_t batches = 1;
  for (int64_t d : batch_out) batches *= d;
  BroadcastIndexer index_a(batch_a, batch_out), index_b(batch_b, batch_out);
  for (int64_t bi = 0; bi < batches; ++bi) {
    const int32_t* pa = a.data() + index_a(bi) * m * k;
    const int32_t* pb = b.data() + index_b(bi) * k * n;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) {
        int64_t sum = 0;
        for (int64_t j = 0; j < k; ++j) sum += int64_t{pa[r * k + j]} * pb[j * n + c];
        emit((bi * m + r) * n + c, r, c, sum);
      }
  }
}

Status matmul_integer(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  PG_ASSIGN_OR_RETURN(std::vector<int32_t> a32, shifted_values(ctx, a, 2, 2));
  PG_ASSIGN_OR_RETURN(std::vector<int32_t> b32, shifted_values(ctx, b, 3, 1));
  Tensor& y = ctx.output(0);
  int32_t* out = y.data<int32_t>();
  integer_matmul(a32, a.shape(), b32, b.shape(), y.shape(),
                 [&](int64_t i, int64_t, int64_t, int64_t sum) {
                   out[i] = static_cast<int32_t>(sum);
                 });
  return Status::ok();
}

// A scale or zero point that is a scalar or holds one value per row/column.
double per_index(const Tensor& t, int64_t i) { return t.get_as_double(t.numel() == 1 ? 0 : i); }

Status qlinear_matmul(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  const Tensor& a_scale = ctx.input(1);
  const Tensor& b_scale = ctx.input(4);
  const Tensor& y_scale = ctx.input(6);
  PG_ASSIGN_OR_RETURN(std::vector<int32_t> a32, shifted_values(ctx, a, 2, 2));
  PG_ASSIGN_OR_RETURN(std::vector<int32_t> b32, shifted_values(ctx, b, 5, 1));
  Tensor& y = ctx.output(0);
  const int64_t rows = a.rank() == 1 ? 1 : a.dim(a.rank() - 2);
  const int64_t cols = b.rank() == 1 ? 1 : b.dim(b.rank() - 1);
  if ((a_scale.numel() != 1 && a_scale.numel() != rows) ||
      (b_scale.numel() != 1 && b_scale.numel() != cols) || y_scale.numel() != 1)
    return ctx.error("scales must be scalars, or per row of 'a' / per column of 'b'");
  if (ctx.has_input(7) && ctx.input(7).numel() != 1)
    return ctx.error("input 'y_zero_point' must be a scalar");
  const double y_zero = ctx.has_input(7) ? ctx.input(7).get_as_double(0) : 0.0;
  const DType scale_type = a_scale.dtype();
  const double ys = y_scale.get_as_double(0);
  integer_matmul(a32, a.shape(), b32, b.shape(), y.shape(),
                 [&](int64_t i, int64_t r, int64_t c, int64_t sum) {
                   // numpy: (a_scale * b_scale / y_scale) in the scales' type, then
                   // int32 * that in double.
                   double multiplier = divide_in(
                       scale_type,
                       multiply_in(scale_type, per_index(a_scale, r), per_index(b_scale, c)), ys);
                   write_integer(y, i, requantize(double(sum) * multiplier, y_zero, y.dtype()));
                 });
  return Status::ok();
}

// ---- integer convolution ----------------------------------------------------

// Direct N-D convolution of int32 values (zero points already subtracted, so
// padding contributes nothing); calls emit(out_index, out_channel, sum).
template <typename Emit>
void integer_conv(const std::vector<int32_t>& x, const Shape& x_shape,
                  const std::vector<int32_t>& w, const Shape& w_shape,
                  const quantize_util::ConvGeometry& g, Emit emit) {
  const size_t spatial = x_shape.size() - 2;
  const int64_t batch = x_shape[0], in_channels = x_shape[1], out_channels = w_shape[0];
  const int64_t group_in = in_channels / g.group, group_out = out_channels / g.group;
  Shape in_dims(x_shape.begin() + 2, x_shape.end());
  Shape out_dims(g.output.begin() + 2, g.output.end());
  // An empty output may still have dims whose product overflows (a zero batch next to a huge
  // padded map): nothing to compute.
  const std::optional<int64_t> out_count = checked_product(out_dims);
  if (batch == 0 || out_channels == 0 || !out_count || *out_count == 0) return;
  int64_t in_size = 1, out_size = 1, kernel_size = 1;
  for (size_t d = 0; d < spatial; ++d) {
    in_size *= in_dims[d];
    out_size *= out_dims[d];
    kernel_size *= g.kernel[d];
  }
  std::vector<int64_t> in_strides = contiguous_strides(in_dims);
  std::vector<int64_t> out_pos(spatial), kernel_pos(spatial);
  int64_t out_index = 0;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t m = 0; m < out_channels; ++m) {
      const int64_t first_channel = (m / group_out) * group_in;
      for (int64_t o = 0; o < out_size; ++o, ++out_index) {
        for (int64_t d = static_cast<int64_t>(spatial) - 1, rest = o; d >= 0; --d) {
          out_pos[d] = rest % out_dims[d];
          rest /= out_dims[d];
        }
        int64_t sum = 0;
        for (int64_t kk = 0; kk < kernel_size; ++kk) {
          int64_t offset = 0;
          bool inside = true;
          for (int64_t d = static_cast<int64_t>(spatial) - 1, rest = kk; d >= 0; --d) {
            int64_t kd = rest % g.kernel[d];
            rest /= g.kernel[d];
            int64_t pos = out_pos[d] * g.strides[d] - g.pads_begin[d] + kd * g.dilations[d];
            if (pos < 0 || pos >= in_dims[d]) {  // a tap in the padding (its offset may not fit)
              inside = false;
              break;
            }
            offset += pos * in_strides[d];
          }
          if (!inside) continue;
          for (int64_t c = 0; c < group_in; ++c) {
            int64_t xi = (n * in_channels + first_channel + c) * in_size + offset;
            int64_t wi = (m * group_in + c) * kernel_size + kk;
            sum += int64_t{x[xi]} * w[wi];
          }
        }
        emit(out_index, m, sum);
      }
    }
  }
}

Status conv_integer_common(KernelContext& ctx, size_t x_in, size_t w_in, size_t x_zp,
                           size_t w_zp, std::vector<int32_t>& x32, std::vector<int32_t>& w32,
                           quantize_util::ConvGeometry& g) {
  const Tensor& x = ctx.input(x_in);
  const Tensor& w = ctx.input(w_in);
  auto geometry = quantize_util::conv_geometry(ctx.attrs(), x.shape(), w.shape());
  if (!geometry.is_ok()) return ctx.error(geometry.status().message());
  g = *geometry;
  if (ctx.has_input(x_zp) && ctx.input(x_zp).numel() != 1)
    return ctx.error("the input zero point must be a scalar");
  PG_ASSIGN_OR_RETURN(x32, shifted_values(ctx, x, x_zp, 1));
  // The weight zero point is a scalar or one per output channel.
  w32.resize(static_cast<size_t>(w.numel()));
  const int64_t per_channel = w.dim(0) == 0 ? 0 : w.numel() / w.dim(0);
  const Tensor* zp = ctx.has_input(w_zp) ? &ctx.input(w_zp) : nullptr;
  if (zp && zp->numel() != 1 && zp->numel() != w.dim(0))
    return ctx.error("the weight zero point must be a scalar or one per output channel");
  for (int64_t i = 0; i < w.numel(); ++i) {
    int64_t z = zp ? zp->get_as_int64(zp->numel() == 1 ? 0 : i / per_channel) : 0;
    w32[i] = static_cast<int32_t>(w.get_as_int64(i) - z);
  }
  return Status::ok();
}

Status conv_integer(KernelContext& ctx) {
  std::vector<int32_t> x32, w32;
  quantize_util::ConvGeometry g;
  PG_RETURN_IF_ERROR(conv_integer_common(ctx, 0, 1, 2, 3, x32, w32, g));
  Tensor& y = ctx.output(0);
  int32_t* out = y.data<int32_t>();
  integer_conv(x32, ctx.input(0).shape(), w32, ctx.input(1).shape(), g,
               [&](int64_t i, int64_t, int64_t sum) { out[i] = static_cast<int32_t>(sum); });
  return Status::ok();
}

Status qlinear_conv(KernelContext& ctx) {
  std::vector<int32_t> x32, w32;
  quantize_util::ConvGeometry g;
  PG_RETURN_IF_ERROR(conv_integer_common(ctx, 0, 3, 2, 5, x32, w32, g));
  const Tensor& x_scale = ctx.input(1);
  const Tensor& w_scale = ctx.input(4);
  const Tensor& y_scale = ctx.input(6);
  const int64_t out_channels = ctx.input(3).dim(0);
  if (x_scale.numel() != 1 || y_scale.numel() != 1 ||
      (w_scale.numel() != 1 && w_scale.numel() != out_channels))
    return ctx.error("scales must be scalars ('w_scale' may have one per output channel)");
  const Tensor* bias = ctx.has_input(8) ? &ctx.input(8) : nullptr;
  if (bias && (bias->dtype() != DType::kInt32 || bias->numel() != out_channels))
    return ctx.error("input 'B' must be int32 with one value per output channel");
  if (ctx.has_input(7) && ctx.input(7).numel() != 1)
    return ctx.error("input 'y_zero_point' must be a scalar");
  const double y_zero = ctx.has_input(7) ? ctx.input(7).get_as_double(0) : 0.0;
  const DType scale_type = x_scale.dtype();
  Tensor& y = ctx.output(0);
  integer_conv(x32, ctx.input(0).shape(), w32, ctx.input(3).shape(), g,
               [&](int64_t i, int64_t m, int64_t sum) {
                 if (bias) sum += bias->data<int32_t>()[m];
                 double multiplier = divide_in(
                     scale_type,
                     multiply_in(scale_type, x_scale.get_as_double(0), per_index(w_scale, m)),
                     y_scale.get_as_double(0));
                 double acc = static_cast<double>(static_cast<int32_t>(sum)) * multiplier;
                 write_integer(y, i, requantize(acc, y_zero, y.dtype()));
               });
  return Status::ok();
}

// peregrine.QLinearAdd: each side dequantized in float32 ((x - zp) * scale), summed, then
// quantized as QuantizeLinear does (divided by C's scale, rounded half to even, saturated).
Status qlinear_add(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  if (a.shape() != b.shape()) return ctx.error("inputs 'A' and 'B' must have the same shape");
  for (size_t i : {1, 2, 4, 5, 6, 7})
    if (ctx.has_input(i) && ctx.input(i).numel() != 1)
      return ctx.error("scales and zero points must be scalars");
  auto param = [&](size_t i) {
    return ctx.has_input(i) ? static_cast<float>(ctx.input(i).get_as_double(0)) : 0.0f;
  };
  const float sa = param(1), za = param(2), sb = param(4), zb = param(5), sc = param(6);
  const double zc = param(7);
  Tensor& c = ctx.output(0);
  for (int64_t i = 0; i < a.numel(); ++i) {
    const float fa = (static_cast<float>(a.get_as_double(i)) - za) * sa;
    const float fb = (static_cast<float>(b.get_as_double(i)) - zb) * sb;
    write_integer(c, i, requantize(static_cast<double>((fa + fb) / sc), zc, c.dtype()));
  }
  return Status::ok();
}

// peregrine.QGemm: int32 sums of zero-point-shifted values, the bias added, times the
// multiplier float32(float32(a_scale * b_scale) / y_scale) in double, rounded half to even and
// saturated (QuantizeLinear's rule).
Status qgemm(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  const Tensor& a_scale = ctx.input(1);
  const Tensor& b_scale = ctx.input(4);
  const Tensor& y_scale = ctx.input(7);
  PG_ASSIGN_OR_RETURN(int64_t trans_b, ctx.attrs().get_int("transB", 0));
  if (a.rank() < 2 || b.rank() != 2) return ctx.error("'A' must have rank >= 2 and 'B' rank 2");
  const int64_t k = a.dim(a.rank() - 1), rows = a.numel() / std::max<int64_t>(k, 1);
  const int64_t n = trans_b ? b.dim(0) : b.dim(1);
  if ((trans_b ? b.dim(1) : b.dim(0)) != k) return ctx.error("inner dimensions differ");
  if (a_scale.numel() != 1 || y_scale.numel() != 1 ||
      (b_scale.numel() != 1 && b_scale.numel() != n))
    return ctx.error("scales must be scalars ('b_scale' may have one per column)");
  const Tensor* b_zero = ctx.has_input(5) ? &ctx.input(5) : nullptr;
  if (b_zero && b_zero->numel() != b_scale.numel())
    return ctx.error("'b_zero_point' must have the shape of 'b_scale'");
  const Tensor* bias = ctx.has_input(6) ? &ctx.input(6) : nullptr;
  if (bias && (bias->dtype() != DType::kInt32 || bias->numel() != n))
    return ctx.error("input 'C' must be int32 with one value per column");
  if ((ctx.has_input(2) && ctx.input(2).numel() != 1) ||
      (ctx.has_input(8) && ctx.input(8).numel() != 1))
    return ctx.error("'a_zero_point' and 'y_zero_point' must be scalars");
  const int64_t a_zero = ctx.has_input(2) ? static_cast<int64_t>(ctx.input(2).get_as_double(0)) : 0;
  const double y_zero = ctx.has_input(8) ? ctx.input(8).get_as_double(0) : 0.0;
  const DType scale_type = a_scale.dtype();
  Tensor& y = ctx.output(0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n; ++c) {
      const int64_t bz =
          b_zero ? static_cast<int64_t>(b_zero->get_as_double(b_zero->numel() == 1 ? 0 : c)) : 0;
      int64_t sum = bias ? bias->data<int32_t>()[c] : 0;
      for (int64_t p = 0; p < k; ++p) {
        const int64_t av = static_cast<int64_t>(a.get_as_double(r * k + p)) - a_zero;
        const int64_t bv =
            static_cast<int64_t>(b.get_as_double(trans_b ? c * k + p : p * n + c)) - bz;
        sum += av * bv;
      }
      const double multiplier = divide_in(
          scale_type, multiply_in(scale_type, a_scale.get_as_double(0), per_index(b_scale, c)),
          y_scale.get_as_double(0));
      write_integer(y, r * n + c, requantize(double(sum) * multiplier, y_zero, y.dtype()));
    }
  return Status::ok();
}

// peregrine.TableLookup: Y[i] = table[X[i]'s byte read as unsigned].
Status table_lookup(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& table = ctx.input(1);
  if (table.numel() != 256) return ctx.error("input 'table' must have 256 values");
  const uint8_t* px = static_cast<const uint8_t*>(x.raw());
  const uint8_t* pt = static_cast<const uint8_t*>(table.raw());
  uint8_t* py = static_cast<uint8_t*>(ctx.output(0).raw());
  for (int64_t i = 0; i < x.numel(); ++i) py[i] = pt[px[i]];
  return Status::ok();
}

// peregrine.QuantizeDequantize: the two ONNX ops, one after the other.
Status quantize_dequantize(KernelContext& ctx) {
  const Tensor* zero = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  PG_ASSIGN_OR_RETURN(Tensor q, evaluate_tensor(make_eval_node("QuantizeLinear"),
                                                {&ctx.input(0), &ctx.input(1), zero}));
  PG_ASSIGN_OR_RETURN(
      Tensor d, evaluate_tensor(make_eval_node("DequantizeLinear"), {&q, &ctx.input(1), zero}));
  Tensor& y = ctx.output(0);
  if (y.numel() != d.numel()) return ctx.error("output shape differs from the input's");
  std::memcpy(y.raw(), d.raw(), static_cast<size_t>(d.numel()) * sizeof(float));
  return Status::ok();
}

}  // namespace

void register_quantize_kernels(KernelRegistry& r) {
  r.add(kPeregrineDomain, "QuantizeDequantize", quantize_dequantize);
  r.add(kPeregrineDomain, "TableLookup", table_lookup);
  r.add(kPeregrineDomain, "QGemm", qgemm);
  r.add(kPeregrineDomain, "QLinearAdd", qlinear_add);
  r.add(kOnnxDomain, "QuantizeLinear", quantize_linear);
  r.add(kOnnxDomain, "DequantizeLinear", dequantize_linear);
  r.add(kOnnxDomain, "DynamicQuantizeLinear", dynamic_quantize_linear);
  r.add(kOnnxDomain, "MatMulInteger", matmul_integer);
  r.add(kOnnxDomain, "QLinearMatMul", qlinear_matmul);
  r.add(kOnnxDomain, "ConvInteger", conv_integer);
  r.add(kOnnxDomain, "QLinearConv", qlinear_conv);
}

}  // namespace peregrine
