// CPU kernels of the float32 reductions: ReduceSum / Mean / Max / Min / Prod / L1 / L2 /
// SumSquare / LogSum over any axes, keepdims or not, axes as attribute or input.
//
// The input's dims are merged into alternating groups of reduced and kept dims (size-1 dims
// dropped). Then one of two loops, both on the micro-kernels of ukernels/f32_reduce_ukernels.h:
//   innermost group reduced (ReduceMean over H, W; LayerNorm-style last-axis sums): every
//     output is the fold of contiguous rows, one row call per outer reduced index;
//   innermost group kept (a reduction over C of NCHW, over the batch): every output block of
//     that group's length accumulates one input row per reduced index, vectorized across it.
// Tasks are runs of outputs (first loop) or pieces of output blocks (second). Sums fold in
// float over 64 lanes (the reference folds in double); the post step (divide, sqrt, log) is
// applied per output. Other dtypes, LogSumExp and empty inputs run the reference kernel.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/vector_ops.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/ukernels/f32_reduce_ukernels.h"

namespace peregrine::cpu {

namespace {

enum class Post { kNone, kMean, kSqrt, kLog };

struct ReduceKind {
  const char* op_type;
  ReduceOp op;
  Post post;
};

constexpr ReduceKind kReduceKinds[] = {
    {"ReduceSum", ReduceOp::kSum, Post::kNone},
    {"ReduceMean", ReduceOp::kSum, Post::kMean},
    {"ReduceMax", ReduceOp::kMax, Post::kNone},
    {"ReduceMin", ReduceOp::kMin, Post::kNone},
    {"ReduceProd", ReduceOp::kProd, Post::kNone},
    {"ReduceL1", ReduceOp::kSumAbs, Post::kNone},
    {"ReduceL2", ReduceOp::kSumSquare, Post::kSqrt},
    {"ReduceSumSquare", ReduceOp::kSumSquare, Post::kNone},
    {"ReduceLogSum", ReduceOp::kSum, Post::kLog},
};

const ReduceKind* reduce_kind_of(const ir::Node& node) {
  if (!node.domain.empty() && node.domain != "ai.onnx") return nullptr;
  for (const ReduceKind& k : kReduceKinds)
    if (node.op_type == k.op_type) return &k;
  return nullptr;
}

// The input's dims as alternating reduced / kept groups, outermost first, with element strides.
struct Groups {
  std::vector<int64_t> size, stride;
  std::vector<bool> reduced;
};

Groups group_dims(const Shape& shape, const std::vector<bool>& reduced) {
  Groups g;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!g.size.empty() && g.reduced.back() == reduced[d]) {
      g.size.back() *= shape[d];
    } else {
      g.size.push_back(shape[d]);
      g.reduced.push_back(reduced[d]);
    }
  }
  g.stride.assign(g.size.size(), 1);
  for (size_t i = g.size.size(); i-- > 1;) g.stride[i - 1] = g.stride[i] * g.size[i];
  return g;
}

// Offsets of every index combination of the groups selected by `pick` (odometer order,
// innermost fastest), skipping group `skip`.
std::vector<int64_t> offsets_of(const Groups& g, bool pick, size_t skip) {
  std::vector<int64_t> out{0};
  for (size_t i = 0; i < g.size.size(); ++i) {
    if (g.reduced[i] != pick || i == skip) continue;
    std::vector<int64_t> next;
    next.reserve(out.size() * static_cast<size_t>(g.size[i]));
    for (int64_t base : out)
      for (int64_t k = 0; k < g.size[i]; ++k) next.push_back(base + k * g.stride[i]);
    out = std::move(next);
  }
  return out;
}

class ReduceKernel : public PreparedKernel {
 public:
  ReduceKernel(const ReduceKind& kind, const ReduceUkernels& uk) : kind_(kind), uk_(uk) {}
  std::string name() const override { return std::string("cpu/reduce-") + isa_name(uk_.isa); }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kFloat32 || x.numel() == 0) return run_reference(ctx);
    PG_ASSIGN_OR_RETURN(int64_t noop, ctx.attrs().get_int("noop_with_empty_axes", 0));
    const int axes_input_since = ctx.node().op_type == "ReduceSum" ? 13 : 18;
    std::vector<int64_t> axes;
    if (ctx.opset() >= axes_input_since) {
      if (ctx.has_input(1)) axes = ctx.input(1).to_int64_vector();
    } else {
      PG_ASSIGN_OR_RETURN(axes, ctx.attrs().get_ints("axes", {}));
    }
    const int64_t rank = x.rank();
    std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty() && noop == 0);
    for (int64_t axis : axes) {
      if (axis < -rank || axis >= rank) return run_reference(ctx);  // it reports the error
      reduced[static_cast<size_t>(axis < 0 ? axis + rank : axis)] = true;
    }
    if (x.shape() != shape_ || reduced != reduced_) plan(x.shape(), reduced);
    Tensor& y = ctx.output_for_overwrite(0);
    if (y.numel() != static_cast<int64_t>(out_base_.size()) * inner_kept_)
      return internal_error(ctx.node().describe() + ": reduction plan does not match the output");
    const float* px = x.data<float>();
    float* py = y.data<float>();
    const float count = static_cast<float>(x.numel() / std::max<int64_t>(1, y.numel()));
    auto post = [&](float v) {
      switch (kind_.post) {
        case Post::kMean: return v / count;
        case Post::kSqrt: return std::sqrt(v);
        case Post::kLog: return std::log(v);
        case Post::kNone: break;
      }
      return v;
    };
    const ReduceOp op = kind_.op;
    const float identity = reduce_identity(op);
    const int64_t outs = static_cast<int64_t>(out_base_.size());
    if (inner_kept_ == 1) {
      // Every output folds rows of inner_reduced_ contiguous floats.
      const int64_t work = static_cast<int64_t>(red_base_.size()) * inner_reduced_;
      const int64_t per_task = std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(1, work));
      const int64_t tasks = (outs + per_task - 1) / per_task;
      cpu_thread_pool().parallel_for(tasks, ctx.num_threads(), [&](int64_t t, int) {
        const int64_t o1 = std::min(outs, (t + 1) * per_task);
        for (int64_t o = t * per_task; o < o1; ++o) {
          const float* base = px + out_base_[static_cast<size_t>(o)];
          float acc = identity;
          for (int64_t r : red_base_) {
            const float part = uk_.row(op, base + r, static_cast<size_t>(inner_reduced_));
            acc = fold(op, acc, part);
          }
          py[o] = post(acc);
        }
      });
      return Status::ok();
    }
    // Every output block of inner_kept_ floats accumulates one row per reduced index.
    const int64_t pieces = std::max<int64_t>(1, inner_kept_ / kElementsPerTask);
    const int64_t piece = (inner_kept_ + pieces - 1) / pieces;
    cpu_thread_pool().parallel_for(outs * pieces, ctx.num_threads(), [&](int64_t t, int) {
      const int64_t o = t / pieces, j0 = (t % pieces) * piece;
      const int64_t len = std::min(piece, inner_kept_ - j0);
      float* acc = py + o * inner_kept_ + j0;
      std::fill(acc, acc + len, identity);
      const float* base = px + out_base_[static_cast<size_t>(o)] + j0;
      for (int64_t r : red_base_) uk_.accumulate(op, base + r, acc, static_cast<size_t>(len));
      if (kind_.post != Post::kNone)
        for (int64_t j = 0; j < len; ++j) acc[j] = post(acc[j]);
    });
    return Status::ok();
  }

 private:
  static float fold(ReduceOp op, float a, float v) {
    switch (op) {
      case ReduceOp::kMax: return (v > a || v != v) ? v : a;
      case ReduceOp::kMin: return (v < a || v != v) ? v : a;
      case ReduceOp::kProd: return a * v;
      default: return a + v;
    }
  }

  // The loops' offsets for one input shape and set of reduced axes.
  void plan(const Shape& shape, const std::vector<bool>& reduced) {
    shape_ = shape;
    reduced_ = reduced;
    const Groups g = group_dims(shape, reduced);
    const size_t last = g.size.size() - 1;  // numel > 0 and not every dim 1, or no groups
    inner_kept_ = inner_reduced_ = 1;
    size_t skip = g.size.size();
    if (!g.size.empty()) {
      (g.reduced[last] ? inner_reduced_ : inner_kept_) = g.size[last];
      skip = last;
    }
    red_base_ = offsets_of(g, true, g.reduced.empty() || !g.reduced[last] ? g.size.size() : skip);
    out_base_ = offsets_of(g, false, g.reduced.empty() || g.reduced[last] ? g.size.size() : skip);
  }

  const ReduceKind& kind_;
  const ReduceUkernels& uk_;
  Shape shape_;
  std::vector<bool> reduced_;
  int64_t inner_reduced_ = 1, inner_kept_ = 1;
  std::vector<int64_t> red_base_, out_base_;  // offsets of the outer reduced / kept indices
};

}  // namespace

bool claims_reduce(const ir::Node& node) { return reduce_kind_of(node) != nullptr; }

Expected<std::unique_ptr<PreparedKernel>> prepare_reduce(const ir::Node& node) {
  const ReduceKind* kind = reduce_kind_of(node);
  if (!kind) return unsupported(node.describe() + ": not a reduction of the cpu backend");
  return std::unique_ptr<PreparedKernel>(new ReduceKernel(*kind, reduce_ukernels()));
}

}  // namespace peregrine::cpu
