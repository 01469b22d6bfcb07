// fold_constant_adds
//   Matches:  (a) Reshape(Add(Reshape(X, s1), C), s0) whose output has X's shape, C a float32
//             constant that broadcasts to s1 without growing it;
//             (b) Add(Add(X, C1), C2), C1 and C2 float32 constants, the result of X's shape.
//   Produces: (a) Add(X, C'), C' the constant C broadcast to s1 and read in X's shape;
//             (b) Add(X, C1 + C2), the two constants summed once (broadcast to each other).
//   Why:      windowed attention (Swin's shifted windows) adds its mask through a reshape that
//             splits the batch into windows, after a bias add; once both are one constant,
//             attention_fusion sees MatMul + mask and the scores never exist.
//   Preconditions: float32, static shapes; the intermediates are read only by the next node of
//             the pattern and are not graph outputs; the new constant has at most X's element
//             count and kMaxFoldedElements elements.
#include <algorithm>

#include "core/checked_math.h"
#include "ops/infer_helpers.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace peregrine::passes {

namespace {

constexpr int64_t kMaxFoldedElements = int64_t{1} << 22;  // 16 MiB of float32

struct Match {
  std::string x;
  Tensor constant;
  std::string output;
  std::vector<ir::Node*> nodes;
};

// The float32 constant `c` broadcast (numpy rules, right-aligned) to `shape`, which it must not
// grow.
Tensor broadcast_constant(const Tensor& c, const Shape& shape) {
  Tensor out = Tensor::zeros(DType::kFloat32, shape);
  const int64_t rank = static_cast<int64_t>(shape.size()), crank = c.rank();
  std::vector<int64_t> strides(static_cast<size_t>(rank), 0);
  int64_t stride = 1;
  for (int64_t i = crank - 1; i >= 0; --i) {
    if (c.dim(i) != 1) strides[static_cast<size_t>(rank - crank + i)] = stride;
    stride *= c.dim(i);
  }
  const float* src = c.data<float>();
  float* dst = out.data<float>();
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  for (int64_t e = 0; e < out.numel(); ++e) {
    int64_t at = 0;
    for (int64_t d = 0; d < rank; ++d)
      at += idx[static_cast<size_t>(d)] * strides[static_cast<size_t>(d)];
    dst[e] = src[at];
    for (int64_t d = rank - 1;
         d >= 0 && ++idx[static_cast<size_t>(d)] == shape[static_cast<size_t>(d)]; --d)
      idx[static_cast<size_t>(d)] = 0;
  }
  return out;
}

// A float32 constant input of `add` other than `from`; its index, or -1.
int constant_side(const ir::Graph& g, const ir::Node& add, const std::string& from) {
  if (add.inputs.size() != 2) return -1;
  for (int side = 0; side < 2; ++side) {
    const std::string& in = add.inputs[static_cast<size_t>(side)];
    const Tensor* c = constant_of(g, in);
    if (in != from && add.inputs[static_cast<size_t>(1 - side)] == from && c &&
        c->dtype() == DType::kFloat32)
      return side;
  }
  return -1;
}

bool broadcasts_into(const Shape& c, const Shape& target) {
  auto b = broadcast_shapes(c, target);
  return b.is_ok() && *b == target;
}

std::optional<int64_t> elements(const Shape& s) { return checked_product(s); }

// (a) Reshape(Add(Reshape(X, s1), C), s0).
std::optional<Match> match_reshaped_add(const ir::Graph& g, const GraphIndex& index, ir::Node& r0) {
  if (!is_op(&r0, "Reshape") || r0.inputs.empty() || !index.only_local_uses(r0.inputs[0]))
    return std::nullopt;
  ir::Node* add = index.producer(r0.inputs[0]);
  if (!is_op(add, "Add") || add->inputs.size() != 2 || index.sole_consumer(add->outputs[0]) != &r0)
    return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const std::string& inner = add->inputs[static_cast<size_t>(side)];
    ir::Node* r1 = index.producer(inner);
    if (!is_op(r1, "Reshape") || r1->inputs.empty() || index.sole_consumer(inner) != add ||
        !index.only_local_uses(inner))
      continue;
    if (constant_side(g, *add, inner) != 1 - side) continue;
    const Tensor& c = *constant_of(g, add->inputs[static_cast<size_t>(1 - side)]);
    const ir::ValueType* x = float32_type(g, r1->inputs[0]);
    const ir::ValueType* s1 = float32_type(g, inner);
    const ir::ValueType* y = float32_type(g, r0.outputs[0]);
    if (!x || !s1 || !y || !x->is_static() || !s1->is_static() || !y->is_static() ||
        y->dims != x->dims || !broadcasts_into(c.shape(), s1->dims))
      continue;
    const auto n = elements(s1->dims);
    if (!n || *n > kMaxFoldedElements) continue;
    Tensor folded = broadcast_constant(c, s1->dims).reshaped(x->dims);
    return Match{r1->inputs[0], std::move(folded), r0.outputs[0], {&r0, add, r1}};
  }
  return std::nullopt;
}

// (b) Add(Add(X, C1), C2).
std::optional<Match> match_add_chain(const ir::Graph& g, const GraphIndex& index, ir::Node& outer) {
  if (!is_op(&outer, "Add") || outer.inputs.size() != 2) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const std::string& inner_out = outer.inputs[static_cast<size_t>(side)];
    ir::Node* inner = index.producer(inner_out);
    if (!is_op(inner, "Add") || inner->inputs.size() != 2 ||
        index.sole_consumer(inner_out) != &outer || !index.only_local_uses(inner_out))
      continue;
    if (constant_side(g, outer, inner_out) != 1 - side) continue;
    const Tensor& c2 = *constant_of(g, outer.inputs[static_cast<size_t>(1 - side)]);
    for (int inner_side = 0; inner_side < 2; ++inner_side) {
      const std::string& x_name = inner->inputs[static_cast<size_t>(inner_side)];
      if (constant_side(g, *inner, x_name) != 1 - inner_side) continue;
      const Tensor& c1 = *constant_of(g, inner->inputs[static_cast<size_t>(1 - inner_side)]);
      const ir::ValueType* x = float32_type(g, x_name);
      const ir::ValueType* y = float32_type(g, outer.outputs[0]);
      auto both = broadcast_shapes(c1.shape(), c2.shape());
      if (!x || !y || !x->is_static() || !y->is_static() || y->dims != x->dims || !both.is_ok() ||
          !broadcasts_into(*both, x->dims))
        continue;
      const auto n = elements(*both), nx = elements(x->dims);
      if (!n || !nx || *n > *nx || *n > kMaxFoldedElements) continue;
      Tensor sum = broadcast_constant(c1, *both);
      const Tensor b2 = broadcast_constant(c2, *both);
      for (int64_t i = 0; i < sum.numel(); ++i) sum.data<float>()[i] += b2.data<float>()[i];
      return Match{x_name, std::move(sum), outer.outputs[0], {&outer, inner}};
    }
  }
  return std::nullopt;
}

std::optional<Match> match(const ir::Graph& g, const GraphIndex& index, ir::Node& n) {
  if (auto m = match_reshaped_add(g, index, n)) return m;
  return match_add_chain(g, index, n);
}

void rewrite(ir::Graph& g, const Match& m) {
  const std::string c = add_initializer(g, m.nodes[0]->name + "_folded", m.constant);
  const std::string name = m.nodes[0]->name + "_folded_add";
  for (const ir::Node* n : m.nodes)
    if (n->outputs[0] != m.output) g.values.erase(n->outputs[0]);
  remove_nodes(g, std::set<const ir::Node*>(m.nodes.begin(), m.nodes.end()));
  add_node(g, "Add", {m.x, c}, {m.output}, name);
}

class FoldConstantAdds : public Pass {
 public:
  const char* name() const override { return "fold_constant_adds"; }
  Expected<bool> run(ir::Graph& g) override {
    const int n = rewrite_each_match(g, match, rewrite);
    count_rewrite(n);
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fold_constant_adds() { return std::make_unique<FoldConstantAdds>(); }

}  // namespace peregrine::passes
