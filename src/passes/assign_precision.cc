#include "passes/assign_precision.h"

#include <algorithm>
#include <set>

namespace peregrine::passes {

namespace {

// Ops whose CPU kernels have a bf16 path (kernels/conv.cc, conv_nd.cc, conv_transpose.cc,
// matmul.cc, attention.cc). A kernel that meets a shape its bf16 path does not take (a
// depthwise conv) computes in float32 and says so in its name.
constexpr const char* kReducedPrecisionOps[] = {
    "Conv", "peregrine.FusedConv", "ConvTranspose",       "MatMul", "peregrine.FusedMatMul",
    "Gemm", "peregrine.FusedGemm", "peregrine.Attention",
};

std::string qualified_op(const ir::Node& n) {
  return (n.domain.empty() || n.domain == "ai.onnx" ? "" : n.domain + ".") + n.op_type;
}

void collect_names(const ir::Graph& g, std::set<std::string>* names) {
  for (const auto& n : g.nodes) {
    names->insert(n->name);
    names->insert(qualified_op(*n));
    names->insert(n->op_type);
    for (const auto& [key, a] : n->attributes) {
      if (a.g) collect_names(*a.g, names);
      for (const auto& sg : a.graphs) collect_names(*sg, names);
    }
  }
}

int assign(ir::Graph& g, Precision precision, const std::set<std::string>& keep) {
  int count = 0;
  for (auto& n : g.nodes) {
    const std::string op = qualified_op(*n);
    const bool eligible = std::any_of(std::begin(kReducedPrecisionOps),
                                      std::end(kReducedPrecisionOps),
                                      [&](const char* o) { return op == o; });
    const bool kept = keep.count(n->name) || keep.count(op) || keep.count(n->op_type);
    n->precision = eligible && !kept ? precision : Precision::kFloat32;
    count += n->precision != Precision::kFloat32;
    for (auto& [key, a] : n->attributes) {
      if (a.g) count += assign(*a.g, precision, keep);
      for (auto& sg : a.graphs) count += assign(*sg, precision, keep);
    }
  }
  return count;
}

}  // namespace

Expected<int> assign_precision(ir::Graph& graph, Precision precision,
                               const std::vector<std::string>& keep_fp32) {
  std::set<std::string> names;
  collect_names(graph, &names);
  for (const std::string& k : keep_fp32)
    if (!names.count(k))
      return invalid_input("--keep-fp32 '" + k +
                           "' names no node and no op type of the optimized graph (see "
                           "'peregrine inspect --kernels' for node names)");
  return assign(graph, precision, std::set<std::string>(keep_fp32.begin(), keep_fp32.end()));
}

}  // namespace peregrine::passes
