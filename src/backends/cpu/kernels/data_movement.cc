// CPU kernels of Slice, Pad, Tile, Expand and Gather for every fixed-size dtype, each a set of
// per-axis coordinate maps run by the copy engine of kernels/index_map_copy.h (memcpy runs,
// threaded over output rows). The maps are rebuilt each run from the (possibly run-time)
// starts / pads / repeats / indices into storage the kernel keeps, so a run allocates nothing
// once it has seen its shapes. What a kernel cannot map (strings, an index out of range, a
// shape the schema would reject) runs the reference kernel, which reports the error.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/copy_ops.h"
#include "backends/cpu/kernels/index_map_copy.h"
#include "ops/tensor_shape_util.h"

namespace peregrine::cpu {

namespace {

using Maps = std::vector<std::vector<int64_t>>;

void identity_map(std::vector<int64_t>& m, int64_t n) {
  m.resize(static_cast<size_t>(n));
  for (int64_t c = 0; c < n; ++c) m[static_cast<size_t>(c)] = c;
}

class MapCopyKernel : public PreparedKernel {
 public:
  explicit MapCopyKernel(std::string op) : op_(std::move(op)), name_("cpu/copy-") {
    name_ += op_;
  }
  std::string name() const override { return name_; }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (!is_copyable_dtype(x.dtype())) return run_reference(ctx);
    Shape in = x.shape(), out;
    const void* fill = nullptr;
    PG_ASSIGN_OR_RETURN(bool mapped, build(ctx, x, &in, &out, &fill));
    if (!mapped) return run_reference(ctx);
    Tensor& y = ctx.output_for_overwrite(0);
    if (y.dtype() != x.dtype()) return run_reference(ctx);
    auto n = checked_product(out);
    if (!n || *n != y.numel()) return run_reference(ctx);
    if (y.numel() == 0) return Status::ok();
    copy_.plan(in, out, maps_, dtype_size(x.dtype()));
    copy_.run(x.raw(), y.raw(), fill, ctx.num_threads());
    return Status::ok();
  }

 private:
  // Each build_* fills maps_ (and the shapes the engine sees); false when this case goes to the
  // reference. `out` starts as X's shape and maps_ with one map per axis.
  Expected<bool> build(KernelContext& ctx, const Tensor& x, Shape* in, Shape* out,
                       const void** fill) {
    maps_.resize(static_cast<size_t>(x.rank()));
    out->assign(x.shape().begin(), x.shape().end());
    if (op_ == "Slice") return build_slice(ctx, x, out);
    if (op_ == "Pad") return build_pad(ctx, x, out, fill);
    if (op_ == "Tile") return build_tile(ctx, x, in, out);
    if (op_ == "Expand") return build_expand(ctx, x, in, out);
    return build_gather(ctx, x, out);
  }

  Expected<bool> build_slice(KernelContext& ctx, const Tensor& x, Shape* out) {
    const int64_t rank = x.rank();
    auto p = shape_util::slice_params(ctx);
    if (!p.is_ok()) return false;
    auto axes = shape_util::slice_axes(x.shape(), (*p)[0].values, (*p)[1].values, (*p)[2].values,
                                       (*p)[3].values);
    if (!axes.is_ok()) return false;
    for (int64_t d = 0; d < rank; ++d) {
      const shape_util::SliceAxis& a = (*axes)[static_cast<size_t>(d)];
      auto& m = maps_[static_cast<size_t>(d)];
      m.resize(static_cast<size_t>(a.count));
      for (int64_t c = 0; c < a.count; ++c) m[static_cast<size_t>(c)] = a.start + c * a.step;
      (*out)[static_cast<size_t>(d)] = a.count;
    }
    return true;
  }

  Expected<bool> build_pad(KernelContext& ctx, const Tensor& x, Shape* out, const void** fill) {
    const int64_t rank = x.rank();
    PG_ASSIGN_OR_RETURN(std::string mode, ctx.attrs().get_string("mode", "constant"));
    auto spec = shape_util::pad_params(ctx, rank);
    if (!spec.is_ok() || !spec->has_value()) return false;
    const shape_util::PadSpec& pads = **spec;
    if (mode == "constant") {
      fill_.assign(dtype_size(x.dtype()), 0);
      if (ctx.opset() >= 11) {
        if (ctx.has_input(2)) {
          const Tensor& v = ctx.input(2);
          if (v.dtype() != x.dtype() || v.numel() != 1) return false;
          std::memcpy(fill_.data(), v.raw(), fill_.size());
        }
      } else {
        PG_ASSIGN_OR_RETURN(float v, ctx.attrs().get_float("value", 0.0f));
        if (x.dtype() != DType::kFloat32) return false;
        std::memcpy(fill_.data(), &v, sizeof v);
      }
      *fill = fill_.data();
    } else if (mode != "edge" && mode != "reflect" && mode != "wrap") {
      return false;
    }
    for (int64_t d = 0; d < rank; ++d) {
      const size_t k = static_cast<size_t>(d);
      const int64_t lo = std::max<int64_t>(0, -pads.begin[k]);
      const int64_t len = x.dim(d) - lo - std::max<int64_t>(0, -pads.end[k]);
      const int64_t before = std::max<int64_t>(0, pads.begin[k]);
      const int64_t n = x.dim(d) + pads.begin[k] + pads.end[k];
      if (n < 0 || (len <= 0 && mode != "constant" && n > 0)) return false;
      auto& m = maps_[k];
      m.resize(static_cast<size_t>(n));
      for (int64_t c = 0; c < n; ++c) {
        int64_t w = c - before;  // position in the kept window [lo, lo + len)
        if (w < 0 || w >= len) {
          if (mode == "constant") {
            m[static_cast<size_t>(c)] = IndexMapCopy::kFill;
            continue;
          }
          if (mode == "edge") {
            w = std::clamp<int64_t>(w, 0, len - 1);
          } else if (mode == "wrap") {
            w = ((w % len) + len) % len;
          } else if (len == 1) {
            w = 0;
          } else {  // reflect
            const int64_t period = 2 * (len - 1);
            w = ((w % period) + period) % period;
            if (w >= len) w = period - w;
          }
        }
        m[static_cast<size_t>(c)] = lo + w;
      }
      (*out)[k] = n;
    }
    return true;
  }

  Expected<bool> build_tile(KernelContext& ctx, const Tensor& x, Shape* in, Shape* out) {
    const int64_t rank = x.rank();
    if (!ctx.has_input(1)) return false;
    const std::vector<int64_t> reps = ctx.input(1).to_int64_vector();
    if (static_cast<int64_t>(reps.size()) != rank) return false;
    // Output dim d as (reps[d], x[d]): the engine sees rank 2r, repeats read index 0.
    in->clear();
    out->clear();
    maps_.resize(static_cast<size_t>(2 * rank));
    for (int64_t d = 0; d < rank; ++d) {
      if (reps[static_cast<size_t>(d)] < 0) return false;
      in->push_back(1);
      in->push_back(x.dim(d));
      out->push_back(reps[static_cast<size_t>(d)]);
      out->push_back(x.dim(d));
      maps_[static_cast<size_t>(2 * d)].assign(static_cast<size_t>(reps[static_cast<size_t>(d)]),
                                               0);
      identity_map(maps_[static_cast<size_t>(2 * d + 1)], x.dim(d));
    }
    return true;
  }

  Expected<bool> build_expand(KernelContext& ctx, const Tensor& x, Shape* in, Shape* out) {
    const int64_t rank = x.rank();
    const ir::ValueType& t = ctx.output_type(0);
    if (!t.is_static() || static_cast<int64_t>(t.dims.size()) < rank) return false;
    const size_t r = t.dims.size();
    in->assign(r - static_cast<size_t>(rank), 1);
    in->insert(in->end(), x.shape().begin(), x.shape().end());
    out->assign(t.dims.begin(), t.dims.end());
    maps_.resize(r);
    for (size_t d = 0; d < r; ++d) {
      if ((*in)[d] == (*out)[d]) {
        identity_map(maps_[d], (*out)[d]);
      } else if ((*in)[d] == 1) {
        maps_[d].assign(static_cast<size_t>((*out)[d]), 0);
      } else {
        return false;
      }
    }
    return true;
  }

  // Gather: data dims before the axis, the indices flattened, the dims after it.
  Expected<bool> build_gather(KernelContext& ctx, const Tensor& x, Shape* out) {
    const int64_t rank = x.rank();
    PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
    if (axis < -rank || axis >= rank || !ctx.has_input(1)) return false;
    if (axis < 0) axis += rank;
    const Tensor& idx = ctx.input(1);
    if (idx.dtype() != DType::kInt64 && idx.dtype() != DType::kInt32) return false;
    const int64_t dim = x.dim(axis);
    auto& m = maps_[static_cast<size_t>(axis)];
    m.resize(static_cast<size_t>(idx.numel()));
    for (int64_t i = 0; i < idx.numel(); ++i) {
      const int64_t v = idx.dtype() == DType::kInt64 ? idx.data<int64_t>()[i]
                                                     : idx.data<int32_t>()[i];
      if (v < -dim || v >= dim) return false;
      m[static_cast<size_t>(i)] = v < 0 ? v + dim : v;
    }
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis) identity_map(maps_[static_cast<size_t>(d)], x.dim(d));
    (*out)[static_cast<size_t>(axis)] = idx.numel();
    return true;
  }

  std::string op_, name_;
  Maps maps_;
  std::vector<uint8_t> fill_;
  IndexMapCopy copy_;
};

// Reshape, Flatten, Squeeze, Unsqueeze, Identity: the output is the input's data under the
// inferred shape (a view; the executor copies it only where the memory plan gave the output
// a block of its own).
class ViewKernel : public PreparedKernel {
 public:
  std::string name() const override { return "cpu/view"; }
  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const ir::ValueType& t = ctx.output_type(0);
    if (!ctx.input_value(0).is_tensor() || !t.is_static()) return run_reference(ctx);
    auto n = checked_product(t.dims);
    if (!n || *n != x.numel()) return run_reference(ctx);  // it reports the error
    ctx.set_output(0, x.reshaped(t.dims));
    return Status::ok();
  }
};

bool in_onnx_domain(const ir::Node& node) {
  return node.domain.empty() || node.domain == "ai.onnx";
}

}  // namespace

bool claims_map_copy(const ir::Node& node) {
  const std::string& t = node.op_type;
  return in_onnx_domain(node) &&
         (t == "Slice" || t == "Pad" || t == "Tile" || t == "Expand" || t == "Gather");
}

bool claims_view(const ir::Node& node) {
  const std::string& t = node.op_type;
  return in_onnx_domain(node) && (t == "Reshape" || t == "Flatten" || t == "Squeeze" ||
                                  t == "Unsqueeze" || t == "Identity");
}

Expected<std::unique_ptr<PreparedKernel>> prepare_view(const ir::Node& node) {
  return std::unique_ptr<PreparedKernel>(new ViewKernel());
}

Expected<std::unique_ptr<PreparedKernel>> prepare_map_copy(const ir::Node& node) {
  if (!claims_map_copy(node)) return unsupported(node.describe() + ": not a map copy");
  return std::unique_ptr<PreparedKernel>(new MapCopyKernel(node.op_type));
}

}  // namespace peregrine::cpu
