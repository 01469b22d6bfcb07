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

int64_t concat_slice_axis(const ir::Node& node, const Shape& out_dims) {
  if (!in_onnx_domain(node) || node.op_type != "Concat" || node.outputs.size() != 1) return -1;
  const ir::Attribute* a = node.attribute("axis");
  if (!a || a->type != ir::Attribute::Type::kInt) return -1;
  const int64_t rank = static_cast<int64_t>(out_dims.size());
  const int64_t axis = a->i < 0 ? a->i + rank : a->i;
  if (axis < 0 || axis >= rank) return -1;
  for (int64_t d = 0; d < axis; ++d)
    if (out_dims[static_cast<size_t>(d)] != 1) return -1;
  return axis;
}

}  // namespace peregrine::planner
