// CPU kernel of peregrine.ElementwiseChain (ops/elementwise_chain.h): the
// program runs over blocks of kBlock elements. A block of Y is the accumulator:
// the first step reads X0 and writes it, every later step rewrites it in place,
// so it stays in L1 (4 KB) for the whole program and X0, the operands and Y
// each cross memory once.
//   Steps on the vector micro-kernels (ukernels/f32_vector_ukernels.h): Relu
//   Sigmoid Tanh Exp Erf, and Add Sub Mul Div against a tensor block (step 1)
//   or the immediate (step 0). The rest (Neg Abs Sqrt Clip LeakyRelu HardSwish
//   Max Min) are plain loops over the block with the op fixed at compile time,
//   which the compiler vectorizes for the baseline ISA.
// Inputs not float32 or not shaped like X0 go to the reference (which reports
// the error).
#include "ops/elementwise_chain.h"

#include <algorithm>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/vector_ops.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"

namespace peregrine::cpu {

namespace {

constexpr int64_t kBlock = 1024;

template <typename F>
inline void map_block(const float *x, float *y, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

template <typename F>
inline void map_block2(const float *a, size_t a_step, const float *b, size_t b_step, float *y,
                       size_t n, F f) {
  for (size_t i = 0; i < n; ++i) y[i] = f(a[i * a_step], b[i * b_step]);
}

// acc[0, n) = step(src[0, n)); `operand` is the block of the step's tensor
// operand (or null).
void run_step(const VectorUkernels &uk, const ChainStep &s, const float *src, const float *operand,
              float *acc, size_t n) {
  const float p0 = s.p0, p1 = s.p1;
  switch (s.op) {
    case ChainOp::kRelu:
      return uk.unary(UnaryOp::kRelu, src, acc, n);
    case ChainOp::kSigmoid:
      return uk.unary(UnaryOp::kSigmoid, src, acc, n);
    case ChainOp::kTanh:
      return uk.unary(UnaryOp::kTanh, src, acc, n);
    case ChainOp::kExp:
      return uk.unary(UnaryOp::kExp, src, acc, n);
    case ChainOp::kErf:
      return uk.unary(UnaryOp::kErf, src, acc, n);
    case ChainOp::kNeg:
      return map_block(src, acc, n, [](float v) { return -v; });
    case ChainOp::kAbs:
      return map_block(src, acc, n, [](float v) { return std::fabs(v); });
    case ChainOp::kSqrt:
      return map_block(src, acc, n, [](float v) { return std::sqrt(v); });
    case ChainOp::kClip:
      return map_block(src, acc, n, [p0, p1](float v) {
        v = v < p0 ? p0 : v;
        return v > p1 ? p1 : v;
      });
    case ChainOp::kLeakyRelu:  // float product == the double product rounded once
      return map_block(src, acc, n, [p0](float v) { return v < 0 ? p0 * v : v; });
    case ChainOp::kHardSwish:
      return map_block(src, acc, n, [](float v) {
        return v * std::max(0.0f, std::min(1.0f, v * (1.0f / 6.0f) + 0.5f));
      });
    default:
      break;
  }
  // Binary: acc op other, or other op acc when swapped; other is the operand
  // block or p0.
  const float *other = operand ? operand : &s.p0;
  const size_t other_step = operand ? 1 : 0;
  const float *a = s.swapped ? other : src;
  const float *b = s.swapped ? src : other;
  const size_t a_step = s.swapped ? other_step : 1, b_step = s.swapped ? 1 : other_step;
  switch (s.op) {
    case ChainOp::kAdd:
      return uk.binary(BinaryOp::kAdd, a, a_step, b, b_step, acc, n);
    case ChainOp::kSub:
      return uk.binary(BinaryOp::kSub, a, a_step, b, b_step, acc, n);
    case ChainOp::kMul:
      return uk.binary(BinaryOp::kMul, a, a_step, b, b_step, acc, n);
    case ChainOp::kDiv:
      return uk.binary(BinaryOp::kDiv, a, a_step, b, b_step, acc, n);
    case ChainOp::kMax:
      return map_block2(a, a_step, b, b_step, acc, n,
                        [](float p, float q) { return chain_binary(ChainOp::kMax, p, q); });
    case ChainOp::kMin:
      return map_block2(a, a_step, b, b_step, acc, n,
                        [](float p, float q) { return chain_binary(ChainOp::kMin, p, q); });
    default:
      return;
  }
}

class ElementwiseChainKernel : public PreparedKernel {
 public:
  ElementwiseChainKernel(std::vector<ChainStep> steps, const VectorUkernels &uk)
      : steps_(std::move(steps)), uk_(uk) {}
  std::string name() const override {
    return std::string("cpu/elementwise-chain-") + isa_name(uk_.isa);
  }

  Status run(KernelContext &ctx) override {
    const Tensor &x0 = ctx.input(0);
    std::vector<const float *> in(ctx.num_inputs());
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor &t = ctx.input(i);
      if (t.dtype() != DType::kFloat32 || t.shape() != x0.shape()) return run_reference(ctx);
      in[i] = t.data<float>();
    }
    Tensor &y = ctx.output_for_overwrite(0);
    const int64_t n = y.numel();
    if (n == 0) return Status::ok();
    float *py = y.data<float>();
    // Several steps per element: a quarter of the streaming task size balances
    // threads.
    const int64_t chunk = kElementsPerTask / 4;
    const int64_t tasks = (n + chunk - 1) / chunk;
    auto task = [&](int64_t t, int) {
      const int64_t end = std::min(n, (t + 1) * chunk);
      for (int64_t i0 = t * chunk; i0 < end; i0 += kBlock) {
        const size_t len = static_cast<size_t>(std::min(kBlock, end - i0));
        float *acc = py + i0;
        const float *src = in[0] + i0;
        for (const ChainStep &s : steps_) {
          const float *operand = s.operand > 0 ? in[static_cast<size_t>(s.operand)] + i0 : nullptr;
          run_step(uk_, s, src, operand, acc, len);
          src = acc;
        }
      }
    };
    cpu_thread_pool().parallel_for(tasks, ctx.num_threads(), task);
    return Status::ok();
  }

 private:
  std::vector<ChainStep> steps_;
  const VectorUkernels &uk_;
};

}  // namespace

bool claims_elementwise_chain(const ir::Node &node) {
  return node.domain == kPeregrineDomain && node.op_type == "ElementwiseChain";
}

Expected<std::unique_ptr<PreparedKernel>> prepare_elementwise_chain(const ir::Node &node) {
  PG_ASSIGN_OR_RETURN(std::vector<ChainStep> steps, read_chain_program(node));
  return std::unique_ptr<PreparedKernel>(
      new ElementwiseChainKernel(std::move(steps), vector_ukernels()));
}

}  // namespace peregrine::cpu
