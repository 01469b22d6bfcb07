// CPU kernels of the float32 elementwise ops: unary maps (Relu, Sigmoid, Tanh, Erf, Exp, Gelu
// with approximate = none | tanh) and Add / Sub / Mul / Div with multidirectional broadcasting.
//
// Broadcasting (kernels/broadcast_rows.h): the innermost merged group of dims is one
// micro-kernel call per row, each operand's step 1 when full and 0 when broadcast.
// In-place (output == an operand of the output's shape, see planner/in_place.cc) is safe: the
// micro-kernels read element i before writing it, and a full operand's row offset equals the
// output's.
#include <algorithm>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/broadcast_rows.h"
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
    // Transcendental maps cost many times a copy: smaller tasks balance as well.
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
    const Shape* shapes[] = {&a.shape(), &b.shape()};
    Broadcast g;
    if (!group_broadcast(shapes, 2, y.shape(), &g)) return run_reference(ctx);
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    float* py = y.data<float>();
    for_each_row(g, y.numel(), ctx.num_threads(),
                 [&](const int64_t* off, int64_t yo, int64_t len, const int64_t* step) {
                   uk_.binary(op_, pa + off[0], static_cast<size_t>(step[0]), pb + off[1],
                              static_cast<size_t>(step[1]), py + yo, static_cast<size_t>(len));
                 });
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
