// CPU kernels of the peregrine-domain vector ops the fusion passes write:
// RMSNormalization (rms_norm_fusion) and ElementwiseChain
// (elementwise_chain_fusion). Micro-kernels at every ISA level this machine has
// against double-precision loops (odd lengths, a guard page after each output);
// op kernels against the reference backend through the executor (at the
// selected ISA; run the suite again with PEREGRINE_ISA=scalar for the scalar
// level).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"
#include "backends/reference/evaluate.h"
#include "cpu_one_node_graph.h"
#include "cpu_test_util.h"

namespace peregrine::cpu {
namespace {

using testing::compare_with_reference;
using testing::GuardedBuffer;
using testing::OneNodeGraph;
using testing::random_floats;
using testing::random_tensor;

std::vector<const VectorUkernels *> all_tables() {
  std::vector<const VectorUkernels *> tables;
  for (Isa isa : testing::isa_levels(Isa::kAvx2))
    if (const VectorUkernels *t = vector_ukernels_for(isa)) tables.push_back(t);
  return tables;
}

TEST(VectorUkernels, RmsNormRowOddLengths) {
  for (const VectorUkernels *uk : all_tables()) {
    for (size_t n : {1, 7, 8, 9, 13, 15, 16, 17, 127, 1000}) {
      SCOPED_TRACE(std::string(isa_name(uk->isa)) + " n=" + std::to_string(n));
      std::vector<float> x = random_floats(n, 5, -3.0f, 3.0f);
      std::vector<float> gamma = random_floats(n, 6);
      GuardedBuffer y(n);
      uk->rms_norm_row(x.data(), gamma.data(), 1e-5f, y.data(), n);
      double sq = 0;
      for (float v : x) sq += static_cast<double>(v) * v;
      const double inv = 1.0 / std::sqrt(sq / static_cast<double>(n) + 1e-5);
      for (size_t i = 0; i < n; ++i)
        ASSERT_NEAR(y.data()[i], x[i] * inv * gamma[i], 2e-6 * std::max(1.0, std::fabs(x[i] * inv)))
            << "at " << i;
      // In place.
      std::vector<float> z = x;
      uk->rms_norm_row(z.data(), gamma.data(), 1e-5f, z.data(), n);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(z[i], y.data()[i]) << "in place at " << i;
    }
  }
}

TEST(CpuRmsNorm, MatchesReference) {
  struct Case {
    Shape x;
    int64_t axis;
    Shape scale;
  };
  const Case cases[] = {{{1}, -1, {1}},
                        {{7}, -1, {7}},
                        {{3, 13}, -1, {13}},
                        {{2, 5, 127}, -1, {127}},
                        {{2, 3, 4, 5}, -2, {4, 5}},
                        {{2, 3, 4, 5}, 2, {1, 4, 5}},
                        {{4, 1000}, -1, {1000}},
                        {{0, 8}, -1, {8}}};
  for (const Case &c : cases) {
    SCOPED_TRACE(shape_to_string(c.x) + " axis " + std::to_string(c.axis));
    OneNodeGraph g(
        "RMSNormalization", {{"X", random_tensor(c.x, 1, -3, 3)}, {"S", random_tensor(c.scale, 2)}},
        {false, true}, {testing::int_attr("axis", c.axis), testing::float_attr("epsilon", 1e-6f)},
        "peregrine");
    // A scale of the normalized rank with a leading 1 is broadcast: the kernel runs the
    // reference for it (and says so).
    const bool broadcast_scale =
        c.scale.size() >
        c.x.size() - static_cast<size_t>(c.axis < 0 ? c.x.size() + c.axis : c.axis);
    compare_with_reference(g, cpu_backend(),
                           broadcast_scale ? "reference (fallback of cpu/rmsnorm" : "cpu/rmsnorm",
                           1e-5f, 1e-5f);
  }
}

ir::Attribute strings_attr(const std::string &name, std::vector<std::string> v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::Attribute::Type::kStrings;
  a.strings = std::move(v);
  return a;
}

// Every step kind: unary ops on the vector micro-kernels and on plain loops,
// binary ops against tensors and immediates on either side.
TEST(CpuElementwiseChain, MatchesReferenceOnOddShapes) {
  const std::vector<std::string> ops = {"Mul",     "Add", "Sub", "Clip", "LeakyRelu", "HardSwish",
                                        "Max",     "Neg", "Abs", "Sqrt", "Div",       "Tanh",
                                        "Sigmoid", "Exp", "Erf", "Min",  "Relu",      "Div"};
  const std::vector<int64_t> operands = {-1, 1, -1, -1, -1, -1, -1, -1, -1,
                                         -1, 2, -1, -1, -1, -1, 1,  -1, -1};
  const std::vector<int64_t> swapped = {0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0};
  std::vector<float> params(2 * ops.size(), 0.0f);
  params[0] = 0.5f;                      // * 0.5
  params[4] = 1.0f;                      // 1 - acc
  params[6] = -0.75f, params[7] = 6.0f;  // Clip
  params[8] = 0.2f;                      // LeakyRelu alpha
  params[12] = 0.05f;                    // Max
  params[34] = 3.0f;                     // / 3
  for (const Shape &shape : {Shape{1}, Shape{7}, Shape{13}, Shape{127}, Shape{3, 5, 9}, Shape{0, 4},
                             Shape{3, 2000}, Shape{1, 1025}}) {
    SCOPED_TRACE(shape_to_string(shape));
    OneNodeGraph g("ElementwiseChain",
                   {{"X0", random_tensor(shape, 1, -4, 4)},
                    {"X1", random_tensor(shape, 2, -2, 2)},
                    {"X2", random_tensor(shape, 3, 0.5f, 2)}},
                   {false, false, true},
                   {strings_attr("ops", ops), testing::ints_attr("operands", operands),
                    testing::ints_attr("swapped", swapped),
                    [&] {
                      ir::Attribute a;
                      a.name = "params";
                      a.type = ir::Attribute::Type::kFloats;
                      a.floats = params;
                      return a;
                    }()},
                   "peregrine");
    compare_with_reference(g, cpu_backend(), "cpu/elementwise-chain", 2e-6f, 2e-6f);
  }
}

TEST(CpuElementwiseChain, RejectsMalformedPrograms) {
  OneNodeGraph g("ElementwiseChain", {{"X0", random_tensor({4}, 1)}}, {false},
                 {strings_attr("ops", {"Add"}), testing::ints_attr("operands", {3}),
                  testing::ints_attr("swapped", {0}),
                  [] {
                    ir::Attribute a;
                    a.name = "params";
                    a.type = ir::Attribute::Type::kFloats;
                    a.floats = {0, 0};
                    return a;
                  }()},
                 "peregrine");
  EXPECT_FALSE(infer_graph_types(g.graph, reference_evaluator()).is_ok());
}

}  // namespace
}  // namespace peregrine::cpu
