// The CPU backend's copy kernels (kernels/concat_split.cc, resize_nearest.cc, transpose.cc)
// against the reference backend through the executor, bit-exact: Concat / Split on every axis,
// empty parts, int64; Resize nearest with scales and sizes, every coordinate and nearest mode,
// odd and 1x1 planes, batch 2, sizes / scales given at run time (outputs re-inferred per run);
// Transpose on row-copy and tiled perms, identity, rank 1, int64. Each case also checks the
// CPU kernel ran (not the reference fallback). The block transpose of 4-byte elements (the
// vector table's transpose_x32, the only ISA-specific code here) is checked alone at every
// ISA level this machine has: odd blocks, strides past the block, bits kept, nothing else
// written.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"
#include "backends/reference/evaluate.h"
#include "cpu_one_node_graph.h"

namespace peregrine::cpu {
namespace {

using testing::float_attr;
using testing::int_attr;
using testing::ints_attr;
using testing::string_attr;

// Float32 values, or int64 values spread over the whole range (the high bits matter) or, with
// `exact_in_double`, below 2^53: the reference Resize computes in double.
Tensor random_of(DType dtype, const Shape& shape, uint32_t seed, bool exact_in_double = false) {
  if (dtype == DType::kFloat32) return testing::random_tensor(shape, seed);
  Tensor t = Tensor::zeros(dtype, shape);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<int64_t>()[i] = static_cast<int64_t>(exact_in_double ? rng() >> 11 : rng());
  return t;
}

Tensor int64s(const std::vector<int64_t>& v) {
  Tensor t = Tensor::zeros(DType::kInt64, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

Tensor floats(const std::vector<float>& v) {
  Tensor t = Tensor::zeros(DType::kFloat32, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

struct Input {
  std::string name;  // "" = omitted optional input
  Tensor value;
  bool constant = false;
};

// One node with any number of outputs and input dtypes.
struct CopyGraph {
  ir::Graph graph;
  std::map<std::string, RuntimeValue> feeds;

  CopyGraph(const std::string& op, const std::vector<Input>& inputs,
            std::vector<ir::Attribute> attrs, size_t num_outputs, int opset = 17) {
    graph.opsets[""] = opset;
    auto node = std::make_unique<ir::Node>();
    node->op_type = op;
    node->opset = opset;
    node->name = "n";
    for (const Input& in : inputs) {
      node->inputs.push_back(in.name);
      if (in.name.empty()) continue;
      ir::Value& v = graph.value(in.name);
      v.type = ir::ValueType::tensor(in.value.dtype(), in.value.shape());
      if (in.constant) {
        v.initializer = in.value;
      } else {
        graph.inputs.push_back(in.name);
        feeds[in.name] = RuntimeValue::of(in.value);
      }
    }
    for (auto& a : attrs) node->attributes[a.name] = a;
    for (size_t i = 0; i < num_outputs; ++i) {
      const std::string name = "Y" + std::to_string(i);
      node->outputs.push_back(name);
      graph.value(name);
      graph.outputs.push_back(name);
    }
    graph.nodes.push_back(std::move(node));
  }

  std::vector<Tensor> run(const Backend& backend, int threads, std::string* kernel) {
    auto inferred = infer_graph_types(graph, reference_evaluator());
    EXPECT_TRUE(inferred.is_ok()) << inferred.status().message();
    auto ex = GraphExecutor::create(graph, {&backend, &reference_backend()}, threads);
    EXPECT_TRUE(ex.is_ok()) << ex.status().message();
    if (!ex.is_ok()) return {};
    std::vector<NodeTiming> timings;
    auto out = ex.value()->run(feeds, nullptr, &timings);
    EXPECT_TRUE(out.is_ok()) << out.status().message();
    if (!out.is_ok()) return {};
    if (kernel && !timings.empty()) *kernel = timings[0].kernel;
    std::vector<Tensor> result;
    for (const RuntimeValue& v : out.value()) result.push_back(v.tensor);
    return result;
  }
};

// Bit-exact against the reference at 1..3 threads, and the CPU kernel `kernel_name` ran.
void expect_same_as_reference(CopyGraph& g, const std::string& kernel_name) {
  const std::vector<Tensor> want = g.run(reference_backend(), 1, nullptr);
  ASSERT_FALSE(want.empty());
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE("threads=" + std::to_string(threads));
    std::string kernel;
    const std::vector<Tensor> got = g.run(cpu_backend(), threads, &kernel);
    EXPECT_EQ(kernel, kernel_name);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE("output " + std::to_string(i));
      ASSERT_EQ(got[i].dtype(), want[i].dtype());
      ASSERT_EQ(got[i].shape(), want[i].shape());
      if (want[i].nbytes() == 0) continue;
      EXPECT_EQ(std::memcmp(got[i].raw(), want[i].raw(), want[i].nbytes()), 0);
    }
  }
}

// ----------------------------------------------------------------------------------------
// Concat

void check_concat(DType dtype, const std::vector<Shape>& shapes, int64_t axis) {
  std::string trace = "axis=" + std::to_string(axis);
  for (const Shape& s : shapes) trace += " " + shape_to_string(s);
  SCOPED_TRACE(trace);
  std::vector<Input> inputs;
  for (size_t i = 0; i < shapes.size(); ++i)
    inputs.push_back({"X" + std::to_string(i), random_of(dtype, shapes[i], 7 + i), i == 1});
  CopyGraph g("Concat", inputs, {int_attr("axis", axis)}, 1);
  expect_same_as_reference(g, "cpu/concat");
}

TEST(CpuCopyOps, ConcatEveryAxis) {
  for (DType dtype : {DType::kFloat32, DType::kInt64}) {
    check_concat(dtype, {{2, 3, 5, 7}}, 1);  // one input
    check_concat(dtype, {{3, 3, 5, 7}, {1, 3, 5, 7}}, 0);
    check_concat(dtype, {{2, 3, 5, 7}, {2, 1, 5, 7}, {2, 4, 5, 7}}, 1);
    check_concat(dtype, {{2, 3, 5, 7}, {2, 3, 2, 7}, {2, 3, 1, 7}, {2, 3, 13, 7}}, 2);
    check_concat(dtype, {{2, 3, 5, 7}, {2, 3, 5, 1}, {2, 3, 5, 13}}, 3);
    check_concat(dtype, {{2, 3, 5, 7}, {2, 3, 5, 2}}, -1);
    check_concat(dtype, {{2, 3, 5, 7}, {2, 1, 5, 7}}, -3);
    check_concat(dtype, {{2, 3, 5, 7}, {2, 0, 5, 7}, {2, 2, 5, 7}}, 1);  // an empty input
    check_concat(dtype, {{0, 3}, {0, 4}}, 1);                            // empty output
    check_concat(dtype, {{127}, {1}, {13}}, 0);                          // rank 1
  }
  // Large enough for several thread-pool tasks per run (YOLO-like, axis 1).
  check_concat(DType::kFloat32, {{1, 64, 80, 80}, {1, 64, 80, 80}, {1, 1, 80, 80}}, 1);
}

// ----------------------------------------------------------------------------------------
// Split

void check_split(DType dtype, const Shape& x, int64_t axis, const std::vector<int64_t>& sizes,
                 size_t num_outputs, int opset, bool sizes_constant = true) {
  SCOPED_TRACE("split x=" + shape_to_string(x) + " axis=" + std::to_string(axis) +
               " opset=" + std::to_string(opset) + " outputs=" + std::to_string(num_outputs));
  std::vector<Input> inputs = {{"X", random_of(dtype, x, 3)}};
  std::vector<ir::Attribute> attrs = {int_attr("axis", axis)};
  if (!sizes.empty())
    inputs.push_back({"S", int64s(sizes), sizes_constant});
  else if (opset >= 18)
    attrs.push_back(int_attr("num_outputs", num_outputs));
  CopyGraph g("Split", inputs, attrs, num_outputs, opset);
  expect_same_as_reference(g, "cpu/split");
}

TEST(CpuCopyOps, Split) {
  for (DType dtype : {DType::kFloat32, DType::kInt64}) {
    check_split(dtype, {2, 6, 5, 7}, 1, {2, 3, 1}, 3, 13);
    check_split(dtype, {2, 6, 5, 7}, 1, {2, 0, 4}, 3, 13);  // an empty output
    check_split(dtype, {2, 6, 5, 7}, 0, {1, 1}, 2, 13);
    check_split(dtype, {2, 6, 5, 7}, 2, {4, 1}, 2, 13);
    check_split(dtype, {2, 6, 5, 13}, -1, {6, 7}, 2, 13);
    check_split(dtype, {2, 6, 5, 7}, 1, {}, 3, 13);  // equal split
    check_split(dtype, {2, 7, 5, 3}, 1, {}, 3, 18);  // num_outputs, uneven last chunk
    check_split(dtype, {127}, 0, {}, 1, 13);         // one output
    check_split(dtype, {3, 13}, 1, {5, 8}, 2, 13, /*sizes_constant=*/false);  // run-time sizes
  }
  check_split(DType::kFloat32, {1, 256, 40, 40}, 1, {128, 128}, 2, 13);  // several tasks
}

// ----------------------------------------------------------------------------------------
// Resize nearest

struct ResizeCase {
  Shape x;
  std::vector<float> scales;   // 4 values, or empty
  std::vector<int64_t> sizes;  // 4 values, or empty
};

void check_resize(const ResizeCase& c, const std::string& ctm, const std::string& nearest,
                  int opset = 13, bool constant = true, DType dtype = DType::kFloat32) {
  SCOPED_TRACE("resize x=" + shape_to_string(c.x) + " ctm=" + ctm + " nearest=" + nearest +
               " opset=" + std::to_string(opset) + (c.sizes.empty() ? " scales" : " sizes"));
  std::vector<Input> inputs = {{"X", random_of(dtype, c.x, 5, /*exact_in_double=*/true)}};
  std::vector<ir::Attribute> attrs = {string_attr("mode", "nearest")};
  if (opset < 11) {
    inputs.push_back({"S", floats(c.scales), constant});
  } else {
    attrs.push_back(string_attr("coordinate_transformation_mode", ctm));
    attrs.push_back(string_attr("nearest_mode", nearest));
    inputs.push_back({"", Tensor()});
    if (c.sizes.empty()) {
      inputs.push_back({"S", floats(c.scales), constant});
    } else {
      inputs.push_back({"", Tensor()});
      inputs.push_back({"Z", int64s(c.sizes), constant});
    }
  }
  CopyGraph g("Resize", inputs, attrs, 1, opset);
  expect_same_as_reference(g, "cpu/resize_nearest");
}

const ResizeCase kResizeCases[] = {
    {{1, 3, 5, 7}, {1, 1, 2, 2}, {}},         {{2, 3, 5, 7}, {1, 1, 3, 3}, {}},
    {{1, 2, 13, 13}, {1, 1, 0.5f, 0.5f}, {}}, {{1, 2, 5, 7}, {1, 1, 1.5f, 1.5f}, {}},
    {{1, 2, 5, 7}, {1, 1, 2, 1}, {}},         {{1, 2, 5, 7}, {1, 1, 1, 0.6f}, {}},
    {{1, 1, 1, 1}, {1, 1, 2, 2}, {}},         {{2, 1, 1, 1}, {1, 1, 3, 5}, {}},
    {{2, 3, 5, 7}, {}, {2, 3, 9, 4}},         {{1, 2, 5, 7}, {}, {1, 2, 1, 1}},
    {{1, 2, 1, 1}, {}, {1, 2, 3, 8}},         {{1, 2, 5, 7}, {}, {1, 2, 0, 7}},  // empty output
};

TEST(CpuCopyOps, ResizeNearestModes) {
  for (const ResizeCase& c : kResizeCases)
    for (const char* ctm : {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                            "align_corners", "asymmetric"})
      for (const char* nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})
        check_resize(c, ctm, nearest);
}

TEST(CpuCopyOps, ResizeNearestOtherForms) {
  // YOLO's upsample, large enough for several tasks; int64; run-time scales / sizes.
  check_resize({{1, 128, 20, 20}, {1, 1, 2, 2}, {}}, "asymmetric", "floor");
  check_resize({{2, 3, 5, 7}, {1, 1, 2, 2}, {}}, "asymmetric", "floor", 13, true, DType::kInt64);
  check_resize({{2, 3, 5, 7}, {1, 1, 1.5f, 3}, {}}, "half_pixel", "round_prefer_floor", 13,
               /*constant=*/false);
  check_resize({{2, 3, 5, 7}, {}, {2, 3, 11, 3}}, "align_corners", "ceil", 13, false);
  check_resize({{2, 3, 5, 7}, {1, 1, 2, 0.5f}, {}}, "", "", /*opset=*/10);  // Resize-10
  check_resize({{2, 3, 5, 7}, {1, 1, 2, 2}, {}}, "asymmetric", "floor", /*opset=*/19);
}

TEST(CpuCopyOps, ResizeNearestResizingChannelsRunsTheReference) {
  CopyGraph g("Resize",
              {{"X", random_of(DType::kFloat32, {1, 2, 3, 3}, 1)},
               {"", Tensor()},
               {"S", floats({1, 2, 1, 1}), true}},
              {string_attr("mode", "nearest")}, 1, 13);
  std::string kernel;
  const std::vector<Tensor> got = g.run(cpu_backend(), 1, &kernel);
  const std::vector<Tensor> want = g.run(reference_backend(), 1, nullptr);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].shape(), want[0].shape());
  EXPECT_EQ(std::memcmp(got[0].raw(), want[0].raw(), want[0].nbytes()), 0);
}

// ----------------------------------------------------------------------------------------
// Transpose

void check_transpose(DType dtype, const Shape& x, const std::vector<int64_t>& perm) {
  std::string p;
  for (int64_t v : perm) p += std::to_string(v) + ",";
  SCOPED_TRACE("transpose x=" + shape_to_string(x) + " perm=" + p);
  std::vector<ir::Attribute> attrs;
  if (!perm.empty()) attrs.push_back(ints_attr("perm", perm));
  CopyGraph g("Transpose", {{"X", random_of(dtype, x, 11)}}, attrs, 1);
  expect_same_as_reference(g, "cpu/transpose");
}

TEST(CpuCopyOps, Transpose) {
  for (DType dtype : {DType::kFloat32, DType::kInt64}) {
    check_transpose(dtype, {2, 3, 5, 7}, {0, 2, 1, 3});
    check_transpose(dtype, {2, 3, 5, 7}, {3, 2, 1, 0});
    check_transpose(dtype, {2, 3, 5, 7}, {});  // default: reversed
    check_transpose(dtype, {13, 7}, {1, 0});
    check_transpose(dtype, {127, 33}, {1, 0});     // several tiles, clipped edges
    check_transpose(dtype, {3, 5, 7}, {0, 1, 2});  // identity
    check_transpose(dtype, {127}, {0});
    check_transpose(dtype, {1, 5, 1, 7}, {2, 3, 0, 1});  // size-1 axes dropped
    check_transpose(dtype, {1, 1, 1, 1}, {3, 1, 0, 2});
    check_transpose(dtype, {2, 3, 4, 5, 6}, {4, 0, 3, 1, 2});
    check_transpose(dtype, {2, 3, 4, 5, 6}, {1, 2, 0, 4, 3});
    check_transpose(dtype, {2, 0, 5}, {2, 0, 1});  // empty
  }
  check_transpose(DType::kFloat32, {1, 3, 8400, 85}, {0, 2, 1, 3});  // several row tasks
  check_transpose(DType::kFloat32, {1, 85, 8400}, {0, 2, 1});        // several tile tasks
  check_transpose(DType::kFloat32, {2, 64, 7, 3}, {0, 3, 2, 1});
  check_transpose(DType::kFloat32, {1, 100, 70}, {0, 2, 1});  // whole 16x16 blocks and edges
}

TEST(CpuCopyOps, BlockTransposeAtEveryIsa) {
  constexpr uint32_t kUntouched = 0xdeadbeefu;
  for (Isa isa : testing::isa_levels()) {
    const VectorUkernels* table = vector_ukernels_for(isa);
    if (table == nullptr) continue;
    for (size_t rows : {1, 7, 8, 15, 16, 17, 33})
      for (size_t cols : {1, 5, 8, 16, 31, 40}) {
        SCOPED_TRACE(std::string(isa_name(isa)) + " rows=" + std::to_string(rows) +
                     " cols=" + std::to_string(cols));
        const size_t ss = cols + 3, ds = rows + 5;
        std::vector<uint32_t> src(rows * ss), dst(cols * ds, kUntouched);
        for (size_t i = 0; i < src.size(); ++i)
          src[i] = 0x7fc00001u + static_cast<uint32_t>(i) * 2654435761u;  // NaN payloads too
        table->transpose_x32(src.data(), ss, dst.data(), ds, rows, cols);
        for (size_t j = 0; j < cols; ++j)
          for (size_t i = 0; i < ds; ++i)
            ASSERT_EQ(dst[j * ds + i], i < rows ? src[i * ss + j] : kUntouched)
                << "j=" << j << " i=" << i;
      }
  }
}

}  // namespace
}  // namespace peregrine::cpu
