// Reference kernels of If, Loop, Scan and SequenceMap: they run their bodies
// through the executor's subgraph runner, which gives the bodies the outer scope.
#include <algorithm>
#include <cstring>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

namespace {

// Copies `count` consecutive elements (any dtype, strings too).
void copy_elements(const Tensor& src, int64_t src_at, Tensor& dst, int64_t dst_at, int64_t count) {
  if (src.dtype() == DType::kString) {
    for (int64_t i = 0; i < count; ++i) dst.strings()[dst_at + i] = src.strings()[src_at + i];
    return;
  }
  size_t sz = dtype_size(src.dtype());
  if (count)
    std::memcpy(static_cast<uint8_t*>(dst.raw()) + dst_at * sz,
                static_cast<const uint8_t*>(src.raw()) + src_at * sz, count * sz);
}

// Element `index` along `axis`, with that axis removed.
Tensor take_slice(const Tensor& t, int64_t axis, int64_t index) {
  Shape out_shape = t.shape();
  out_shape.erase(out_shape.begin() + axis);
  Tensor out = Tensor::zeros(t.dtype(), out_shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= t.dim(d);
  for (int64_t d = axis + 1; d < t.rank(); ++d) inner *= t.dim(d);
  const int64_t n = t.dim(axis);
  for (int64_t o = 0; o < outer; ++o) copy_elements(t, (o * n + index) * inner, out, o * inner, inner);
  return out;
}

// Stacks same-shaped tensors along a new `axis`.
Expected<Tensor> stack(const std::vector<Tensor>& items, int64_t axis, DType dtype, const Shape& empty_elem) {
  Shape elem = items.empty() ? empty_elem : items.front().shape();
  for (const auto& t : items)
    if (t.shape() != elem)
      return invalid_input("scan outputs change shape between iterations (" + shape_to_string(elem) +
                           " vs " + shape_to_string(t.shape()) + ")");
  Shape out_shape = elem;
  out_shape.insert(out_shape.begin() + axis, static_cast<int64_t>(items.size()));
  PG_ASSIGN_OR_RETURN(Tensor out, Tensor::make(items.empty() ? dtype : items.front().dtype(), out_shape));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= elem[d];
  for (size_t d = static_cast<size_t>(axis); d < elem.size(); ++d) inner *= elem[d];
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t k = 0; k < n; ++k)
    for (int64_t o = 0; o < outer; ++o) copy_elements(items[k], o * inner, out, (o * n + k) * inner, inner);
  return out;
}

Shape declared_elem_shape(const ir::Graph& body, size_t output) {
  const ir::Value* v = body.find_value(body.outputs[output]);
  if (v && v->type.is_static()) return v->type.dims;
  return {0};
}

Status run_if(KernelContext& ctx) {
  const Tensor& cond = ctx.input(0);
  if (cond.numel() != 1) return ctx.error("cond must hold exactly one element");
  bool take_then = cond.get_as_double(0) != 0;
  const ir::Graph* g = ctx.attrs().get_graph(take_then ? "then_branch" : "else_branch");
  PG_ASSIGN_OR_RETURN(auto outs, ctx.run_subgraph(*g, {}));
  if (outs.size() != ctx.num_outputs()) return ctx.error("branch produced the wrong number of outputs");
  for (size_t i = 0; i < outs.size(); ++i) ctx.set_output_value(i, std::move(outs[i]));
  return Status::ok();
}

Status run_loop(KernelContext& ctx) {
  const ir::Graph& body = *ctx.attrs().get_graph("body");
  const bool has_max = ctx.has_input(0);
  const bool has_cond = ctx.has_input(1);
  int64_t max_trips = has_max ? ctx.input(0).get_as_int64(0) : 0;
  bool cond = has_cond ? ctx.input(1).get_as_double(0) != 0 : true;
  const size_t carried = ctx.num_inputs() - 2;
  std::vector<RuntimeValue> state;
  for (size_t i = 0; i < carried; ++i) state.push_back(ctx.input_value(i + 2));
  const size_t scan_outputs = body.outputs.size() - 1 - carried;
  std::vector<std::vector<Tensor>> scanned(scan_outputs);
  // A loop with neither bound nor condition never ends; refuse rather than hang.
  if (!has_max && !has_cond) return ctx.error("has neither a trip count M nor a condition");
  for (int64_t i = 0; (!has_max || i < max_trips) && cond; ++i) {
    std::vector<RuntimeValue> args;
    args.push_back(RuntimeValue::of(Tensor::scalar<int64_t>(i)));
    args.push_back(RuntimeValue::of(Tensor::scalar<bool>(cond)));
    for (const auto& s : state) args.push_back(s);
    PG_ASSIGN_OR_RETURN(auto outs, ctx.run_subgraph(body, args));
    if (outs.size() != body.outputs.size()) return ctx.error("body produced the wrong number of outputs");
    if (!outs[0].is_tensor() || outs[0].tensor.numel() != 1) return ctx.error("body's cond output must be one bool");
    cond = outs[0].tensor.get_as_double(0) != 0;
    for (size_t k = 0; k < carried; ++k) state[k] = std::move(outs[k + 1]);
    for (size_t k = 0; k < scan_outputs; ++k) {
      RuntimeValue& v = outs[1 + carried + k];
      if (!v.is_tensor()) return ctx.error("scan outputs of a Loop body must be tensors");
      scanned[k].push_back(v.tensor);
    }
  }
  for (size_t k = 0; k < carried && k < ctx.num_outputs(); ++k) ctx.set_output_value(k, state[k]);
  for (size_t k = 0; k < scan_outputs && carried + k < ctx.num_outputs(); ++k) {
    DType dtype = ctx.output_type(carried + k).dtype;
    PG_ASSIGN_OR_RETURN(Tensor t, stack(scanned[k], 0, dtype == DType::kUndefined ? DType::kFloat32 : dtype,
                                        declared_elem_shape(body, 1 + carried + k)));
    ctx.set_output(carried + k, std::move(t));
  }
  return Status::ok();
}

// One Scan (opset 9 semantics) over states and scan inputs.
Status scan_once(KernelContext& ctx, const ir::Graph& body, std::vector<Tensor> states,
                 const std::vector<Tensor>& scan_inputs, const std::vector<int64_t>& in_axes,
                 const std::vector<int64_t>& in_dirs, std::vector<Tensor>* final_states,
                 std::vector<std::vector<Tensor>>* scanned) {
  int64_t length = -1;
  for (size_t k = 0; k < scan_inputs.size(); ++k) {
    int64_t n = scan_inputs[k].dim(in_axes[k]);
    if (length >= 0 && n != length) return ctx.error("scan inputs have different sequence lengths");
    length = n;
  }
  const size_t n_states = states.size();
  scanned->assign(body.outputs.size() - n_states, {});
  for (int64_t t = 0; t < length; ++t) {
    std::vector<RuntimeValue> args;
    args.reserve(states.size() + scan_inputs.size());
    for (const auto& s : states) args.push_back(RuntimeValue::of(s));
    for (size_t k = 0; k < scan_inputs.size(); ++k) {
      int64_t index = in_dirs[k] ? length - 1 - t : t;
      args.push_back(RuntimeValue::of(take_slice(scan_inputs[k], in_axes[k], index)));
    }
    PG_ASSIGN_OR_RETURN(auto outs, ctx.run_subgraph(body, args));
    for (size_t k = 0; k < n_states; ++k) states[k] = outs[k].tensor;
    for (size_t k = n_states; k < outs.size(); ++k) (*scanned)[k - n_states].push_back(outs[k].tensor);
  }
  *final_states = std::move(states);
  return Status::ok();
}

Status run_scan(KernelContext& ctx) {
  const ir::Graph& body = *ctx.attrs().get_graph("body");
  PG_ASSIGN_OR_RETURN(int64_t num_scan, ctx.attrs().get_int("num_scan_inputs"));
  const bool v8 = ctx.opset() < 9;
  const size_t first = v8 ? 1 : 0;
  if (num_scan < 1 ||
      static_cast<size_t>(num_scan) > ctx.num_inputs() - std::min(first, ctx.num_inputs()))
    return ctx.error("num_scan_inputs " + std::to_string(num_scan) +
                     " must be between 1 and the node's " +
                     std::to_string(ctx.num_inputs() - std::min(first, ctx.num_inputs())) +
                     " state and scan inputs");
  const size_t n_states = ctx.num_inputs() - first - static_cast<size_t>(num_scan);
  if (body.outputs.size() < n_states)
    return ctx.error("the body has " + std::to_string(body.outputs.size()) +
                     " outputs, fewer than the " + std::to_string(n_states) + " loop states");
  const size_t n_scan_out = body.outputs.size() - n_states;
  std::vector<Tensor> states, scan_inputs;
  for (size_t i = 0; i < n_states; ++i) states.push_back(ctx.input(first + i));
  for (size_t i = 0; i < static_cast<size_t>(num_scan); ++i) scan_inputs.push_back(ctx.input(first + n_states + i));

  std::vector<int64_t> in_axes(num_scan, 0), in_dirs(num_scan, 0), out_axes(n_scan_out, 0), out_dirs(n_scan_out, 0);
  auto read_list = [&](const char* name, std::vector<int64_t>* dst, const std::vector<Tensor>* ranks) -> Status {
    if (!ctx.attrs().has(name)) return Status::ok();
    PG_ASSIGN_OR_RETURN(auto v, ctx.attrs().get_ints(name));
    if (v.size() != dst->size()) return ctx.error(std::string("attribute '") + name + "' has the wrong length");
    for (size_t k = 0; k < v.size(); ++k) {
      if (ranks) {
        int64_t r = (*ranks)[k].rank();
        if (v[k] < -r || v[k] >= r) return ctx.error(std::string("attribute '") + name + "' is out of range");
        v[k] = v[k] < 0 ? v[k] + r : v[k];
      }
      (*dst)[k] = v[k];
    }
    return Status::ok();
  };
  if (v8) {
    PG_RETURN_IF_ERROR(read_list("directions", &in_dirs, nullptr));
  } else {
    PG_RETURN_IF_ERROR(read_list("scan_input_axes", &in_axes, &scan_inputs));
    PG_RETURN_IF_ERROR(read_list("scan_input_directions", &in_dirs, nullptr));
    PG_RETURN_IF_ERROR(read_list("scan_output_directions", &out_dirs, nullptr));
    if (ctx.attrs().has("scan_output_axes")) {
      PG_ASSIGN_OR_RETURN(auto v, ctx.attrs().get_ints("scan_output_axes"));
      if (v.size() != n_scan_out) return ctx.error("attribute 'scan_output_axes' has the wrong length");
      out_axes = v;
    }
  }
  auto finish_outputs = [&](std::vector<std::vector<Tensor>>& scanned, std::vector<Tensor>* out) -> Status {
    for (size_t k = 0; k < n_scan_out; ++k) {
      if (out_dirs[k]) std::reverse(scanned[k].begin(), scanned[k].end());
      int64_t rank = scanned[k].empty() ? 1 : scanned[k].front().rank() + 1;
      int64_t axis = out_axes[k] < 0 ? out_axes[k] + rank : out_axes[k];
      if (axis < 0 || axis >= rank) return ctx.error("scan_output_axes is out of range");
      PG_ASSIGN_OR_RETURN(Tensor t, stack(scanned[k], axis, DType::kFloat32, declared_elem_shape(body, n_states + k)));
      out->push_back(std::move(t));
    }
    return Status::ok();
  };

  std::vector<Tensor> final_states, scan_outs;
  if (!v8) {
    std::vector<std::vector<Tensor>> scanned;
    PG_RETURN_IF_ERROR(scan_once(ctx, body, states, scan_inputs, in_axes, in_dirs, &final_states, &scanned));
    PG_RETURN_IF_ERROR(finish_outputs(scanned, &scan_outs));
  } else {
    // Opset 8: a leading batch dim on every state and scan input; sequence axis 1.
    const int64_t batch = scan_inputs.front().rank() > 0 ? scan_inputs.front().dim(0) : 0;
    for (const auto* group : {&states, &scan_inputs})
      for (const Tensor& t : *group)
        if (t.rank() < (group == &states ? 1 : 2) || t.dim(0) != batch)
          return ctx.error("a state or scan input of shape " + shape_to_string(t.shape()) +
                           " lacks the leading batch dim " + std::to_string(batch) +
                           " (and scan inputs a sequence axis) that opset 8 requires");
    if (ctx.has_input(0) && ctx.input(0).numel() != batch)
      return ctx.error("sequence_lens has " + std::to_string(ctx.input(0).numel()) +
                       " entries for a batch of " + std::to_string(batch));
    std::vector<std::vector<Tensor>> per_batch_states(n_states), per_batch_outs(n_scan_out);
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Tensor> s, x;
      for (const auto& t : states) s.push_back(take_slice(t, 0, b));
      for (const auto& t : scan_inputs) x.push_back(take_slice(t, 0, b));
      int64_t len = x.front().dim(0);
      if (ctx.has_input(0)) len = ctx.input(0).get_as_int64(b);
      for (auto& t : x)
        if (len != t.dim(0)) return ctx.error("sequence_lens shorter than the data is not supported");
      std::vector<Tensor> fs, outs;
      std::vector<std::vector<Tensor>> scanned;
      PG_RETURN_IF_ERROR(scan_once(ctx, body, s, x, in_axes, in_dirs, &fs, &scanned));
      PG_RETURN_IF_ERROR(finish_outputs(scanned, &outs));
      for (size_t k = 0; k < n_states; ++k) per_batch_states[k].push_back(fs[k]);
      for (size_t k = 0; k < n_scan_out; ++k) per_batch_outs[k].push_back(outs[k]);
    }
    for (size_t k = 0; k < n_states; ++k) {
      PG_ASSIGN_OR_RETURN(Tensor t, stack(per_batch_states[k], 0, DType::kFloat32, {0}));
      final_states.push_back(t);
    }
    for (size_t k = 0; k < n_scan_out; ++k) {
      PG_ASSIGN_OR_RETURN(Tensor t, stack(per_batch_outs[k], 0, DType::kFloat32, {0}));
      scan_outs.push_back(t);
    }
  }
  for (size_t k = 0; k < n_states && k < ctx.num_outputs(); ++k) ctx.set_output(k, final_states[k]);
  for (size_t k = 0; k < n_scan_out && n_states + k < ctx.num_outputs(); ++k) ctx.set_output(n_states + k, scan_outs[k]);
  return Status::ok();
}

Status run_sequence_map(KernelContext& ctx) {
  const ir::Graph& body = *ctx.attrs().get_graph("body");
  const RuntimeValue& seq = ctx.input_value(0);
  if (!seq.is_sequence()) return ctx.error("input 0 must be a sequence");
  size_t n = seq.sequence.size();
  for (size_t k = 1; k < ctx.num_inputs(); ++k)
    if (ctx.input_value(k).is_sequence() && ctx.input_value(k).sequence.size() != n)
      return ctx.error("all sequence inputs must have the same length");
  std::vector<std::vector<Tensor>> results(ctx.num_outputs());
  for (size_t i = 0; i < n; ++i) {
    std::vector<RuntimeValue> args;
    args.push_back(RuntimeValue::of(seq.sequence[i]));
    for (size_t k = 1; k < ctx.num_inputs(); ++k) {
      const RuntimeValue& v = ctx.input_value(k);
      args.push_back(v.is_sequence() ? RuntimeValue::of(v.sequence[i]) : v);
    }
    PG_ASSIGN_OR_RETURN(auto outs, ctx.run_subgraph(body, args));
    for (size_t k = 0; k < results.size(); ++k) results[k].push_back(outs[k].tensor);
  }
  for (size_t k = 0; k < results.size(); ++k) {
    DType elem = ctx.output_type(k).elem ? ctx.output_type(k).elem->dtype : DType::kUndefined;
    ctx.set_output_value(k, RuntimeValue::of_sequence(std::move(results[k]), elem));
  }
  return Status::ok();
}

}  // namespace

void register_control_flow_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "If", run_if);
  r.add(kOnnxDomain, "Loop", run_loop);
  r.add(kOnnxDomain, "Scan", run_scan);
  r.add(kOnnxDomain, "SequenceMap", run_sequence_map);
}

}  // namespace peregrine
