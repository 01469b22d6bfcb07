// CPU kernels of Concat and Split, any axis, any fixed-size dtype. Both move rows between one
// "whole" tensor and its parts along `axis`: with outer = the product of the dims before the
// axis, each outer index holds one contiguous run per part (the part's axis length times the
// dims after the axis), laid back to back in the whole. The whole's bytes are cut into
// kCopyBytesPerTask ranges spread over the thread pool; each range memcpys the runs it covers.
// Shapes come from the outputs the executor allocated from the schema's inference (also
// re-inferred per run for dynamic shapes); a non-static output type runs the reference.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/copy_ops.h"
#include "backends/cpu/thread_pool.h"

namespace peregrine::cpu {

namespace {

// Concat (gather = true): parts -> whole; Split: whole -> parts. parts[i] may be null for an
// output nobody reads (Split), its runs are skipped.
void copy_runs(char* whole, const std::vector<char*>& parts, const std::vector<int64_t>& run_bytes,
               int64_t outer, bool gather, int threads) {
  int64_t row_bytes = 0;
  for (int64_t b : run_bytes) row_bytes += b;
  const int64_t total = row_bytes * outer;
  if (total == 0) return;
  const int64_t tasks = (total + kCopyBytesPerTask - 1) / kCopyBytesPerTask;
  auto task = [&](int64_t t, int) {
    int64_t pos = t * kCopyBytesPerTask;
    const int64_t end = std::min(total, pos + kCopyBytesPerTask);
    int64_t o = pos / row_bytes, in_row = pos % row_bytes;
    size_t p = 0;
    while (in_row >= run_bytes[p]) in_row -= run_bytes[p++];  // part holding `pos`
    while (pos < end) {
      const int64_t n = std::min(run_bytes[p] - in_row, end - pos);
      if (parts[p] != nullptr) {
        char* part = parts[p] + o * run_bytes[p] + in_row;
        if (gather) {
          if (part != whole + pos)  // else the memory plan put the part there already
            std::memcpy(whole + pos, part, static_cast<size_t>(n));
        } else {
          std::memcpy(part, whole + pos, static_cast<size_t>(n));
        }
      }
      pos += n;
      in_row = 0;
      if (++p == parts.size()) p = 0, ++o;
      while (pos < end && run_bytes[p] == 0) {  // empty parts
        if (++p == parts.size()) p = 0, ++o;
      }
    }
  };
  cpu_thread_pool().parallel_for(tasks, threads, task);
}

// Normalized axis, or -1 when out of range.
int64_t normalize_axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return -1;
  return axis < 0 ? axis + rank : axis;
}

class ConcatKernel : public PreparedKernel {
 public:
  std::string name() const override { return "cpu/concat"; }
  Status run(KernelContext& ctx) override {
    if (!ctx.output_type(0).is_static() || ctx.num_inputs() == 0) return run_reference(ctx);
    PG_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attrs().get_int("axis", 0));
    const DType dtype = ctx.input(0).dtype();
    const int64_t rank = ctx.input(0).rank();
    const int64_t axis = normalize_axis(axis_attr, rank);
    if (!is_copyable_dtype(dtype) || axis < 0) return run_reference(ctx);
    int64_t axis_sum = 0;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) return run_reference(ctx);
      const Tensor& x = ctx.input(i);
      if (x.dtype() != dtype || x.rank() != rank) return run_reference(ctx);
      axis_sum += x.dim(axis);
    }
    const Shape& out_shape = ctx.output_type(0).dims;
    if (static_cast<int64_t>(out_shape.size()) != rank || out_shape[axis] != axis_sum)
      return run_reference(ctx);
    int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(dtype));
    for (int64_t d = 0; d < axis; ++d) outer *= out_shape[d];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= out_shape[d];
    parts_.clear();
    run_bytes_.clear();
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& x = ctx.input(i);
      for (int64_t d = 0; d < rank; ++d)  // the schema checked this; a bad shape must not crash
        if (d != axis && x.dim(d) != out_shape[d]) return run_reference(ctx);
      parts_.push_back(const_cast<char*>(static_cast<const char*>(x.raw())));
      run_bytes_.push_back(x.dim(axis) * inner);
    }
    Tensor& y = ctx.output_for_overwrite(0);
    copy_runs(static_cast<char*>(y.raw()), parts_, run_bytes_, outer, /*gather=*/true,
              ctx.num_threads());
    return Status::ok();
  }

 private:
  std::vector<char*> parts_;  // per-run scratch, kept to avoid reallocating
  std::vector<int64_t> run_bytes_;
};

class SplitKernel : public PreparedKernel {
 public:
  std::string name() const override { return "cpu/split"; }
  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    PG_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attrs().get_int("axis", 0));
    const int64_t rank = x.rank();
    const int64_t axis = normalize_axis(axis_attr, rank);
    if (!is_copyable_dtype(x.dtype()) || axis < 0) return run_reference(ctx);
    int64_t axis_sum = 0;
    for (size_t i = 0; i < ctx.num_outputs(); ++i) {
      const ir::ValueType& t = ctx.output_type(i);
      if (!t.is_static() || static_cast<int64_t>(t.dims.size()) != rank) return run_reference(ctx);
      for (int64_t d = 0; d < rank; ++d)
        if (d != axis && t.dims[d] != x.dim(d)) return run_reference(ctx);
      axis_sum += t.dims[axis];
    }
    if (axis_sum != x.dim(axis)) return run_reference(ctx);
    int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(x.dtype()));
    for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
    for (int64_t d = axis + 1; d < rank; ++d) inner *= x.dim(d);
    parts_.clear();
    run_bytes_.clear();
    for (size_t i = 0; i < ctx.num_outputs(); ++i) {
      char* p = nullptr;
      if (ctx.wants_output(i)) p = static_cast<char*>(ctx.output_for_overwrite(i).raw());
      parts_.push_back(p);
      run_bytes_.push_back(ctx.output_type(i).dims[axis] * inner);
    }
    copy_runs(const_cast<char*>(static_cast<const char*>(x.raw())), parts_, run_bytes_, outer,
              /*gather=*/false, ctx.num_threads());
    return Status::ok();
  }

 private:
  std::vector<char*> parts_;
  std::vector<int64_t> run_bytes_;
};

}  // namespace

bool claims_concat_split(const ir::Node& node) {
  return (node.domain.empty() || node.domain == "ai.onnx") &&
         (node.op_type == "Concat" || node.op_type == "Split");
}

Expected<std::unique_ptr<PreparedKernel>> prepare_concat_split(const ir::Node& node) {
  if (node.op_type == "Concat") return std::unique_ptr<PreparedKernel>(new ConcatKernel());
  return std::unique_ptr<PreparedKernel>(new SplitKernel());
}

}  // namespace peregrine::cpu
