// CPU kernels of the float32 elementwise ops: unary maps (Relu, Sigmoid, Tanh, Erf, Exp, Gelu
// with approximate = none | tanh) and Add / Sub / Mul / Div with multidirectional broadcasting.
//
// Broadcasting: output dims of size 1 are dropped and neighbouring dims where each operand is
// either full or broadcast in the same way are merged, leaving groups; the innermost group is
// one micro-kernel call (each operand's step 1 when full, 0 when broadcast), the outer groups
// an odometer over rows. So [N,C,H,W] + [C,1,1] is N*C rows of H*W against one scalar each,
// [B,S,D] + [D] is B*S rows of D against the same D, same shapes one row of everything.
// In-place (output == an operand of the output's shape, see planner/in_place.cc) is safe: the
// micro-kernels read element i before writing it, and a full operand's row offset equals the
// output's.
#include <algorithm>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/vector_ops.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"
#include "ops/op_schema.h"

namespace peregrine::cpu {

namespace {

bool in_onnx_domain(const ir::Node& node) {
  return node.domain.empty() || node.domain == "ai.onnx";
}

bool unary_op_of(const ir::Node& node, UnaryOp* op) {
  const bool onnx = in_onnx_domain(node);
  const std::string& t = node.op_type;
  if (t == "Gelu" && (onnx || node.domain == kPeregrineDomain)) {
    ir::AttrView attrs(node);
    auto approx = attrs.get_string("approximate", "none");
    if (!approx.is_ok()) return false;
    if (approx.value() != "none" && approx.value() != "tanh") return false;
    *op = approx.value() == "tanh" ? UnaryOp::kGeluTanh : UnaryOp::kGelu;
    return true;
  }
  if (!onnx) return false;
  if (t == "Relu") *op = UnaryOp::kRelu;
  else if (t == "Sigmoid") *op = UnaryOp::kSigmoid;
  else if (t == "Tanh") *op = UnaryOp::kTanh;
  else if (t == "Erf") *op = UnaryOp::kErf;
  else if (t == "Exp") *op = UnaryOp::kExp;
  else return false;
  return true;
}

bool binary_op_of(const ir::Node& node, BinaryOp* op) {
  if (!in_onnx_domain(node)) return false;
  const std::string& t = node.op_type;
  if (t == "Add") *op = BinaryOp::kAdd;
  else if (t == "Sub") *op = BinaryOp::kSub;
  else if (t == "Mul") *op = BinaryOp::kMul;
  else if (t == "Div") *op = BinaryOp::kDiv;
  else return false;
  return true;
}

class UnaryKernel : public PreparedKernel {
 public:
  UnaryKernel(UnaryOp op, const VectorUkernels& uk) : op_(op), uk_(uk) {}
  std::string name() const override {
    return std::string("cpu/unary-") + isa_name(uk_.isa);
  }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kFloat32) return run_reference(ctx);
    Tensor& y = ctx.output_for_overwrite(0);
    const int64_t n = x.numel();
    if (n == 0) return Status::ok();
    const float* px = x.data<float>();
    float* py = y.data<float>();
    // Transcendental maps cost ~10-20x a copy: smaller tasks balance as well.
    const int64_t chunk = op_ == UnaryOp::kRelu ? kElementsPerTask : kElementsPerTask / 4;
    const int64_t tasks = (n + chunk - 1) / chunk;
    auto task = [&](int64_t t, int) {
      const int64_t i0 = t * chunk, len = std::min(chunk, n - i0);
      uk_.unary(op_, px + i0, py + i0, static_cast<size_t>(len));
    };
    cpu_thread_pool().parallel_for(tasks, ctx.num_threads(), task);
    return Status::ok();
  }

 private:
  UnaryOp op_;
  const VectorUkernels& uk_;
};

// Up to this many merged broadcast groups; more (rare) go to the reference.
constexpr int kMaxGroups = 8;

struct BroadcastGroups {
  int count = 0;
  int64_t size[kMaxGroups];
  bool a_full[kMaxGroups], b_full[kMaxGroups];
  int64_t a_stride[kMaxGroups], b_stride[kMaxGroups];  // element strides of each group
};

// Groups of out's dims (see the file comment); false when a has no valid broadcast or too many
// groups. Requires numel(out) > 0.
bool group_dims(const Shape& a, const Shape& b, const Shape& out, BroadcastGroups* g) {
  const size_t r = out.size();
  if (a.size() > r || b.size() > r) return false;
  g->count = 0;
  for (size_t d = 0; d < r; ++d) {
    const int64_t od = out[d];
    const int64_t ad = d + a.size() >= r ? a[d + a.size() - r] : 1;
    const int64_t bd = d + b.size() >= r ? b[d + b.size() - r] : 1;
    if ((ad != od && ad != 1) || (bd != od && bd != 1)) return false;
    if (od == 1) continue;
    const bool fa = ad == od, fb = bd == od;
    if (g->count > 0 && g->a_full[g->count - 1] == fa && g->b_full[g->count - 1] == fb) {
      g->size[g->count - 1] *= od;
      continue;
    }
    if (g->count == kMaxGroups) return false;
    g->size[g->count] = od;
    g->a_full[g->count] = fa;
    g->b_full[g->count] = fb;
    ++g->count;
  }
  if (g->count == 0) {  // every dim 1: one element
    g->count = 1;
    g->size[0] = 1;
    g->a_full[0] = g->b_full[0] = true;
  }
  int64_t sa = 1, sb = 1;
  for (int i = g->count - 1; i >= 0; --i) {
    g->a_stride[i] = g->a_full[i] ? sa : 0;
    g->b_stride[i] = g->b_full[i] ? sb : 0;
    if (g->a_full[i]) sa *= g->size[i];
    if (g->b_full[i]) sb *= g->size[i];
  }
  return true;
}

class BinaryKernel : public PreparedKernel {
 public:
  BinaryKernel(BinaryOp op, const VectorUkernels& uk) : op_(op), uk_(uk) {}
  std::string name() const override {
    return std::string("cpu/binary-") + isa_name(uk_.isa);
  }

  Status run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.dtype() != DType::kFloat32 || b.dtype() != DType::kFloat32) return run_reference(ctx);
    Tensor& y = ctx.output_for_overwrite(0);
    if (y.numel() == 0) return Status::ok();
    BroadcastGroups g;
    if (!group_dims(a.shape(), b.shape(), y.shape(), &g)) return run_reference(ctx);
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    float* py = y.data<float>();
    const int last = g.count - 1;
    const int64_t inner = g.size[last];
    const int64_t rows = y.numel() / inner;
    const size_t a_step = g.a_full[last] ? 1 : 0, b_step = g.b_full[last] ? 1 : 0;
    // A task is a piece of one row (long rows) or a run of whole rows (short rows).
    const int64_t pieces = std::max<int64_t>(1, inner / kElementsPerTask);
    const int64_t piece = (inner + pieces - 1) / pieces;
    const int64_t rows_per_task = std::max<int64_t>(1, kElementsPerTask / inner);
    const int64_t tasks = pieces > 1 ? rows * pieces : (rows + rows_per_task - 1) / rows_per_task;
    auto row_offsets = [&](int64_t row, int64_t* oa, int64_t* ob) {
      *oa = 0;
      *ob = 0;
      for (int i = last - 1; i >= 0 && row > 0; --i) {
        const int64_t idx = row % g.size[i];
        row /= g.size[i];
        *oa += idx * g.a_stride[i];
        *ob += idx * g.b_stride[i];
      }
    };
    auto task = [&](int64_t t, int) {
      int64_t r0, r1, j0 = 0, len = inner;
      if (pieces > 1) {
        r0 = t / pieces;
        r1 = r0 + 1;
        j0 = (t % pieces) * piece;
        len = std::min(piece, inner - j0);
      } else {
        r0 = t * rows_per_task;
        r1 = std::min(rows, r0 + rows_per_task);
      }
      for (int64_t r = r0; r < r1; ++r) {
        int64_t oa, ob;
        row_offsets(r, &oa, &ob);
        uk_.binary(op_, pa + oa + j0 * static_cast<int64_t>(a_step), a_step,
                   pb + ob + j0 * static_cast<int64_t>(b_step), b_step, py + r * inner + j0,
                   static_cast<size_t>(len));
      }
    };
    cpu_thread_pool().parallel_for(tasks, ctx.num_threads(), task);
    return Status::ok();
  }

 private:
  BinaryOp op_;
  const VectorUkernels& uk_;
};

}  // namespace

bool claims_elementwise(const ir::Node& node) {
  UnaryOp u;
  BinaryOp b;
  return unary_op_of(node, &u) || binary_op_of(node, &b);
}

Expected<std::unique_ptr<PreparedKernel>> prepare_elementwise(const ir::Node& node) {
  const VectorUkernels& uk = vector_ukernels();
  UnaryOp u;
  BinaryOp b;
  if (unary_op_of(node, &u)) return std::unique_ptr<PreparedKernel>(new UnaryKernel(u, uk));
  if (binary_op_of(node, &b)) return std::unique_ptr<PreparedKernel>(new BinaryKernel(b, uk));
  return unsupported(node.describe() + ": not an elementwise op of the cpu backend");
}

}  // namespace peregrine::cpu
