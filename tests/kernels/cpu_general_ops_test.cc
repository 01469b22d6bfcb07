// The CPU backend's general kernels against the reference backend through the executor (1..3
// threads, odd shapes): reductions (kernels/reduce.cc, and their micro-kernels at every ISA
// level this machine has, with a guard page after each buffer), the coordinate-map copies
// (kernels/data_movement.cc: Slice, Pad, Tile, Expand, Gather on several dtypes), the
// elementwise maps, comparisons and Where (kernels/elementwise_map.cc), bilinear Resize
// (kernels/resize_linear.cc), batched MatMul with a batch-broadcast residual, and the kernel
// table's dtype rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/ukernels/f32_reduce_ukernels.h"
#include "backends/reference/evaluate.h"
#include "cpu_one_node_graph.h"
#include "cpu_test_util.h"

namespace peregrine::cpu {
namespace {

using testing::compare_with_reference;
using testing::float_attr;
using testing::GuardedBuffer;
using testing::int_attr;
using testing::ints_attr;
using testing::OneNodeGraph;
using testing::random_floats;
using testing::random_tensor;
using testing::ScopedConvAlgo;
using testing::string_attr;

Tensor i64(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_vector<int64_t>(v, {n});
}

// Runs `g` on the reference and on the CPU backend at 1..3 threads; the outputs must be equal
// byte for byte (copies and comparisons are exact) and the kernel name must start with `prefix`.
void compare_exact(OneNodeGraph& g, const std::string& prefix) {
  Tensor want = g.run(reference_backend(), 1, nullptr);
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE("threads=" + std::to_string(threads));
    std::string kernel;
    Tensor got = g.run(cpu_backend(), threads, &kernel);
    EXPECT_EQ(kernel.rfind(prefix, 0), 0u) << kernel;
    ASSERT_EQ(got.shape(), want.shape());
    ASSERT_EQ(got.dtype(), want.dtype());
    ASSERT_EQ(got.nbytes(), want.nbytes());
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0);
  }
}

// ---- reductions -----------------------------------------------------------------------------

std::vector<const ReduceUkernels*> reduce_tables() {
  std::vector<const ReduceUkernels*> t;
  for (Isa isa : testing::isa_levels())
    if (const ReduceUkernels* k = reduce_ukernels_for(isa)) t.push_back(k);
  return t;
}

double naive_fold(ReduceOp op, const float* x, size_t n) {
  double acc = op == ReduceOp::kMax    ? -INFINITY
               : op == ReduceOp::kMin  ? INFINITY
               : op == ReduceOp::kProd ? 1.0
                                       : 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double v = x[i];
    switch (op) {
      case ReduceOp::kSum:
        acc += v;
        break;
      case ReduceOp::kSumAbs:
        acc += std::fabs(v);
        break;
      case ReduceOp::kSumSquare:
        acc += v * v;
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kProd:
        acc *= v;
        break;
    }
  }
  return acc;
}

const ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kSumAbs, ReduceOp::kSumSquare,
                                  ReduceOp::kMax, ReduceOp::kMin,    ReduceOp::kProd};

TEST(ReduceUkernels, RowAndAccumulateMatchNaiveLoopsAtEveryIsa) {
  for (const ReduceUkernels* uk : reduce_tables()) {
    SCOPED_TRACE(isa_name(uk->isa));
    for (size_t n : {0, 1, 7, 15, 16, 17, 63, 64, 65, 127, 1000}) {
      for (ReduceOp op : kAllReduceOps) {
        SCOPED_TRACE("n=" + std::to_string(n) + " op=" + std::to_string(static_cast<int>(op)));
        // Products of many values in [-1, 1] underflow: keep them near 1.
        const float lo = op == ReduceOp::kProd ? 0.9f : -1.0f;
        const float hi = op == ReduceOp::kProd ? 1.1f : 1.0f;
        GuardedBuffer x(std::max<size_t>(n, 1));
        std::vector<float> v = random_floats(n, 7 + static_cast<uint32_t>(n), lo, hi);
        std::copy(v.begin(), v.end(), x.data());
        const double want = naive_fold(op, x.data(), n);
        const float got = uk->row(op, x.data(), n);
        if (n == 0)
          EXPECT_EQ(got, reduce_identity(op));
        else
          EXPECT_NEAR(got, want, 1e-5 * std::max(1.0, std::fabs(want)));
        // accumulate: acc starts at a known value.
        GuardedBuffer acc(std::max<size_t>(n, 1));
        for (size_t j = 0; j < n; ++j) acc.data()[j] = 0.5f;
        uk->accumulate(op, x.data(), acc.data(), n);
        for (size_t j = 0; j < n; ++j) {
          const float a = 0.5f, xv = x.data()[j];
          const float w = op == ReduceOp::kMax         ? std::max(a, xv)
                          : op == ReduceOp::kMin       ? std::min(a, xv)
                          : op == ReduceOp::kProd      ? a * xv
                          : op == ReduceOp::kSumAbs    ? a + std::fabs(xv)
                          : op == ReduceOp::kSumSquare ? a + xv * xv
                                                       : a + xv;
          // Sums of squares may contract to one FMA at the vector levels: one rounding less.
          ASSERT_NEAR(acc.data()[j], w, 2e-7f * std::fabs(w)) << "at " << j;
        }
      }
    }
  }
}

TEST(ReduceUkernels, MaxAndMinPropagateNaN) {
  for (const ReduceUkernels* uk : reduce_tables()) {
    SCOPED_TRACE(isa_name(uk->isa));
    for (size_t pos : {0, 5, 63, 64, 99}) {
      std::vector<float> x = random_floats(100, 3);
      x[pos] = std::numeric_limits<float>::quiet_NaN();
      EXPECT_TRUE(std::isnan(uk->row(ReduceOp::kMax, x.data(), x.size()))) << pos;
      EXPECT_TRUE(std::isnan(uk->row(ReduceOp::kMin, x.data(), x.size()))) << pos;
    }
  }
}

struct ReduceCase {
  Shape shape;
  std::vector<int64_t> axes;  // empty: every axis
  int64_t keepdims;
};

TEST(CpuReduce, EveryKindOverAxisPatternsMatchesReference) {
  const ReduceCase cases[] = {
      {{1, 7, 9, 11}, {2, 3}, 1},  // spatial mean (squeeze-excite): inner reduced
      {{2, 5, 13}, {-1}, 0},       // last axis
      {{3, 17, 5}, {1}, 1},        // middle axis: inner kept
      {{4, 3, 6, 5}, {0, 2}, 0},   // alternating groups
      {{2, 3, 4}, {}, 1},          // every axis
      {{5, 1, 7}, {1}, 0},         // a size-1 axis
      {{1, 40000}, {0}, 0},        // inner kept, pieces of one long block
      {{3, 33000}, {1}, 1},        // long rows
  };
  const char* kinds[] = {"ReduceSum", "ReduceMean", "ReduceMax",       "ReduceMin",   "ReduceProd",
                         "ReduceL1",  "ReduceL2",   "ReduceSumSquare", "ReduceLogSum"};
  for (const ReduceCase& c : cases) {
    for (const char* kind : kinds) {
      SCOPED_TRACE(std::string(kind) + " " + shape_to_string(c.shape));
      const bool positive =
          std::string(kind) == "ReduceLogSum" || std::string(kind) == "ReduceProd";
      Tensor x = random_tensor(c.shape, 11, positive ? 0.95f : -1.0f, positive ? 1.05f : 1.0f);
      std::vector<std::pair<std::string, Tensor>> inputs = {{"X", x}};
      std::vector<bool> constant = {false};
      if (!c.axes.empty()) {
        inputs.push_back({"axes", i64(c.axes)});
        constant.push_back(true);
      }
      OneNodeGraph g(kind, inputs, constant, {int_attr("keepdims", c.keepdims)}, "", 18);
      compare_with_reference(g, cpu_backend(), "cpu/reduce-", 1e-5f, 1e-4f);
    }
  }
}

TEST(CpuReduce, AxesAsAttributeBeforeOpset18) {
  OneNodeGraph g("ReduceMean", {{"X", random_tensor({2, 6, 5, 3}, 4)}}, {false},
                 {ints_attr("axes", {1, 3}), int_attr("keepdims", 0)}, "", 13);
  compare_with_reference(g, cpu_backend(), "cpu/reduce-", 1e-6f, 1e-5f);
}

// Integer reductions whose double result leaves the type (an empty slice's log-sum-exp is
// -inf): stored as the type's bound, 0 for NaN, never an undefined conversion (a fuzz finding).
TEST(CpuReduce, IntegerResultsOutsideTheTypeSaturate) {
  Tensor x = Tensor::zeros(DType::kUInt32, {3, 0, 2});
  OneNodeGraph g("ReduceLogSumExp", {{"X", x}, {"axes", Tensor::from_vector<int64_t>({1}, {1})}},
                 {false, true}, {int_attr("keepdims", 0)}, "", 18);
  const Tensor y = g.run(reference_backend(), 1, nullptr);
  ASSERT_EQ(y.shape(), (Shape{3, 2}));
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.data<uint32_t>()[i], 0u);
}

// ---- coordinate-map copies ------------------------------------------------------------------

TEST(CpuMapCopy, SliceWithNegativeStepsAndClampedBounds) {
  Tensor x = random_tensor({4, 9, 10}, 5);
  OneNodeGraph g("Slice",
                 {{"X", x},
                  {"s", i64({-1, 1, 8})},
                  {"e", i64({-100, 100, 1})},
                  {"a", i64({0, 1, 2})},
                  {"st", i64({-2, 3, -3})}},
                 {false, true, true, true, true}, {});
  compare_exact(g, "cpu/copy-Slice");
  OneNodeGraph inner("Slice", {{"X", x}, {"s", i64({2})}, {"e", i64({7})}, {"a", i64({-1})}},
                     {false, true, true, true}, {});
  compare_exact(inner, "cpu/copy-Slice");
}

TEST(CpuMapCopy, PadEveryModeWithCrops) {
  Tensor x = random_tensor({2, 3, 5, 6}, 6);
  for (const char* mode : {"constant", "edge", "reflect", "wrap"}) {
    SCOPED_TRACE(mode);
    OneNodeGraph g(
        "Pad",
        {{"X", x}, {"pads", i64({0, 1, 2, -1, 0, 0, 3, 4})}, {"v", Tensor::scalar<float>(0.25f)}},
        {false, true, true}, {string_attr("mode", mode)}, "", 18);
    compare_exact(g, "cpu/copy-Pad");
  }
}

TEST(CpuMapCopy, TileExpandGatherOnSeveralDtypes) {
  Tensor xf = random_tensor({3, 1, 5}, 8);
  Tensor xi = Tensor::from_vector<int64_t>({1, -2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4});
  OneNodeGraph tile("Tile", {{"X", xf}, {"r", i64({2, 3, 1})}}, {false, true}, {});
  compare_exact(tile, "cpu/copy-Tile");
  OneNodeGraph tile_i("Tile", {{"X", xi}, {"r", i64({3, 2})}}, {false, true}, {});
  compare_exact(tile_i, "cpu/copy-Tile");
  OneNodeGraph expand("Expand", {{"X", xf}, {"s", i64({2, 3, 4, 5})}}, {false, true}, {});
  compare_exact(expand, "cpu/copy-Expand");
  OneNodeGraph expand_last("Expand", {{"X", random_tensor({4, 1}, 3)}, {"s", i64({4, 37})}},
                           {false, true}, {});
  compare_exact(expand_last, "cpu/copy-Expand");
  for (int64_t axis : {0, 1, -1}) {
    SCOPED_TRACE("axis=" + std::to_string(axis));
    Tensor idx = Tensor::from_vector<int64_t>({0, -1, 2, 1, 0, 2}, {2, 3});
    OneNodeGraph gf("Gather", {{"X", random_tensor({3, 4, 5}, 9)}, {"i", idx}}, {false, true},
                    {int_attr("axis", axis)});
    compare_exact(gf, "cpu/copy-Gather");
    OneNodeGraph gi("Gather", {{"X", xi}, {"i", Tensor::scalar<int32_t>(-2)}}, {false, true},
                    {int_attr("axis", axis)});
    compare_exact(gi, "cpu/copy-Gather");
  }
}

TEST(CpuMapCopy, GatherIndexOutOfRangeIsAnError) {
  OneNodeGraph g("Gather", {{"X", random_tensor({3, 4}, 1)}, {"i", i64({3})}}, {false, false},
                 {int_attr("axis", 0)});
  ASSERT_TRUE(infer_graph_types(g.graph, reference_evaluator()).is_ok());
  auto ex = GraphExecutor::create(g.graph, {&cpu_backend(), &reference_backend()}, 1);
  ASSERT_TRUE(ex.is_ok());
  auto out = ex.value()->run(g.feeds, nullptr, nullptr);
  ASSERT_FALSE(out.is_ok());
  EXPECT_NE(out.status().message().find("out of range"), std::string::npos)
      << out.status().message();
}

// ---- elementwise maps -----------------------------------------------------------------------

TEST(CpuElementwiseMap, UnaryMapsMatchReference) {
  Tensor x = random_tensor({3, 7, 33}, 12, -4.0f, 4.0f);
  Tensor pos = random_tensor({3, 7, 33}, 13, 0.1f, 4.0f);
  struct U {
    const char* op;
    std::vector<ir::Attribute> attrs;
    bool positive;
  };
  const U ops[] = {
      {"Neg", {}, false},
      {"Abs", {}, false},
      {"Sqrt", {}, true},
      {"Reciprocal", {}, true},
      {"Floor", {}, false},
      {"Ceil", {}, false},
      {"Log", {}, true},
      {"Softplus", {}, false},
      {"Softsign", {}, false},
      {"Mish", {}, false},
      {"HardSwish", {}, false},
      {"HardSigmoid", {float_attr("alpha", 0.3f), float_attr("beta", 0.4f)}, false},
      {"LeakyRelu", {float_attr("alpha", 0.2f)}, false},
      {"Elu", {float_attr("alpha", 0.7f)}, false},
      {"Selu", {}, false},
      {"Celu", {float_attr("alpha", 1.5f)}, false},
  };
  for (const U& u : ops) {
    SCOPED_TRACE(u.op);
    OneNodeGraph g(u.op, {{"X", u.positive ? pos : x}}, {false}, u.attrs);
    compare_with_reference(g, cpu_backend(), "cpu/elementwise-map", 1e-6f, 1e-5f);
  }
  OneNodeGraph clip("Clip",
                    {
                        {"X", x},
                        {"lo", Tensor::scalar<float>(-1.5f)},
                        {"", Tensor()},
                    },
                    {false, true, true}, {});
  compare_with_reference(clip, cpu_backend(), "cpu/elementwise-map", 0.0f);
}

TEST(CpuElementwiseMap, BinaryWithBroadcastingMatchesReference) {
  Tensor a = random_tensor({2, 3, 1, 17}, 21, 0.1f, 2.0f);
  Tensor b = random_tensor({3, 5, 1}, 22, -2.0f, 2.0f);
  for (const char* op : {"Pow", "Max", "Min"}) {
    SCOPED_TRACE(op);
    OneNodeGraph g(op, {{"A", a}, {"B", b}}, {false, false}, {});
    compare_with_reference(g, cpu_backend(), "cpu/elementwise-map", 1e-6f, 1e-5f);
  }
  OneNodeGraph square("Pow", {{"A", random_tensor({5, 9}, 2)}, {"B", Tensor::scalar<float>(2)}},
                      {false, true}, {});
  compare_with_reference(square, cpu_backend(), "cpu/elementwise-map", 0.0f);
  OneNodeGraph prelu("PRelu",
                     {{"X", random_tensor({2, 4, 3, 3}, 4)}, {"s", random_tensor({4, 1, 1}, 5)}},
                     {false, true}, {});
  compare_with_reference(prelu, cpu_backend(), "cpu/elementwise-map", 0.0f);
}

TEST(CpuElementwiseMap, ComparisonsLogicAndWhereAreExact) {
  Tensor a = Tensor::from_vector<int64_t>({1, 5, -3, 7, 0, 2}, {2, 3});
  Tensor b = Tensor::from_vector<int64_t>({5, 0, -3}, {3});
  for (const char* op : {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"}) {
    SCOPED_TRACE(op);
    OneNodeGraph gi(op, {{"A", a}, {"B", b}}, {false, false}, {});
    compare_exact(gi, "cpu/elementwise-map");
    OneNodeGraph gf(op, {{"A", random_tensor({4, 1, 6}, 1)}, {"B", random_tensor({3, 1}, 2)}},
                    {false, false}, {});
    compare_exact(gf, "cpu/elementwise-map");
  }
  Tensor c = Tensor::zeros(DType::kBool, {3, 1, 6});
  for (int64_t i = 0; i < c.numel(); ++i) c.data<bool>()[i] = (i * 7) % 3 == 0;
  Tensor d = Tensor::zeros(DType::kBool, {4, 6});
  for (int64_t i = 0; i < d.numel(); ++i) d.data<bool>()[i] = i % 2 == 0;
  for (const char* op : {"And", "Or"}) {
    OneNodeGraph g(op, {{"A", c}, {"B", d}}, {false, false}, {});
    compare_exact(g, "cpu/elementwise-map");
  }
  OneNodeGraph n("Not", {{"A", d}}, {false}, {});
  compare_exact(n, "cpu/elementwise-map");
  OneNodeGraph wf("Where",
                  {{"C", c}, {"X", random_tensor({4, 6}, 3)}, {"Y", Tensor::scalar<float>(-1e9f)}},
                  {false, false, true}, {});
  compare_exact(wf, "cpu/elementwise-map");
  OneNodeGraph wi("Where",
                  {{"C", c},
                   {"X", Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {6})},
                   {"Y", Tensor::from_vector<int64_t>({-1, -2, -3}, {3, 1, 1})}},
                  {false, false, false}, {});
  compare_exact(wi, "cpu/elementwise-map");
  // Every row form: condition, X and Y each per element or broadcast (the 0 / 1 stride rows
  // the kernel specializes, and a broadcast condition, which it does not).
  Tensor e = Tensor::zeros(DType::kBool, {5, 7});
  for (int64_t i = 0; i < e.numel(); ++i) e.data<bool>()[i] = (i * 5) % 3 != 0;
  Tensor e_col = Tensor::zeros(DType::kBool, {5, 1});
  for (int64_t i = 0; i < e_col.numel(); ++i) e_col.data<bool>()[i] = i % 2 == 0;
  const Tensor full_x = random_tensor({5, 7}, 4), full_y = random_tensor({5, 7}, 5);
  const Tensor scalar_x = Tensor::scalar<float>(0.0f), scalar_y = Tensor::scalar<float>(-7.5f);
  for (const Tensor* cond : {&e, &e_col})
    for (const Tensor* x : {&full_x, &scalar_x})
      for (const Tensor* y : {&full_y, &scalar_y}) {
        OneNodeGraph w("Where", {{"C", *cond}, {"X", *x}, {"Y", *y}}, {false, false, false}, {});
        compare_exact(w, "cpu/elementwise-map");
      }
}

// ---- Resize linear, MatMul residual, table ---------------------------------------------------

TEST(CpuResizeLinear, CoordinateModesUpAndDownMatchReference) {
  Tensor x = random_tensor({1, 3, 13, 17}, 31);
  for (const char* ctm : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"}) {
    for (float s : {2.0f, 0.5f, 1.7f}) {
      SCOPED_TRACE(std::string(ctm) + " scale " + std::to_string(s));
      Tensor scales = Tensor::from_vector<float>({1, 1, s, s}, {4});
      OneNodeGraph g(
          "Resize", {{"X", x}, {"", Tensor()}, {"scales", scales}}, {false, true, true},
          {string_attr("mode", "linear"), string_attr("coordinate_transformation_mode", ctm)}, "",
          18);
      compare_with_reference(g, cpu_backend(), "cpu/resize_linear", 1e-5f, 1e-5f);
    }
  }
}

// Found by fuzz_pipeline: sizes with a zero dim give an empty output (the reference kernel
// indexed an empty buffer).
TEST(CpuResizeLinear, ZeroSizedOutputIsEmpty) {
  Tensor sizes = Tensor::from_vector<int64_t>({1, 3, 0, 5}, {4});
  OneNodeGraph g(
      "Resize",
      {{"X", random_tensor({1, 3, 4, 4}, 3)}, {"", Tensor()}, {"", Tensor()}, {"sizes", sizes}},
      {false, true, true, false}, {string_attr("mode", "linear")}, "", 18);
  Tensor want = g.run(reference_backend(), 1, nullptr);
  EXPECT_EQ(want.shape(), (Shape{1, 3, 0, 5}));
  Tensor got = g.run(cpu_backend(), 1, nullptr);
  EXPECT_EQ(got.shape(), (Shape{1, 3, 0, 5}));
}

TEST(CpuMatMul, BatchBroadcastResidualRunsOnTheGemm) {
  // Swin's attention scores: (B, H, S, D) x (B, H, D, S) + bias (1, H, S, S).
  OneNodeGraph g("FusedMatMul",
                 {{"A", random_tensor({3, 2, 9, 8}, 1)},
                  {"B", random_tensor({3, 2, 8, 9}, 2)},
                  {"Z", random_tensor({1, 2, 9, 9}, 3)}},
                 {false, false, true}, {}, "peregrine");
  compare_with_reference(g, cpu_backend(), "cpu/f32_gemm", 1e-5f, 1e-5f);
}

TEST(CpuKernelTable, DtypeRuleSendsOtherDtypesToTheReference) {
  ir::Node n;
  n.op_type = "ReduceMean";
  n.opset = 18;
  std::vector<ir::ValueType> f32 = {ir::ValueType::tensor(DType::kFloat32, {2, 3}),
                                    ir::ValueType::tensor(DType::kInt64, {1})};
  std::vector<ir::ValueType> i32 = {ir::ValueType::tensor(DType::kInt32, {2, 3}),
                                    ir::ValueType::tensor(DType::kInt64, {1})};
  ASSERT_NE(find_cpu_kernel(n, &f32), nullptr);
  EXPECT_EQ(find_cpu_kernel(n, &i32), nullptr);
  EXPECT_NE(find_cpu_kernel(n), nullptr);
  n.op_type = "Gather";  // a copy: any dtype
  EXPECT_NE(find_cpu_kernel(n, &i32), nullptr);
  n.op_type = "NoSuchOp";
  EXPECT_EQ(find_cpu_kernel(n), nullptr);
  n.op_type = "Tile";  // Tile-1 had other inputs: not claimed
  n.opset = 1;
  EXPECT_EQ(find_cpu_kernel(n), nullptr);
}

}  // namespace
}  // namespace peregrine::cpu

namespace peregrine::cpu {
namespace {

// ---- recurrent cells ------------------------------------------------------------------------

struct RnnCase {
  const char* op;
  const char* direction;
  int64_t layout, lbr, seq, batch, input, hidden;
  bool bias, init, peep;
};

TEST(CpuRecurrent, CellsDirectionsLayoutsMatchReference) {
  const RnnCase cases[] = {
      {"LSTM", "forward", 0, 0, 7, 1, 5, 9, true, false, false},
      {"LSTM", "bidirectional", 0, 0, 4, 3, 6, 17, true, true, true},
      {"LSTM", "reverse", 1, 0, 5, 2, 3, 8, false, true, false},
      {"GRU", "forward", 0, 1, 6, 1, 4, 33, true, false, false},  // PyTorch's form
      {"GRU", "forward", 0, 0, 6, 2, 4, 7, true, true, false},    // ONNX's default
      {"GRU", "bidirectional", 1, 1, 3, 3, 5, 16, true, true, false},
      {"RNN", "bidirectional", 0, 0, 5, 2, 3, 11, true, true, false},
  };
  for (const RnnCase& c : cases) {
    SCOPED_TRACE(std::string(c.op) + " " + c.direction + " layout " + std::to_string(c.layout) +
                 " lbr " + std::to_string(c.lbr));
    const int64_t gates = std::string(c.op) == "LSTM" ? 4 : std::string(c.op) == "GRU" ? 3 : 1;
    const int64_t dirs = std::string(c.direction) == "bidirectional" ? 2 : 1;
    const Shape xs =
        c.layout == 0 ? Shape{c.seq, c.batch, c.input} : Shape{c.batch, c.seq, c.input};
    const Shape ss =
        c.layout == 0 ? Shape{dirs, c.batch, c.hidden} : Shape{c.batch, dirs, c.hidden};
    std::vector<std::pair<std::string, Tensor>> in = {
        {"X", random_tensor(xs, 1)},
        {"W", random_tensor({dirs, gates * c.hidden, c.input}, 2, -0.5f, 0.5f)},
        {"R", random_tensor({dirs, gates * c.hidden, c.hidden}, 3, -0.5f, 0.5f)},
        {c.bias ? "B" : "", c.bias ? random_tensor({dirs, 2 * gates * c.hidden}, 4) : Tensor()},
        {"", Tensor()},
        {c.init ? "H0" : "", c.init ? random_tensor(ss, 5) : Tensor()}};
    std::vector<bool> constant = {false, true, true, true, true, false};
    if (gates == 4) {
      in.push_back({c.init ? "C0" : "", c.init ? random_tensor(ss, 6) : Tensor()});
      in.push_back({c.peep ? "P" : "", c.peep ? random_tensor({dirs, 3 * c.hidden}, 7) : Tensor()});
      constant.push_back(false);
      constant.push_back(true);
    }
    std::vector<ir::Attribute> attrs = {string_attr("direction", c.direction),
                                        int_attr("hidden_size", c.hidden),
                                        int_attr("layout", c.layout)};
    if (gates == 3) attrs.push_back(int_attr("linear_before_reset", c.lbr));
    OneNodeGraph g(c.op, in, constant, attrs, "", 14);
    compare_with_reference(g, cpu_backend(), "cpu/rnn-", 2e-5f, 2e-4f);
  }
}

}  // namespace
}  // namespace peregrine::cpu

namespace peregrine::cpu {
namespace {

// ---- tap-wise convolution (dilated convs whose taps read mostly padding) --------------------

TEST(CpuConvTapwise, DilatedConvsMatchReference) {
  struct C {
    int64_t c, h, w, oc, k, dil, pad;
    bool fused;
  };
  const C cases[] = {
      {5, 9, 11, 7, 3, 6, 6, false},  // edge taps partly inside
      {4, 8, 8, 6, 3, 9, 9, true},    // only the centre tap reads the input
      {3, 7, 13, 5, 3, 4, 2, true},   // a non-square map
      {6, 5, 5, 4, 5, 3, 6, false},   // 5x5 kernel
      {3, 5, 6, 4, 3, 2, 4, true},    // pads beyond the dilation: C starts at zero
  };
  for (const C& c : cases) {
    SCOPED_TRACE("dil " + std::to_string(c.dil) + " pad " + std::to_string(c.pad));
    std::vector<std::pair<std::string, Tensor>> in = {
        {"X", random_tensor({2, c.c, c.h, c.w}, 1)},
        {"W", random_tensor({c.oc, c.c, c.k, c.k}, 2)},
        {"B", random_tensor({c.oc}, 3)}};
    std::vector<bool> constant = {false, true, true};
    std::vector<ir::Attribute> attrs = {ints_attr("dilations", {c.dil, c.dil}),
                                        ints_attr("pads", {c.pad, c.pad, c.pad, c.pad})};
    const int64_t oh = c.h + 2 * c.pad - c.dil * (c.k - 1),
                  ow = c.w + 2 * c.pad - c.dil * (c.k - 1);
    if (c.fused) {
      in.push_back({"Z", random_tensor({2, c.oc, oh, ow}, 4)});
      constant.push_back(false);
      attrs.push_back(string_attr("activation", "Relu"));
    }
    OneNodeGraph g(c.fused ? "FusedConv" : "Conv", in, constant, attrs, c.fused ? "peregrine" : "");
    compare_with_reference(g, cpu_backend(), "cpu/conv-tapwise-", 1e-5f, 1e-5f);
  }
}

}  // namespace
}  // namespace peregrine::cpu

namespace peregrine::cpu {
namespace {

// ---- 1-D and 3-D convolution ------------------------------------------------------------------

// A 1-D or 3-D conv of the tests below: Conv, or FusedConv with a Relu (and, with `residual`,
// a residual Z of the output's shape).
struct ConvNdCase {
  Shape x, w;
  std::vector<int64_t> strides, dilations, pads;
  int64_t group;
  bool fused;
};

OneNodeGraph conv_nd_graph(const ConvNdCase& c, bool constant_w, bool residual) {
  std::vector<std::pair<std::string, Tensor>> in = {{"X", random_tensor(c.x, 1)},
                                                    {"W", random_tensor(c.w, 2)},
                                                    {"B", random_tensor({c.w[0]}, 3)}};
  std::vector<bool> constant = {false, constant_w, true};
  std::vector<ir::Attribute> attrs = {
      ints_attr("strides", c.strides), ints_attr("dilations", c.dilations),
      ints_attr("pads", c.pads), int_attr("group", c.group),
      ints_attr("kernel_shape", std::vector<int64_t>(c.w.begin() + 2, c.w.end()))};
  if (c.fused && residual) {
    const size_t spatial = c.x.size() - 2;
    Shape y = {c.x[0], c.w[0]};
    for (size_t i = 0; i < spatial; ++i)
      y.push_back(
          (c.x[i + 2] + c.pads[i] + c.pads[i + spatial] - c.dilations[i] * (c.w[i + 2] - 1) - 1) /
              c.strides[i] +
          1);
    in.push_back({"Z", random_tensor(y, 4)});
    constant.push_back(false);
  }
  if (c.fused) attrs.push_back(string_attr("activation", "Relu"));
  return OneNodeGraph(c.fused ? "FusedConv" : "Conv", in, constant, attrs,
                      c.fused ? "peregrine" : "");
}

TEST(CpuConvNd, OneAndThreeDimensionalConvsMatchReference) {
  const ConvNdCase cases[] = {
      {{2, 6, 37}, {8, 6, 3}, {1}, {1}, {1, 1}, 1, false},
      {{1, 4, 50}, {6, 2, 5}, {2}, {3}, {4, 2}, 2, true},   // grouped, strided, dilated
      {{1, 8, 19}, {8, 1, 7}, {1}, {1}, {3, 3}, 8, false},  // depthwise 1-D
      {{1, 3, 5, 9, 11}, {4, 3, 3, 3, 3}, {1, 2, 2}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, 1, true},
      {{2, 4, 4, 6, 5}, {6, 2, 1, 3, 3}, {1, 1, 1}, {1, 2, 1}, {0, 2, 1, 0, 2, 1}, 2, false},
  };
  // Weights computed at run time (wav2vec2's weight-normed conv) reach conv_nd by the
  // kernel_shape attribute.
  for (bool constant_w : {true, false})
    for (const ConvNdCase& c : cases) {
      SCOPED_TRACE("x " + shape_to_string(c.x) + " w " + shape_to_string(c.w) +
                   (constant_w ? "" : " run-time W"));
      OneNodeGraph g = conv_nd_graph(c, constant_w, /*residual=*/false);
      compare_with_reference(g, cpu_backend(), "cpu/conv_nd-", 1e-5f, 1e-5f);
    }
}

// 1-D and 3-D convs forced onto the phase-plane GEMM (kernels/conv_phase_planes.h, where the
// selected GEMM kernel has an indirect variant): C straight into Y (one output row; rows as long
// on the grid as in Y) and through scratch and compaction; strides up to 2 on every axis (up to
// 8 phase planes), depth dilation, asymmetric pads, groups, batches, K over several K blocks, a
// 1x1x1 output; bias, residual and activation.
TEST(CpuConvNd, PhasePlanesMatchReference) {
  ScopedConvAlgo algo("planes");
  const bool has_indirect = f32_gemm_kernel().indirect_ukernel != nullptr;
  const ConvNdCase cases[] = {
      {{1, 5, 6, 9, 11}, {7, 5, 3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, 1, true},
      {{2, 3, 9, 10, 12}, {6, 3, 3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, 1, false},
      {{1, 3, 4, 16, 15}, {8, 3, 3, 7, 7}, {1, 2, 2}, {1, 1, 1}, {1, 3, 3, 1, 3, 3}, 1, true},
      {{1, 4, 7, 8, 9}, {5, 4, 2, 3, 2}, {1, 1, 2}, {2, 1, 2}, {1, 0, 2, 0, 2, 1}, 1, false},
      {{1, 6, 5, 4, 7}, {9, 6, 3, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 0, 0, 1, 0, 0}, 1, true},
      {{1, 8, 4, 6, 6}, {10, 4, 3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, 2, true},
      {{1, 2, 3, 3, 3}, {3, 2, 3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, 1, false},
      {{2, 6, 37}, {8, 6, 3}, {1}, {1}, {1, 1}, 1, true},
      {{1, 4, 50}, {6, 4, 5}, {2}, {3}, {4, 2}, 1, false},
      {{1, 200, 20}, {12, 200, 3}, {1}, {1}, {1, 1}, 1, true},
  };
  for (const ConvNdCase& c : cases) {
    SCOPED_TRACE("x " + shape_to_string(c.x) + " w " + shape_to_string(c.w));
    OneNodeGraph g = conv_nd_graph(c, /*constant_w=*/true, /*residual=*/true);
    compare_with_reference(g, cpu_backend(),
                           has_indirect ? "cpu/conv_nd-phase_planes-" : "cpu/conv_nd-", 1e-5f,
                           1e-5f);
  }
}

}  // namespace
}  // namespace peregrine::cpu

namespace peregrine::cpu {
namespace {

// ---- plane normalizations, IsNaN / IsInf -----------------------------------------------------

TEST(CpuPlaneNorm, InstanceAndBatchNormMatchReference) {
  for (const Shape& x : {Shape{2, 5, 7, 9}, Shape{1, 3, 1000}, Shape{2, 4, 3, 2, 5}}) {
    SCOPED_TRACE(shape_to_string(x));
    const int64_t c = x[1];
    Tensor xt = random_tensor(x, 1, 2.0f, 4.0f);  // a large mean: the centred variance matters
    OneNodeGraph in("InstanceNormalization",
                    {{"X", xt}, {"S", random_tensor({c}, 2)}, {"B", random_tensor({c}, 3)}},
                    {false, true, true}, {float_attr("epsilon", 1e-3f)});
    compare_with_reference(in, cpu_backend(), "cpu/instance_norm", 2e-5f, 1e-4f);
    OneNodeGraph bn("BatchNormalization",
                    {{"X", xt},
                     {"S", random_tensor({c}, 4)},
                     {"B", random_tensor({c}, 5)},
                     {"M", random_tensor({c}, 6)},
                     {"V", random_tensor({c}, 7, 0.5f, 2.0f)}},
                    {false, true, true, true, true}, {});
    compare_with_reference(bn, cpu_backend(), "cpu/batch_norm", 1e-5f, 1e-5f);
  }
}

TEST(CpuElementwiseMap, IsNaNAndIsInf) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::from_vector<float>(
      {1.0f, -inf, inf, std::numeric_limits<float>::quiet_NaN(), 0.0f, -2.0f}, {2, 3});
  OneNodeGraph nan("IsNaN", {{"X", x}}, {false}, {});
  compare_exact(nan, "cpu/elementwise-map");
  for (int64_t neg : {0, 1}) {
    OneNodeGraph g("IsInf", {{"X", x}}, {false}, {int_attr("detect_negative", neg)});
    compare_exact(g, "cpu/elementwise-map");
  }
}

}  // namespace
}  // namespace peregrine::cpu

namespace peregrine::cpu {
namespace {

TEST(CpuEinsum, TwoOperandEquationsMatchReference) {
  struct E {
    const char* eq;
    Shape a, b;
  };
  const E cases[] = {
      {"B G H I D, B G H J D -> B G H I J", {2, 3, 2, 5, 7}, {2, 3, 2, 6, 7}},  // MaxViT
      {"bghij,bghjd->bghid", {2, 1, 3, 5, 6}, {2, 1, 3, 6, 4}},
      {"ij,jk->ik", {5, 7}, {7, 3}},
      {"ji,jk->ki", {7, 5}, {7, 3}},  // A transposed, output permuted
      {"bqd,bkd->bqk", {3, 4, 8}, {3, 6, 8}},
      {"nchw,kc->nkhw", {2, 3, 4, 5}, {6, 3}},  // permuted operand
      {"i,j->ij", {4}, {5}},                    // outer product
      {"i,i->", {9}, {9}},                      // dot
  };
  for (const E& e : cases) {
    SCOPED_TRACE(e.eq);
    OneNodeGraph g("Einsum", {{"A", random_tensor(e.a, 1)}, {"B", random_tensor(e.b, 2)}},
                   {false, false}, {string_attr("equation", e.eq)}, "", 12);
    compare_with_reference(g, cpu_backend(), "cpu/einsum-", 1e-5f, 1e-5f);
  }
}

}  // namespace
}  // namespace peregrine::cpu

namespace peregrine::cpu {
namespace {

TEST(CpuGridSample, ModesPaddingsAlignMatchReference) {
  Tensor x = random_tensor({2, 3, 7, 9}, 1);
  Tensor grid = random_tensor({2, 5, 6, 2}, 2, -1.3f, 1.3f);  // some samples outside
  for (const char* mode : {"bilinear", "nearest"})
    for (const char* pad : {"zeros", "border", "reflection"})
      for (int64_t align : {0, 1}) {
        SCOPED_TRACE(std::string(mode) + " " + pad + " align " + std::to_string(align));
        OneNodeGraph g("GridSample", {{"X", x}, {"G", grid}}, {false, false},
                       {string_attr("mode", mode), string_attr("padding_mode", pad),
                        int_attr("align_corners", align)},
                       "", 16);
        compare_with_reference(g, cpu_backend(), "cpu/grid_sample", 1e-5f, 1e-5f);
      }
}

// Bilinear with zero padding takes its taps in float arithmetic (the same taps and weights as
// the reference's double steps), checked on the edges: coordinates landing on -1, 0, len - 1,
// len and between, outside, NaN and infinite; one channel (RAFT's lookups) and several. The
// kernel sums the taps in another order than the reference (1 ulp apart); a wrong tap or
// weight would be off by a whole sample.
TEST(CpuGridSample, BilinearZerosEdgesBitExact) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> coords = {-1.0f,
                               1.0f,
                               0.0f,
                               -1.2f,
                               1.2f,
                               -1.0f - 2.0f / 9,
                               1.0f + 2.0f / 9,
                               -1.0f + 1.0f / 9,
                               1.0f - 1.0f / 9,
                               0.37f,
                               -0.999999f,
                               std::nanf(""),
                               inf,
                               -inf,
                               1e10f,
                               -3e9f};
  for (int i = 0; i < 24; ++i) coords.push_back(-1.4f + 0.117f * static_cast<float>(i));
  const int64_t positions = static_cast<int64_t>(coords.size());
  Tensor grid = Tensor::zeros(DType::kFloat32, {1, positions, positions, 2});
  for (int64_t a = 0; a < positions; ++a)
    for (int64_t b = 0; b < positions; ++b) {
      grid.data<float>()[(a * positions + b) * 2] = coords[static_cast<size_t>(b)];
      grid.data<float>()[(a * positions + b) * 2 + 1] = coords[static_cast<size_t>(a)];
    }
  for (int64_t channels : {1, 3})
    for (int64_t align : {0, 1}) {
      SCOPED_TRACE("channels " + std::to_string(channels) + " align " + std::to_string(align));
      OneNodeGraph g("GridSample", {{"X", random_tensor({1, channels, 7, 9}, 3)}, {"G", grid}},
                     {false, false},
                     {string_attr("mode", "bilinear"), string_attr("padding_mode", "zeros"),
                      int_attr("align_corners", align)},
                     "", 16);
      compare_with_reference(g, cpu_backend(), "cpu/grid_sample", 1e-6f, 1e-6f);
    }
}

}  // namespace
}  // namespace peregrine::cpu
