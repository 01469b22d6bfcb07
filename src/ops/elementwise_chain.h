// peregrine.ElementwiseChain: a straight-line program of float32 elementwise
// steps run over its inputs in one pass over memory (written by the
// elementwise_chain_fusion pass).
//
//   acc = X0; for each step s: acc = op_s(acc) or op_s(acc, operand_s); Y = acc
//
// Attributes, one entry per step:
//   ops      (strings) Relu Sigmoid Tanh Exp Neg Abs Sqrt Erf Clip LeakyRelu
//   HardSwish |
//                      Add Sub Mul Div Max Min
//   operands (ints)    binary steps: the node input read (>= 1, a tensor shaped
//   exactly like
//                      X0), or -1 to read the immediate params[2s]; unary
//                      steps: -1
//   swapped  (ints)    binary steps: 1 computes operand op acc (Sub, Div with
//   acc second) params   (floats, two per step) immediate | LeakyRelu alpha |
//   Clip min, max
// Every input has X0's shape; Y has it too. Each step rounds to float32 exactly
// as the ONNX op it came from does on the reference backend (chain_unary /
// chain_binary below), so the fused node computes bit for bit what the unfused
// ops did there.
#pragma once

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ops/op_schema.h"

namespace peregrine {

enum class ChainOp {
  kRelu,
  kSigmoid,
  kTanh,
  kExp,
  kNeg,
  kAbs,
  kSqrt,
  kErf,
  kClip,
  kLeakyRelu,
  kHardSwish,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMax,
  kMin,
};

struct ChainStep {
  ChainOp op;
  int operand = -1;      // binary: node input index (>= 1), or -1 for the immediate p0
  bool swapped = false;  // binary: operand op acc
  float p0 = 0, p1 = 0;  // immediate | LeakyRelu alpha | Clip min, max
};

inline bool chain_op_is_binary(ChainOp op) { return op >= ChainOp::kAdd; }
const char *chain_op_name(ChainOp op);
std::optional<ChainOp> chain_op_from_name(const std::string &name);

// The node's program, validated against its input count.
Expected<std::vector<ChainStep>> read_chain_program(const ir::Node &node);
// Schema inference: Y = X0's type; every input float32 and shaped like X0.
Status infer_elementwise_chain(InferContext &ctx);
OpCost elementwise_chain_cost(const ir::Node &node, const std::vector<ir::ValueType> &in,
                              const std::vector<ir::ValueType> &out);

// One unary step on one element, rounded as the reference kernel of the ONNX op
// rounds: Relu, Neg, Abs and Clip in float; the others computed in double and
// rounded once.
inline float chain_unary(ChainOp op, float x, float p0, float p1) {
  const double d = x;
  switch (op) {
    case ChainOp::kRelu:
      return x < 0 ? 0.0f : x;  // NaN passes through
    case ChainOp::kNeg:
      return -x;
    case ChainOp::kAbs:
      return std::fabs(x);
    case ChainOp::kClip: {
      const float v = x < p0 ? p0 : x;
      return v > p1 ? p1 : v;
    }
    case ChainOp::kSigmoid:
      if (d >= 0) return static_cast<float>(1.0 / (1.0 + std::exp(-d)));
      return static_cast<float>(std::exp(d) / (1.0 + std::exp(d)));
    case ChainOp::kTanh:
      return static_cast<float>(std::tanh(d));
    case ChainOp::kExp:
      return static_cast<float>(std::exp(d));
    case ChainOp::kSqrt:
      return static_cast<float>(std::sqrt(d));
    case ChainOp::kErf:
      return static_cast<float>(std::erf(d));
    case ChainOp::kLeakyRelu:
      return static_cast<float>(d < 0 ? static_cast<double>(p0) * d : d);
    case ChainOp::kHardSwish:
      return static_cast<float>(d * std::max(0.0, std::min(1.0, d / 6.0 + 0.5)));
    default:
      return x;
  }
}

// One binary step a op b in float; Max / Min propagate NaN like numpy's maximum
// / minimum.
inline float chain_binary(ChainOp op, float a, float b) {
  switch (op) {
    case ChainOp::kAdd:
      return a + b;
    case ChainOp::kSub:
      return a - b;
    case ChainOp::kMul:
      return a * b;
    case ChainOp::kDiv:
      return a / b;
    case ChainOp::kMax:
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
      return a < b ? b : a;
    case ChainOp::kMin:
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
      return b < a ? b : a;
    default:
      return a;
  }
}

}  // namespace peregrine
