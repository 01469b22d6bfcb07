// matmul_transposed_weight
//   Matches:  MatMul(A, Transpose(W, perm=[1, 0])) with W a 2-D float32 initializer: the
//             tied output projection of language models (lm_head = embedding^T), too large
//             for constant folding to transpose once.
//   Produces: Gemm(A, W, transB=1) for a 2-D A; for a higher-rank A,
//             Reshape(A, [-1, K]) -> Gemm(., W, transB=1) -> Reshape(., MatMul's shape).
//             The Gemm kernel packs W once, read transposed, so no per-run transpose and no
//             second copy of W remains; dead_code_elimination drops the unread Transpose.
//   Preconditions: float32; A of rank >= 2 with a static MatMul output shape; default-domain
//             opset >= 11 (Gemm without C). A Transpose of an activation is left alone.
#include "ir/attributes.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

struct Match {
  ir::Node* matmul;
  std::string weight;  // W, the Transpose's input
};

std::optional<Match> match(const ir::Graph& g, const GraphIndex& index, ir::Node& mm) {
  if (!is_op(&mm, "MatMul") || mm.inputs.size() != 2 || mm.opset < 11) return std::nullopt;
  ir::Node* t = index.producer(mm.inputs[1]);
  if (!is_op(t, "Transpose") || t->inputs.size() != 1) return std::nullopt;
  const Tensor* w = constant_of(g, t->inputs[0]);
  if (!w || w->rank() != 2 || w->dtype() != DType::kFloat32) return std::nullopt;
  // Without perm a 2-D Transpose swaps the two axes as well.
  auto perm = ir::AttrView(*t).get_ints("perm", {1, 0});
  if (!perm.is_ok() || *perm != std::vector<int64_t>{1, 0}) return std::nullopt;
  const ir::ValueType* a = float32_type(g, mm.inputs[0]);
  const ir::ValueType* out = float32_type(g, mm.outputs[0]);
  if (!a || !out || !out->is_static() || a->rank() < 2 || out->rank() != a->rank())
    return std::nullopt;
  if (!index.only_local_uses(mm.inputs[1])) return std::nullopt;
  return Match{&mm, t->inputs[0]};
}

void rewrite(ir::Graph& g, const Match& m) {
  ir::Node& mm = *m.matmul;
  const std::string a = mm.inputs[0], y = mm.outputs[0], name = mm.name;
  const Shape out_dims = g.find_value(y)->type.dims;
  const Tensor& w = *constant_of(g, m.weight);
  const int64_t k = w.dim(1), n = w.dim(0);
  std::string gemm_in = a, gemm_out = y;
  if (out_dims.size() > 2) {
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < out_dims.size(); ++i) rows *= out_dims[i];
    gemm_in = fresh_name(g, a + "_rows");
    g.value(gemm_in).type = ir::ValueType::tensor(DType::kFloat32, Shape{rows, k});
    add_node(g, "Reshape",
             {a, add_initializer(g, name + "_rows_shape",
                                 Tensor::from_vector<int64_t>({-1, k}, Shape{2}))},
             {gemm_in}, name + "_rows");
    gemm_out = fresh_name(g, y + "_rows");
    g.value(gemm_out).type = ir::ValueType::tensor(DType::kFloat32, Shape{rows, n});
    const int64_t rank = static_cast<int64_t>(out_dims.size());
    add_node(g, "Reshape",
             {gemm_out, add_initializer(g, name + "_out_shape",
                                        Tensor::from_vector<int64_t>(out_dims, Shape{rank}))},
             {y}, name + "_unrows");
  }
  ir::Node* gemm = add_node(g, "Gemm", {gemm_in, m.weight}, {gemm_out}, name);
  gemm->attributes["transB"] = int_attr("transB", 1);
  remove_nodes(g, {&mm});
}

class MatMulTransposedWeight : public Pass {
 public:
  const char* name() const override { return "matmul_transposed_weight"; }
  Expected<bool> run(ir::Graph& g) override {
    int n = rewrite_each_match(g, match, rewrite);
    count_rewrite(n);
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_matmul_transposed_weight() {
  return std::make_unique<MatMulTransposedWeight>();
}

}  // namespace peregrine::passes
