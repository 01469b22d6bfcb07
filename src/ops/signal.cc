// Schemas of the signal family: DFT, STFT, the Hann/Hamming/Blackman windows and
// MelWeightMatrix. Complex values are a trailing dim of 2 (real, imaginary).
#include <optional>

#include "ops/infer_helpers.h"
#include "ops/op_list.h"

namespace peregrine {

namespace {

// The value of an optional scalar integer input, when present and known.
std::optional<int64_t> known_scalar(const InferContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return std::nullopt;
  const Tensor* t = ctx.input_value(i);
  if (!t || t->numel() != 1 || !dtype_is_integer(t->dtype())) return std::nullopt;
  return t->get_as_int64(0);
}

Status require_float_input(const InferContext& ctx, size_t i) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  DType d = ctx.input_type(i).dtype;
  if (d != DType::kUndefined && !dtype_is_float(d))
    return ctx.error("input '" + ctx.node().inputs[i] + "' must be a float tensor, got " +
                     std::string(dtype_name(d)));
  return Status::ok();
}

// Opset 17..19: axis is an attribute (default 1); opset 20: an optional input (default -2).
Status infer_dft(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_float_input(ctx, 0));
  const ir::ValueType& in = ctx.input_type(0);
  PG_ASSIGN_OR_RETURN(int64_t onesided, ctx.attrs().get_int("onesided", 0));
  PG_ASSIGN_OR_RETURN(int64_t inverse, ctx.attrs().get_int("inverse", 0));
  // inverse with onesided: an inverse real DFT, half a spectrum in, a real signal out.
  const bool real_inverse = inverse && onesided;
  if (!in.has_shape) {
    ctx.set_output(0, ir::ValueType::tensor_unknown_shape(in.dtype));
    return Status::ok();
  }
  const int64_t rank = in.rank();
  if (rank < 2) return ctx.error("input must have rank >= 2, got " + std::to_string(rank));
  if (in.dims.back() != 1 && in.dims.back() != 2 && in.dims.back() != -1)
    return ctx.error("the last dim of the input must be 1 (real) or 2 (complex), got " +
                     std::to_string(in.dims.back()));
  std::optional<int64_t> axis;
  if (ctx.opset() >= 20) {
    if (!ctx.has_input(2)) axis = -2;
    else axis = known_scalar(ctx, 2);
  } else {
    PG_ASSIGN_OR_RETURN(int64_t a, ctx.attrs().get_int("axis", 1));
    axis = a;
  }
  Shape dims = in.dims;
  dims.back() = real_inverse ? 1 : 2;
  if (!axis) {
    // The axis is not known yet: any signal dim may change.
    for (size_t i = 0; i + 1 < dims.size(); ++i) dims[i] = -1;
    ctx.set_output_tensor(0, in.dtype, dims);
    return Status::ok();
  }
  PG_ASSIGN_OR_RETURN(int64_t a, normalize_axis(ctx, *axis, rank));
  if (a == rank - 1) return ctx.error("axis must not be the last (complex) dim");
  int64_t length = dims[a];
  if (real_inverse && length >= 0) length = 2 * (length - 1);  // the default: an even signal
  if (ctx.has_input(1)) {
    std::optional<int64_t> n = known_scalar(ctx, 1);
    length = n ? *n : -1;
    if (n && *n < 1) return ctx.error("dft_length must be positive, got " + std::to_string(*n));
  }
  if (real_inverse && length == 0)
    return ctx.error("an inverse real DFT of a 1-bin spectrum needs dft_length");
  dims[a] = onesided && !inverse && length >= 0 ? length / 2 + 1 : length;
  ctx.set_output_tensor(0, in.dtype, dims);
  return Status::ok();
}

// signal [batch, length, 1|2] -> [batch, frames, bins, 2].
Status infer_stft(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_float_input(ctx, 0));
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 1));
  const ir::ValueType& in = ctx.input_type(0);
  PG_ASSIGN_OR_RETURN(int64_t onesided, ctx.attrs().get_int("onesided", 1));
  if (in.has_shape && in.rank() != 3)
    return ctx.error("signal must have rank 3 [batch, length, 1|2], got rank " +
                     std::to_string(in.rank()));
  std::optional<int64_t> frame_length = known_scalar(ctx, 3);
  if (!frame_length && ctx.has_input(2) && ctx.input_type(2).has_shape &&
      ctx.input_type(2).rank() == 1 && ctx.input_type(2).dims[0] >= 0)
    frame_length = ctx.input_type(2).dims[0];
  std::optional<int64_t> step = known_scalar(ctx, 1);
  if (step && *step < 1) return ctx.error("frame_step must be positive");
  if (frame_length && *frame_length < 1) return ctx.error("frame_length must be positive");
  int64_t batch = in.has_shape ? in.dims[0] : -1;
  int64_t length = in.has_shape ? in.dims[1] : -1;
  int64_t frames = -1, bins = -1;
  if (frame_length) bins = onesided ? *frame_length / 2 + 1 : *frame_length;
  if (frame_length && step && length >= 0) {
    if (length < *frame_length)
      return ctx.error("frame_length " + std::to_string(*frame_length) +
                       " is longer than the signal (" + std::to_string(length) + ")");
    frames = 1 + (length - *frame_length) / *step;
  }
  ctx.set_output_tensor(0, in.dtype, {batch, frames, bins, 2});
  return Status::ok();
}

Status output_datatype(const InferContext& ctx, DType* out) {
  PG_ASSIGN_OR_RETURN(int64_t d, ctx.attrs().get_int("output_datatype", 1));
  if (!dtype_is_valid(static_cast<int32_t>(d)))
    return ctx.error("output_datatype " + std::to_string(d) + " is not a valid type");
  DType t = static_cast<DType>(d);
  if (!dtype_is_float(t) && !dtype_is_integer(t))
    return ctx.error("output_datatype " + std::string(dtype_name(t)) + " is not numeric");
  *out = t;
  return Status::ok();
}

Status infer_window(InferContext& ctx) {
  PG_RETURN_IF_ERROR(require_tensor_input(ctx, 0));
  DType out;
  PG_RETURN_IF_ERROR(output_datatype(ctx, &out));
  std::optional<int64_t> size = known_scalar(ctx, 0);
  if (size && *size < 0) return ctx.error("size must not be negative");
  ctx.set_output_tensor(0, out, {size ? *size : -1});
  return Status::ok();
}

Status infer_mel_weight_matrix(InferContext& ctx) {
  for (size_t i = 0; i < 5; ++i) PG_RETURN_IF_ERROR(require_tensor_input(ctx, i));
  DType out;
  PG_RETURN_IF_ERROR(output_datatype(ctx, &out));
  std::optional<int64_t> mel_bins = known_scalar(ctx, 0);
  std::optional<int64_t> dft_length = known_scalar(ctx, 1);
  if (mel_bins && *mel_bins < 1) return ctx.error("num_mel_bins must be positive");
  if (dft_length && *dft_length < 1) return ctx.error("dft_length must be positive");
  ctx.set_output_tensor(0, out, {dft_length ? *dft_length / 2 + 1 : -1, mel_bins ? *mel_bins : -1});
  return Status::ok();
}

}  // namespace

void register_signal_schemas(SchemaRegistry& r) {
  r.add({kOnnxDomain, "DFT", 17, infer_dft, nullptr});
  r.add({kOnnxDomain, "STFT", 17, infer_stft, nullptr});
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"})
    r.add({kOnnxDomain, op, 17, infer_window, nullptr});
  r.add({kOnnxDomain, "MelWeightMatrix", 17, infer_mel_weight_matrix, nullptr});
}

}  // namespace peregrine
