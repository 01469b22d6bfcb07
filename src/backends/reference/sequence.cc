// Reference kernels of the sequence family: sequences of tensors and optionals.
#include <cstring>
#include <vector>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"
#include "core/checked_math.h"

namespace peregrine {

namespace {

// The input as a sequence, or an error naming it.
Expected<const RuntimeValue*> sequence_input(const KernelContext& ctx, size_t i) {
  if (!ctx.has_input(i) || !ctx.input_value(i).is_sequence())
    return ctx.error("input " + std::to_string(i) + " must be a sequence");
  return &ctx.input_value(i);
}

Expected<int64_t> scalar_position(const KernelContext& ctx, size_t i) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1 || (t.dtype() != DType::kInt32 && t.dtype() != DType::kInt64))
    return ctx.error("input " + std::to_string(i) + " must be an int32 or int64 scalar");
  return t.get_as_int64(0);
}

// Maps a position in [lo, hi] (negative counts from the back of a sequence of n) to [0, n].
Expected<int64_t> normalize_position(const KernelContext& ctx, int64_t pos, int64_t n,
                                     bool allow_end) {
  const int64_t hi = allow_end ? n : n - 1;
  if (pos < -n || pos > hi)
    return ctx.error("position " + std::to_string(pos) + " is out of range [" +
                     std::to_string(-n) + ", " + std::to_string(hi) + "]");
  return pos < 0 ? pos + n : pos;
}

// Copies `count` elements between flat offsets of two tensors of the same dtype.
void copy_elements(const Tensor& src, int64_t src_offset, Tensor& dst, int64_t dst_offset,
                   int64_t count) {
  if (count <= 0) return;
  if (src.dtype() == DType::kString) {
    for (int64_t i = 0; i < count; ++i)
      dst.strings()[dst_offset + i] = src.strings()[src_offset + i];
    return;
  }
  const size_t size = dtype_size(src.dtype());
  std::memcpy(static_cast<uint8_t*>(dst.raw()) + dst_offset * size,
              static_cast<const uint8_t*>(src.raw()) + src_offset * size, count * size);
}

Status sequence_construct(KernelContext& ctx) {
  std::vector<Tensor> items;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i) || !ctx.input_value(i).is_tensor())
      return ctx.error("input " + std::to_string(i) + " must be a tensor");
    if (i > 0 && ctx.input(i).dtype() != ctx.input(0).dtype())
      return ctx.error("inputs have different types");
    items.push_back(ctx.input(i));
  }
  ctx.set_output_value(0, RuntimeValue::of_sequence(std::move(items)));
  return Status::ok();
}

Status sequence_empty(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(int64_t dtype, ctx.attrs().get_int("dtype", 1));
  if (!dtype_is_valid(static_cast<int32_t>(dtype)) || dtype == 0)
    return ctx.error("dtype " + std::to_string(dtype) + " is not a valid type");
  ctx.set_output_value(0, RuntimeValue::of_sequence({}, static_cast<DType>(dtype)));
  return Status::ok();
}

Status sequence_at(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(const RuntimeValue* seq, sequence_input(ctx, 0));
  PG_ASSIGN_OR_RETURN(int64_t pos, scalar_position(ctx, 1));
  const int64_t n = static_cast<int64_t>(seq->sequence.size());
  PG_ASSIGN_OR_RETURN(pos, normalize_position(ctx, pos, n, false));
  ctx.set_output(0, seq->sequence[static_cast<size_t>(pos)]);
  return Status::ok();
}

Status sequence_insert(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(const RuntimeValue* seq, sequence_input(ctx, 0));
  const Tensor& item = ctx.input(1);
  const int64_t n = static_cast<int64_t>(seq->sequence.size());
  if (seq->sequence_dtype != DType::kUndefined && item.dtype() != seq->sequence_dtype)
    return ctx.error("cannot insert a " + std::string(dtype_name(item.dtype())) +
                     " tensor into a sequence of " + std::string(dtype_name(seq->sequence_dtype)));
  int64_t pos = n;
  if (ctx.has_input(2)) {
    PG_ASSIGN_OR_RETURN(pos, scalar_position(ctx, 2));
    PG_ASSIGN_OR_RETURN(pos, normalize_position(ctx, pos, n, true));
  }
  std::vector<Tensor> items = seq->sequence;
  items.insert(items.begin() + pos, item);
  ctx.set_output_value(0, RuntimeValue::of_sequence(std::move(items), item.dtype()));
  return Status::ok();
}

Status sequence_erase(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(const RuntimeValue* seq, sequence_input(ctx, 0));
  const int64_t n = static_cast<int64_t>(seq->sequence.size());
  int64_t pos = -1;
  if (ctx.has_input(1)) {
    PG_ASSIGN_OR_RETURN(pos, scalar_position(ctx, 1));
  }
  PG_ASSIGN_OR_RETURN(pos, normalize_position(ctx, pos, n, false));
  std::vector<Tensor> items = seq->sequence;
  items.erase(items.begin() + pos);
  ctx.set_output_value(0, RuntimeValue::of_sequence(std::move(items), seq->sequence_dtype));
  return Status::ok();
}

Status sequence_length(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(const RuntimeValue* seq, sequence_input(ctx, 0));
  ctx.output(0).data<int64_t>()[0] = static_cast<int64_t>(seq->sequence.size());
  return Status::ok();
}

// Splits along `axis` into pieces of the given lengths.
Status split_to_sequence(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  PG_ASSIGN_OR_RETURN(int64_t keepdims, ctx.attrs().get_int("keepdims", 1));
  const int64_t rank = in.rank();
  if (rank == 0) return ctx.error("input must have rank >= 1");
  if (axis < -rank || axis >= rank)
    return ctx.error("axis " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(rank));
  if (axis < 0) axis += rank;
  const int64_t dim = in.dim(axis);
  std::vector<int64_t> lengths;
  bool squeeze = false;
  if (!ctx.has_input(1)) {
    lengths.assign(static_cast<size_t>(dim), 1);
    squeeze = keepdims == 0;
  } else {
    const Tensor& split = ctx.input(1);
    if (split.dtype() != DType::kInt32 && split.dtype() != DType::kInt64)
      return ctx.error("split must be int32 or int64");
    if (split.rank() == 0) {
      const int64_t size = split.get_as_int64(0);
      if (size < 1) return ctx.error("split size must be positive, got " + std::to_string(size));
      for (int64_t start = 0; start < dim; start += size)
        lengths.push_back(std::min(size, dim - start));
    } else if (split.rank() == 1) {
      lengths = split.to_int64_vector();
      int64_t total = 0;
      for (int64_t l : lengths) {
        if (l < 0) return ctx.error("split lengths must not be negative");
        total += l;
      }
      if (total != dim)
        return ctx.error("split lengths sum to " + std::to_string(total) + ", but the axis has " +
                         std::to_string(dim));
    } else {
      return ctx.error("split must be a scalar or a 1-D tensor");
    }
  }
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= in.dim(i);
  for (int64_t i = axis + 1; i < rank; ++i) inner *= in.dim(i);
  std::vector<Tensor> items;
  int64_t start = 0;
  for (int64_t length : lengths) {
    Shape shape = in.shape();
    shape[axis] = length;
    Tensor piece = Tensor::zeros(in.dtype(), shape);
    for (int64_t o = 0; o < outer; ++o)
      copy_elements(in, (o * dim + start) * inner, piece, o * length * inner, length * inner);
    if (squeeze) {
      shape.erase(shape.begin() + axis);
      piece = piece.reshaped(shape);
    }
    items.push_back(std::move(piece));
    start += length;
  }
  ctx.set_output_value(0, RuntimeValue::of_sequence(std::move(items), in.dtype()));
  return Status::ok();
}

// Concatenates along `axis`, or stacks along a new axis when new_axis = 1.
Status concat_from_sequence(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(const RuntimeValue* seq, sequence_input(ctx, 0));
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis"));
  PG_ASSIGN_OR_RETURN(int64_t new_axis, ctx.attrs().get_int("new_axis", 0));
  const std::vector<Tensor>& items = seq->sequence;
  if (items.empty()) return ctx.error("cannot concatenate an empty sequence");
  const Shape& first = items[0].shape();
  const int64_t rank = static_cast<int64_t>(first.size());
  const int64_t out_rank = new_axis ? rank + 1 : rank;
  if (out_rank == 0) return ctx.error("cannot concatenate scalars without new_axis");
  if (axis < -out_rank || axis >= out_rank)
    return ctx.error("axis " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(out_rank));
  if (axis < 0) axis += out_rank;
  // Each item viewed with the concatenation axis made explicit.
  std::vector<Shape> views;
  for (const Tensor& t : items) {
    if (t.dtype() != items[0].dtype()) return ctx.error("sequence items have different types");
    if (t.rank() != rank) return ctx.error("sequence items have different ranks");
    Shape view = t.shape();
    if (new_axis) view.insert(view.begin() + axis, 1);
    for (int64_t d = 0; d < out_rank; ++d) {
      if (d == axis) continue;
      Shape first_view = first;
      if (new_axis) first_view.insert(first_view.begin() + axis, 1);
      if (view[d] != first_view[d])
        return ctx.error("sequence items have shapes " + shape_to_string(first) + " and " +
                         shape_to_string(t.shape()) + " that differ off the axis");
    }
    views.push_back(view);
  }
  Shape out_shape = views[0];
  out_shape[axis] = 0;
  for (const Shape& v : views) out_shape[axis] += v[axis];
  if (!checked_product(out_shape)) return ctx.error("output size overflows");
  Tensor& out = ctx.allocate_output(0, items[0].dtype(), out_shape);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= out_shape[i];
  for (int64_t i = axis + 1; i < out_rank; ++i) inner *= out_shape[i];
  int64_t offset = 0;  // position along the axis of the current item
  for (size_t k = 0; k < items.size(); ++k) {
    const int64_t length = views[k][axis];
    for (int64_t o = 0; o < outer; ++o)
      copy_elements(items[k], o * length * inner, out, (o * out_shape[axis] + offset) * inner,
                    length * inner);
    offset += length;
  }
  return Status::ok();
}

Status optional_kernel(KernelContext& ctx) {
  RuntimeValue v = ctx.has_input(0) ? ctx.input_value(0) : RuntimeValue::none();
  v.is_optional = true;
  ctx.set_output_value(0, std::move(v));
  return Status::ok();
}

Status optional_has_element(KernelContext& ctx) {
  ctx.output(0).data<bool>()[0] = ctx.has_input(0);
  return Status::ok();
}

Status optional_get_element(KernelContext& ctx) {
  if (!ctx.input_present_slot(0)) return ctx.error("input 0 is required");
  if (!ctx.has_input(0)) return ctx.error("the optional input is empty");
  RuntimeValue v = ctx.input_value(0);
  v.is_optional = false;
  ctx.set_output_value(0, std::move(v));
  return Status::ok();
}

}  // namespace

void register_sequence_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "SequenceConstruct", sequence_construct);
  r.add(kOnnxDomain, "SequenceEmpty", sequence_empty);
  r.add(kOnnxDomain, "SequenceAt", sequence_at);
  r.add(kOnnxDomain, "SequenceInsert", sequence_insert);
  r.add(kOnnxDomain, "SequenceErase", sequence_erase);
  r.add(kOnnxDomain, "SequenceLength", sequence_length);
  r.add(kOnnxDomain, "SplitToSequence", split_to_sequence);
  r.add(kOnnxDomain, "ConcatFromSequence", concat_from_sequence);
  r.add(kOnnxDomain, "Optional", optional_kernel);
  r.add(kOnnxDomain, "OptionalHasElement", optional_has_element);
  r.add(kOnnxDomain, "OptionalGetElement", optional_get_element);
}

}  // namespace peregrine
