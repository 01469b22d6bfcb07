// Schemas of the conv family: Conv, ConvTranspose, DeformConv, Col2Im.
#include <string>
#include <vector>

#include "core/checked_math.h"
#include "ops/conv_geometry.h"
#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

const std::string& input_name(const InferContext& ctx, size_t i) { return ctx.node().inputs[i]; }

// The listed inputs that are present must be tensors of one float type; returns it.
Expected<DType> common_float_type(const InferContext& ctx, std::initializer_list<size_t> inputs) {
  DType dtype = DType::kUndefined;
  for (size_t i : inputs) {
    if (!ctx.has_input(i)) continue;
    PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
    DType d = ctx.input_type(i).dtype;
    if (!dtype_is_float(d))
      return ctx.error("input '" + input_name(ctx, i) + "' has type " + std::string(dtype_name(d)) +
                       ", expected a float type");
    if (dtype == DType::kUndefined) {
      dtype = d;
    } else if (d != dtype) {
      return ctx.error("input '" + input_name(ctx, i) + "' has type " + std::string(dtype_name(d)) +
                       ", expected " + std::string(dtype_name(dtype)) + " like input '" +
                       input_name(ctx, 0) + "'");
    }
  }
  return dtype;
}

// Dim i of input `input` or -1 when unknown.
int64_t dim_or_unknown(const InferContext& ctx, size_t input, size_t i) {
  const ir::ValueType& t = ctx.input_type(input);
  return t.has_shape && i < t.dims.size() ? t.dims[i] : -1;
}

Status require_same_rank(const InferContext& ctx, size_t input, int64_t rank) {
  const ir::ValueType& t = ctx.input_type(input);
  if (t.has_shape && t.rank() != rank)
    return ctx.error("input '" + input_name(ctx, input) + "' has rank " + std::to_string(t.rank()) +
                     ", expected " + std::to_string(rank));
  return Status::ok();
}

// The kernel's spatial dims: the kernel_shape attribute if given (checked against the
// weight), else the weight's dims from index 2; -1 where unknown.
Expected<std::vector<int64_t>> resolve_kernel_shape(const InferContext& ctx, size_t weight,
                                                    size_t spatial) {
  std::vector<int64_t> kernel(spatial, -1);
  const ir::ValueType& w = ctx.input_type(weight);
  if (w.has_shape)
    for (size_t i = 0; i < spatial; ++i) kernel[i] = w.dims[i + 2];
  if (ctx.attrs().has("kernel_shape")) {
    PG_ASSIGN_OR_RETURN(std::vector<int64_t> attr,
                        read_window_ints(ctx.node(), "kernel_shape", spatial, 1, 1));
    for (size_t i = 0; i < spatial; ++i) {
      if (kernel[i] >= 0 && kernel[i] != attr[i])
        return ctx.error("attribute 'kernel_shape' " + ints_to_string(attr) +
                         " does not match the spatial dims of weight '" + input_name(ctx, weight) +
                         "' (" + shape_to_string(w.dims) + ")");
      kernel[i] = attr[i];
    }
  }
  return kernel;
}

bool all_known(const std::vector<int64_t>& dims) {
  for (int64_t d : dims)
    if (d < 0) return false;
  return true;
}

Status check_bias(const InferContext& ctx, size_t input, int64_t channels) {
  if (!ctx.has_input(input)) return Status::ok();
  PG_RETURN_IF_ERROR(require_rank(ctx, input, 1, 1));
  int64_t size = dim_or_unknown(ctx, input, 0);
  if (size >= 0 && channels >= 0 && size != channels)
    return ctx.error("input '" + input_name(ctx, input) + "' has " + std::to_string(size) +
                     " values, expected one per output channel (" + std::to_string(channels) + ")");
  return Status::ok();
}

Expected<int64_t> read_group(const InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(int64_t group, ctx.attrs().get_int("group", 1));
  if (group < 1)
    return ctx.error("attribute 'group' is " + std::to_string(group) + ", expected >= 1");
  return group;
}

// Spatial input dims of input 0 (-1 where unknown).
Shape spatial_dims(const InferContext& ctx, size_t spatial) {
  Shape in(spatial, -1);
  for (size_t i = 0; i < spatial; ++i) in[i] = dim_or_unknown(ctx, 0, i + 2);
  return in;
}

// Rank of X/W from whichever is known; both must agree and be >= 3.
Expected<int64_t> conv_rank(const InferContext& ctx, size_t weight) {
  const ir::ValueType& x = ctx.input_type(0);
  const ir::ValueType& w = ctx.input_type(weight);
  int64_t rank = x.has_shape ? x.rank() : w.rank();
  if (rank < 0) return rank;
  if (rank < 3)
    return ctx.error("input '" + input_name(ctx, x.has_shape ? 0 : weight) + "' has rank " +
                     std::to_string(rank) + ", expected at least 3 (N, C and a spatial dim)");
  PG_RETURN_IF_ERROR(require_same_rank(ctx, weight, rank));
  return rank;
}

// X's channels must be the weight's (M, C/group, ...) C/group times group, and M must
// divide into the groups (Conv and DeformConv weights; unknown dims pass).
Status check_grouped_channels(const InferContext& ctx, int64_t group) {
  const int64_t channels = dim_or_unknown(ctx, 0, 1);
  const int64_t out_channels = dim_or_unknown(ctx, 1, 0);
  const int64_t channels_per_group = dim_or_unknown(ctx, 1, 1);
  if (channels >= 0 && channels_per_group >= 0 && channels != channels_per_group * group)
    return ctx.error("input '" + input_name(ctx, 0) + "' has " + std::to_string(channels) +
                     " channels but weight '" + input_name(ctx, 1) + "' expects " +
                     std::to_string(channels_per_group) + " per group x " + std::to_string(group) +
                     " groups");
  if (out_channels >= 0 && out_channels % group != 0)
    return ctx.error("weight '" + input_name(ctx, 1) + "' has " + std::to_string(out_channels) +
                     " output channels, not divisible by group " + std::to_string(group));
  return Status::ok();
}

// X: [N, C, D...], W: [M, C/group, k...], B: [M] -> Y: [N, M, out...].
Status infer_conv(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(DType dtype, common_float_type(ctx, {0, 1, 2}));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  PG_ASSIGN_OR_RETURN(int64_t group, read_group(ctx));
  PG_ASSIGN_OR_RETURN(int64_t rank, conv_rank(ctx, 1));
  if (rank < 0) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(dtype));
    return Status::ok();
  }
  const size_t spatial = static_cast<size_t>(rank - 2);
  const int64_t out_channels = dim_or_unknown(ctx, 1, 0);
  PG_RETURN_IF_ERROR(check_grouped_channels(ctx, group));
  PG_RETURN_IF_ERROR(check_bias(ctx, 2, out_channels));
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, resolve_kernel_shape(ctx, 1, spatial));
  Shape out{dim_or_unknown(ctx, 0, 0), out_channels};
  if (all_known(kernel)) {
    PG_ASSIGN_OR_RETURN(WindowGeometry g,
                        resolve_window(ctx.node(), spatial_dims(ctx, spatial), kernel, false));
    out.insert(out.end(), g.output.begin(), g.output.end());
  } else {
    out.resize(static_cast<size_t>(rank), -1);
  }
  ctx.set_output_tensor(0, dtype, out);
  return Status::ok();
}

}  // namespace

// Declared in ops/conv_geometry.h.
Expected<WindowGeometry> resolve_transpose_window(const ir::Node& node, const Shape& in,
                                                  const std::vector<int64_t>& kernel) {
  const size_t rank = kernel.size();
  WindowGeometry g;
  g.kernel = kernel;
  for (int64_t k : kernel)
    if (k < 1)
      return node_error(node, "kernel shape " + ints_to_string(kernel) + " has a value below 1");
  PG_ASSIGN_OR_RETURN(g.strides, read_window_ints(node, "strides", rank, 1, 1));
  PG_ASSIGN_OR_RETURN(g.dilations, read_window_ints(node, "dilations", rank, 1, 1));
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> output_padding,
                      read_window_ints(node, "output_padding", rank, 0, 0));
  PG_ASSIGN_OR_RETURN(std::string auto_pad, read_auto_pad(node));
  ir::AttrView attrs(node);
  std::vector<int64_t> output_shape;
  if (attrs.has("output_shape")) {
    PG_ASSIGN_OR_RETURN(output_shape, attrs.get_ints("output_shape"));
    // Some exporters include N and C; the spatial part is the tail.
    if (output_shape.size() == rank + 2)
      output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
    if (output_shape.size() != rank)
      return node_error(node, "attribute 'output_shape' " + ints_to_string(output_shape) + " has " +
                                  std::to_string(output_shape.size()) + " values, expected " +
                                  std::to_string(rank));
    for (int64_t d : output_shape)
      if (d < 0)
        return node_error(node, "attribute 'output_shape' " + ints_to_string(output_shape) +
                                    " has a negative value");
  }
  if (auto_pad == "NOTSET") {
    PG_RETURN_IF_ERROR(read_pads(node, rank, g.pads_begin, g.pads_end));
  } else {
    g.pads_begin.assign(rank, 0);
    g.pads_end.assign(rank, 0);
  }
  constexpr int64_t kLimit = int64_t{1} << 31;
  for (size_t i = 0; i < rank; ++i)
    if (g.kernel[i] > kLimit || g.strides[i] > kLimit || g.dilations[i] > kLimit ||
        g.pads_begin[i] > kLimit || g.pads_end[i] > kLimit || output_padding[i] > kLimit ||
        in[i] > (int64_t{1} << 40) ||
        (!output_shape.empty() && output_shape[i] > (int64_t{1} << 40)))
      return node_error(node, "window attributes or input dims are too large");
  g.output.assign(rank, -1);
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  for (size_t i = 0; i < rank; ++i) {
    if (in[i] < 0) {
      if (!output_shape.empty()) g.output[i] = output_shape[i];
      continue;
    }
    const int64_t full = g.strides[i] * (in[i] - 1) + output_padding[i] + g.effective_kernel(i);
    if (output_shape.empty() && !same) {
      g.output[i] = full - g.pads_begin[i] - g.pads_end[i];
      if (g.output[i] < 0)
        return node_error(node, "output spatial dim " + std::to_string(i) + " would be " +
                                    std::to_string(g.output[i]) + " (pads are too large)");
      continue;
    }
    g.output[i] = output_shape.empty() ? in[i] * g.strides[i] : output_shape[i];
    const int64_t total = full - g.output[i];
    const int64_t half = floor_div(total, 2);
    if (auto_pad == "SAME_UPPER") {
      g.pads_begin[i] = half;
      g.pads_end[i] = total - half;
    } else {
      g.pads_begin[i] = total - half;
      g.pads_end[i] = half;
    }
  }
  return g;
}

namespace {

// X: [N, C, D...], W: [C, M/group, k...], B: [M] -> Y: [N, M, out...].
Status infer_conv_transpose(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(DType dtype, common_float_type(ctx, {0, 1, 2}));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  PG_ASSIGN_OR_RETURN(int64_t group, read_group(ctx));
  PG_ASSIGN_OR_RETURN(int64_t rank, conv_rank(ctx, 1));
  if (rank < 0) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(dtype));
    return Status::ok();
  }
  const size_t spatial = static_cast<size_t>(rank - 2);
  const int64_t channels = dim_or_unknown(ctx, 0, 1);
  const int64_t weight_channels = dim_or_unknown(ctx, 1, 0);
  const int64_t out_per_group = dim_or_unknown(ctx, 1, 1);
  if (channels >= 0 && weight_channels >= 0 && channels != weight_channels)
    return ctx.error("input '" + input_name(ctx, 0) + "' has " + std::to_string(channels) +
                     " channels but weight '" + input_name(ctx, 1) + "' expects " +
                     std::to_string(weight_channels));
  if (weight_channels >= 0 && weight_channels % group != 0)
    return ctx.error("weight '" + input_name(ctx, 1) + "' has " + std::to_string(weight_channels) +
                     " input channels, not divisible by group " + std::to_string(group));
  const int64_t out_channels = out_per_group >= 0 ? out_per_group * group : -1;
  PG_RETURN_IF_ERROR(check_bias(ctx, 2, out_channels));
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, resolve_kernel_shape(ctx, 1, spatial));
  Shape out{dim_or_unknown(ctx, 0, 0), out_channels};
  if (all_known(kernel)) {
    PG_ASSIGN_OR_RETURN(WindowGeometry g,
                        resolve_transpose_window(ctx.node(), spatial_dims(ctx, spatial), kernel));
    out.insert(out.end(), g.output.begin(), g.output.end());
  } else {
    out.resize(static_cast<size_t>(rank), -1);
  }
  ctx.set_output_tensor(0, dtype, out);
  return Status::ok();
}

// X: [N, C, D...], W: [M, C/group, k...], offset: [N, og * rank * K, out...],
// B: [M], mask: [N, og * K, out...] -> Y: [N, M, out...].
Status infer_deform_conv(InferContext& ctx) {
  PG_ASSIGN_OR_RETURN(DType dtype, common_float_type(ctx, {0, 1, 2, 3, 4}));
  for (size_t i : {0, 1, 2}) PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  PG_ASSIGN_OR_RETURN(int64_t group, read_group(ctx));
  PG_ASSIGN_OR_RETURN(int64_t offset_group, ctx.attrs().get_int("offset_group", 1));
  if (offset_group < 1)
    return ctx.error("attribute 'offset_group' is " + std::to_string(offset_group) +
                     ", expected >= 1");
  PG_ASSIGN_OR_RETURN(int64_t rank, conv_rank(ctx, 1));
  if (rank < 0) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(dtype));
    return Status::ok();
  }
  PG_RETURN_IF_ERROR(require_same_rank(ctx, 2, rank));
  if (ctx.has_input(4)) PG_RETURN_IF_ERROR(require_same_rank(ctx, 4, rank));
  const size_t spatial = static_cast<size_t>(rank - 2);
  const int64_t channels = dim_or_unknown(ctx, 0, 1);
  const int64_t out_channels = dim_or_unknown(ctx, 1, 0);
  PG_RETURN_IF_ERROR(check_grouped_channels(ctx, group));
  if (channels >= 0 && channels % offset_group != 0)
    return ctx.error("input '" + input_name(ctx, 0) + "' has " + std::to_string(channels) +
                     " channels, not divisible by offset_group " + std::to_string(offset_group));
  PG_RETURN_IF_ERROR(check_bias(ctx, 3, out_channels));
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, resolve_kernel_shape(ctx, 1, spatial));
  Shape out{dim_or_unknown(ctx, 0, 0), out_channels};
  out.resize(static_cast<size_t>(rank), -1);
  if (all_known(kernel)) {
    PG_ASSIGN_OR_RETURN(WindowGeometry g,
                        resolve_window(ctx.node(), spatial_dims(ctx, spatial), kernel, false));
    int64_t kernel_size = 1;
    for (int64_t k : kernel) kernel_size *= k;
    for (size_t i = 0; i < spatial; ++i) out[i + 2] = g.output[i];
    const int64_t offset_channels = dim_or_unknown(ctx, 2, 1);
    const int64_t expected = offset_group * static_cast<int64_t>(spatial) * kernel_size;
    if (offset_channels >= 0 && offset_channels != expected)
      return ctx.error("input '" + input_name(ctx, 2) + "' has " + std::to_string(offset_channels) +
                       " channels, expected offset_group x spatial rank x kernel size = " +
                       std::to_string(expected));
    if (ctx.has_input(4)) {
      const int64_t mask_channels = dim_or_unknown(ctx, 4, 1);
      if (mask_channels >= 0 && mask_channels != offset_group * kernel_size)
        return ctx.error("input '" + input_name(ctx, 4) + "' has " + std::to_string(mask_channels) +
                         " channels, expected offset_group x kernel size = " +
                         std::to_string(offset_group * kernel_size));
    }
  }
  // The offset (and mask) carry the output grid: check and fill in from them.
  for (size_t input : {size_t{2}, size_t{4}}) {
    if (!ctx.has_input(input)) continue;
    const int64_t batch = dim_or_unknown(ctx, input, 0);
    if (batch >= 0 && out[0] >= 0 && batch != out[0])
      return ctx.error("input '" + input_name(ctx, input) + "' has batch " + std::to_string(batch) +
                       ", expected " + std::to_string(out[0]));
    for (size_t i = 0; i < spatial; ++i) {
      const int64_t d = dim_or_unknown(ctx, input, i + 2);
      if (d < 0) continue;
      if (out[i + 2] >= 0 && d != out[i + 2])
        return ctx.error("input '" + input_name(ctx, input) + "' has shape " +
                         shape_to_string(ctx.input_type(input).dims) +
                         ", whose spatial dims should be the output's " + shape_to_string(out));
      out[i + 2] = d;
    }
  }
  ctx.set_output_tensor(0, dtype, out);
  return Status::ok();
}

// input: [N, C * prod(block_shape), L], image_shape, block_shape -> [N, C, image_shape...].
Status infer_col2im(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_rank(ctx, 0, 3, 3));
  PG_RETURN_IF_ERROR(require_rank(ctx, 1, 1, 1));
  PG_RETURN_IF_ERROR(require_rank(ctx, 2, 1, 1));
  const DType dtype = ctx.input_type(0).dtype;
  for (size_t i : {1, 2})
    if (ctx.input_type(i).dtype != DType::kInt64)
      return ctx.error("input '" + input_name(ctx, i) + "' must be int64");
  const Tensor* image = ctx.input_value(1);
  const Tensor* block = ctx.input_value(2);
  int64_t spatial = dim_or_unknown(ctx, 1, 0);
  if (spatial < 0) spatial = dim_or_unknown(ctx, 2, 0);
  if (spatial < 0) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(dtype));
    return Status::ok();
  }
  if (spatial < 1) return ctx.error("input '" + input_name(ctx, 1) + "' is empty");
  const int64_t block_len = dim_or_unknown(ctx, 2, 0);
  if (block_len >= 0 && block_len != spatial)
    return ctx.error("inputs '" + input_name(ctx, 1) + "' and '" + input_name(ctx, 2) +
                     "' have different lengths");
  Shape out(static_cast<size_t>(spatial) + 2, -1);
  out[0] = dim_or_unknown(ctx, 0, 0);
  if (image) {
    for (int64_t i = 0; i < spatial; ++i) {
      out[static_cast<size_t>(i) + 2] = image->get_as_int64(i);
      if (out[static_cast<size_t>(i) + 2] < 1)
        return ctx.error("input '" + input_name(ctx, 1) + "' has a dim below 1");
    }
  }
  if (block) {
    std::vector<int64_t> kernel = block->to_int64_vector();
    int64_t block_size = 1;
    for (int64_t k : kernel) {
      if (k < 1 || k > (int64_t{1} << 31))
        return ctx.error("input '" + input_name(ctx, 2) + "' " + ints_to_string(kernel) +
                         " has a value out of range");
      auto p = checked_mul(block_size, k);
      if (!p) return ctx.error("block_shape is too large");
      block_size = *p;
    }
    const int64_t columns = dim_or_unknown(ctx, 0, 1);
    if (columns >= 0) {
      if (columns % block_size != 0)
        return ctx.error("input '" + input_name(ctx, 0) + "' has " + std::to_string(columns) +
                         " rows, not divisible by the block size " + std::to_string(block_size));
      out[1] = columns / block_size;
    }
    if (image) {
      Shape image_dims(out.begin() + 2, out.end());
      PG_ASSIGN_OR_RETURN(WindowGeometry g, resolve_window(ctx.node(), image_dims, kernel, false));
      const std::optional<int64_t> product = checked_product(g.output);
      if (!product)
        return ctx.error("image_shape " + ints_to_string(g.output) + " has too many blocks");
      const int64_t blocks = *product;
      const int64_t length = dim_or_unknown(ctx, 0, 2);
      if (length >= 0 && length != blocks)
        return ctx.error("input '" + input_name(ctx, 0) + "' has " + std::to_string(length) +
                         " blocks, expected " + std::to_string(blocks) + " (" +
                         ints_to_string(g.output) + ") for this image, block, pads and strides");
    }
  }
  ctx.set_output_tensor(0, dtype, out);
  return Status::ok();
}

double product(const Shape& dims, size_t from = 0) {
  double p = 1;
  for (size_t i = from; i < dims.size(); ++i) p *= static_cast<double>(dims[i]);
  return p;
}

// 2 * N * M * prod(out spatial) * (C / group) * prod(kernel).
OpCost conv_cost(const ir::Node&, const std::vector<ir::ValueType>& in,
                 const std::vector<ir::ValueType>& out) {
  OpCost c = default_cost(in, out);
  if (in.size() > 1 && in[1].is_static() && !out.empty() && out[0].is_static())
    c.flops = 2 * product(out[0].dims) * product(in[1].dims, 1);
  return c;
}

// 2 * N * C * prod(in spatial) * (M / group) * prod(kernel).
OpCost conv_transpose_cost(const ir::Node&, const std::vector<ir::ValueType>& in,
                           const std::vector<ir::ValueType>& out) {
  OpCost c = default_cost(in, out);
  if (in.size() > 1 && in[0].is_static() && in[1].is_static())
    c.flops = 2 * product(in[0].dims) * product(in[1].dims, 1);
  return c;
}

}  // namespace

void register_conv_schemas(SchemaRegistry& r) {
  r.add({kOnnxDomain, "Conv", 1, infer_conv, conv_cost});
  r.add({kOnnxDomain, "ConvTranspose", 1, infer_conv_transpose, conv_transpose_cost});
  r.add({kOnnxDomain, "DeformConv", 19, infer_deform_conv, conv_cost});
  r.add({kOnnxDomain, "Col2Im", 18, infer_col2im, elementwise_cost(1)});
}

}  // namespace peregrine
