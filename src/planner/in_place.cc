#include "planner/in_place.h"

#include <set>
#include <string>

namespace peregrine::planner {

namespace {

bool in_onnx_domain(const ir::Node& node) {
  return node.domain.empty() || node.domain == "ai.onnx";
}

}  // namespace

bool may_run_in_place(const ir::Node& node, size_t k) {
  if (!in_onnx_domain(node) || node.outputs.size() != 1) return false;
  // Unary maps: out[i] = f(in[i]) (reference map_unary / unary_float_op loops).
  static const std::set<std::string> kUnary = {
      "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Abs", "Neg", "Sqrt", "Reciprocal", "Erf",
      "Floor", "Ceil", "LeakyRelu", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish",
      "Softplus", "Softsign", "ThresholdedRelu", "Sin", "Cos"};
  // Binary maps with broadcasting: out[i] = f(a[ia(i)], b[ib(i)]); safe over an operand
  // whose shape equals the output's (then its index is i).
  static const std::set<std::string> kBinary = {"Add", "Sub", "Mul", "Div"};
  if (kUnary.count(node.op_type)) return k == 0;
  if (kBinary.count(node.op_type)) return k < 2;
  return false;
}

bool is_view_of_input(const ir::Node& node) {
  if (!in_onnx_domain(node) || node.outputs.size() != 1 || node.inputs.empty()) return false;
  static const std::set<std::string> kViews = {"Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                               "Identity"};
  return kViews.count(node.op_type) > 0;
}

}  // namespace peregrine::planner
