// The CPU backend's pooling kernels (kernels/pool.cc) against the reference
// backend through the executor: odd plane sizes, strides 1 / 2 / 3 (the vector
// and element paths of the pooling-row micro-kernel), pads, dilations,
// ceil_mode, auto_pad, count_include_pad; global pools. At the selected ISA
// (run again with PEREGRINE_ISA=scalar); the micro-kernels themselves are
// tested at every ISA level in cpu_elementwise_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "cpu_one_node_graph.h"

namespace peregrine::cpu {
namespace {

using testing::compare_with_reference;
using testing::int_attr;
using testing::ints_attr;
using testing::OneNodeGraph;
using testing::random_tensor;
using testing::string_attr;

struct PoolCase {
  Shape x;
  std::vector<int64_t> kernel, strides = {1, 1}, pads = {0, 0, 0, 0}, dilations = {1, 1};
  int64_t ceil_mode = 0;
  std::string auto_pad;
};

const PoolCase kCases[] = {
    {{1, 64, 112, 112}, {3, 3}, {2, 2}, {1, 1, 1, 1}},  // ResNet-50's MaxPool
    {{1, 1, 1, 1}, {1, 1}},
    {{2, 3, 7, 7}, {3, 3}},
    {{1, 2, 13, 13}, {3, 3}, {2, 2}, {1, 1, 1, 1}},
    {{1, 3, 13, 40}, {2, 2}, {2, 2}},
    {{1, 2, 27, 35}, {3, 2}, {3, 3}, {1, 0, 2, 1}},
    {{1, 2, 17, 33}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1},  // ceil_mode
    {{1, 2, 16, 19}, {3, 3}, {1, 2}, {2, 2, 2, 2}, {2, 2}},     // dilations
    {{1, 2, 12, 31}, {3, 3}, {2, 2}, {}, {1, 1}, 0, "SAME_UPPER"},
    {{1, 2, 11, 30}, {4, 4}, {3, 3}, {}, {1, 1}, 0, "SAME_LOWER"},
    {{2, 3, 127, 9}, {5, 5}, {1, 1}, {2, 2, 2, 2}},
    {{0, 3, 8, 8}, {2, 2}},
    // 3x3 / 2 (the one-call-per-plane kernel): no pads, pads 0 / 1 on one side, widths around
    // its 8 outputs per vector (1, 2, 3, 16, 17, 35 wide), ceil_mode past the input's end.
    {{1, 2, 9, 16}, {3, 3}, {2, 2}},
    {{1, 2, 9, 35}, {3, 3}, {2, 2}, {1, 0, 0, 1}},
    {{2, 3, 3, 3}, {3, 3}, {2, 2}, {0, 1, 1, 0}},
    {{1, 1, 1, 1}, {3, 3}, {2, 2}, {1, 1, 1, 1}},
    {{1, 2, 8, 2}, {3, 3}, {2, 2}, {1, 1, 1, 1}},
    {{1, 2, 18, 34}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},
    {{1, 2, 17, 33}, {3, 3}, {2, 2}, {1, 1, 2, 2}},
    // Stride 1 (the one-call-per-plane kernel): Inception's 3x3 / 1 pad 1 with ceil_mode,
    // SPPF's 5x5 pad 2, 1x7, asymmetric pads, a 1x1 plane, widths around 8.
    {{1, 3, 14, 14}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
    {{2, 2, 7, 7}, {3, 3}, {1, 1}, {1, 1, 1, 1}},
    {{1, 2, 20, 20}, {5, 5}, {1, 1}, {2, 2, 2, 2}},
    {{1, 2, 5, 17}, {1, 7}, {1, 1}, {0, 3, 0, 3}},
    {{1, 2, 9, 8}, {3, 2}, {1, 1}, {2, 0, 0, 1}},
    {{1, 2, 1, 1}, {3, 3}, {1, 1}, {1, 1, 1, 1}},
};

void check_pool(const char* op, const PoolCase& c, int64_t count_include_pad) {
  SCOPED_TRACE(std::string(op) + " x=" + shape_to_string(c.x) +
               " k=" + std::to_string(c.kernel[0]) + "x" + std::to_string(c.kernel[1]) +
               " s=" + std::to_string(c.strides[0]) + "," + std::to_string(c.strides[1]) +
               " cip=" + std::to_string(count_include_pad) + " " + c.auto_pad);
  std::vector<ir::Attribute> attrs = {ints_attr("kernel_shape", c.kernel),
                                      ints_attr("strides", c.strides),
                                      int_attr("ceil_mode", c.ceil_mode)};
  if (std::string(op) == "MaxPool") {
    attrs.push_back(ints_attr("dilations", c.dilations));
  } else {
    attrs.push_back(int_attr("count_include_pad", count_include_pad));
    if (c.dilations != std::vector<int64_t>{1, 1})
      attrs.push_back(ints_attr("dilations", c.dilations));
  }
  if (c.auto_pad.empty()) {
    attrs.push_back(ints_attr("pads", c.pads));
  } else {
    attrs.push_back(string_attr("auto_pad", c.auto_pad));
  }
  OneNodeGraph g(op, {{"X", random_tensor(c.x, 1, -2.0f, 2.0f)}}, {false}, attrs, "", 19);
  compare_with_reference(g, cpu_backend(),
                         std::string("cpu/") + (std::string(op) == "MaxPool" ? "max" : "avg"),
                         1e-6f, 1e-5f);
}

TEST(CpuPool, MaxPoolMatchesReference) {
  for (const PoolCase& c : kCases) check_pool("MaxPool", c, 0);
}

TEST(CpuPool, AveragePoolMatchesReference) {
  for (const PoolCase& c : kCases)
    for (int64_t cip : {0, 1}) check_pool("AveragePool", c, cip);
}

TEST(CpuPool, GlobalPoolsMatchReference) {
  for (const Shape& shape :
       {Shape{1, 1, 1, 1}, Shape{2, 3, 7, 7}, Shape{1, 5, 13, 127}, Shape{1, 2048, 7, 7},
        Shape{2, 3, 9}, Shape{1, 2, 3, 4, 5}, Shape{0, 3, 4, 4}}) {
    for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
      SCOPED_TRACE(std::string(op) + " " + shape_to_string(shape));
      OneNodeGraph g(op, {{"X", random_tensor(shape, 2, -2.0f, 2.0f)}}, {false}, {});
      compare_with_reference(g, cpu_backend(), "cpu/global", 1e-6f, 1e-5f);
    }
  }
}

}  // namespace
}  // namespace peregrine::cpu
