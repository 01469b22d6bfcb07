// matmul_add_to_gemm
//   Matches:  Add(MatMul(A, W), C) (either Add operand order) with A a 2-D tensor, W a
//             2-D initializer and C an initializer of shape (N), (1, N) or (M, N).
//   Produces: Gemm(A, W, C) writing the Add output.
//   Preconditions: float32; the MatMul output is read only by the Add and is not a
//             graph output; default-domain opset >= 11 (Gemm with optional C).
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

struct Match {
  ir::Node* matmul;
  ir::Node* add;
  std::string bias;
};

std::optional<Match> match(const ir::Graph& g, const GraphIndex& index, ir::Node& add) {
  if (!is_op(&add, "Add") || add.inputs.size() != 2 || add.opset < 11) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    ir::Node* mm = index.producer(add.inputs[static_cast<size_t>(side)]);
    const std::string& bias = add.inputs[static_cast<size_t>(1 - side)];
    if (!is_op(mm, "MatMul") || index.sole_consumer(mm->outputs[0]) != &add) continue;
    const ir::ValueType* a = float32_type(g, mm->inputs[0]);
    const ir::ValueType* out = float32_type(g, mm->outputs[0]);
    const Tensor* w = constant_of(g, mm->inputs[1]);
    const Tensor* c = constant_of(g, bias);
    if (!a || !out || !out->is_static() || out->dims.size() != 2 || a->rank() != 2 || !w ||
        w->rank() != 2 || w->dtype() != DType::kFloat32 || !c || c->dtype() != DType::kFloat32 ||
        !is_float32(g, add.outputs[0]))
      continue;
    const int64_t m = out->dims[0], n = out->dims[1];
    const Shape& cs = c->shape();
    bool ok = (cs == Shape{n}) || (cs == Shape{1, n}) || (cs == Shape{m, n});
    if (!ok) continue;
    return Match{mm, &add, bias};
  }
  return std::nullopt;
}

class MatMulAddToGemm : public Pass {
 public:
  const char* name() const override { return "matmul_add_to_gemm"; }
  Expected<bool> run(ir::Graph& g) override {
    auto to_gemm = [](ir::Graph& graph, const auto& m) {
      add_node(graph, "Gemm", {m.matmul->inputs[0], m.matmul->inputs[1], m.bias},
               {m.add->outputs[0]}, m.matmul->name);
      graph.values.erase(m.matmul->outputs[0]);
      remove_nodes(graph, {m.matmul, m.add});
    };
    int n = rewrite_each_match(g, match, to_gemm);
    count_rewrite(n);
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_matmul_add_to_gemm() { return std::make_unique<MatMulAddToGemm>(); }

}  // namespace peregrine::passes
