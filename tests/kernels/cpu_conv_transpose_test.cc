// ConvTranspose through the CPU backend (kernels/conv_transpose.cc: GEMM + col2im) against the
// reference backend on odd shapes: group 1 and grouped, strides, pads, dilations, output_padding,
// output_shape, with and without bias, constant and run-time weights, an input large enough to be
// split into several col chunks; 1, 2 and 3 threads at the selected ISA (run with
// PEREGRINE_ISA=scalar for the scalar level).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "cpu_one_node_graph.h"

namespace peregrine {
namespace {

using cpu::testing::compare_with_reference;
using cpu::testing::int_attr;
using cpu::testing::ints_attr;
using cpu::testing::OneNodeGraph;
using cpu::testing::random_tensor;

struct Case {
  int64_t n, c, h, w, m_per_group, kh, kw, group;
  std::vector<int64_t> strides = {1, 1}, pads = {0, 0, 0, 0}, dilations = {1, 1},
                       output_padding = {0, 0}, output_shape = {};
  bool bias = true, constant_w = true;
};

void check(const Case &c) {
  SCOPED_TRACE("conv_transpose n=" + std::to_string(c.n) + " c=" + std::to_string(c.c) +
               " hw=" + std::to_string(c.h) + "x" + std::to_string(c.w) +
               " m_g=" + std::to_string(c.m_per_group) + " k=" + std::to_string(c.kh) + "x" +
               std::to_string(c.kw) + " group=" + std::to_string(c.group) +
               " bias=" + std::to_string(c.bias) + " const=" + std::to_string(c.constant_w));
  std::vector<std::pair<std::string, Tensor>> inputs = {
      {"X", random_tensor({c.n, c.c, c.h, c.w}, 1)},
      {"W", random_tensor({c.c, c.m_per_group, c.kh, c.kw}, 2)}};
  std::vector<bool> constant = {false, c.constant_w};
  if (c.bias) {
    inputs.push_back({"B", random_tensor({c.m_per_group * c.group}, 3)});
    constant.push_back(true);
  }
  std::vector<ir::Attribute> attrs = {ints_attr("strides", c.strides),
                                      ints_attr("dilations", c.dilations),
                                      int_attr("group", c.group)};
  if (c.output_shape.empty()) {
    attrs.push_back(ints_attr("pads", c.pads));
    attrs.push_back(ints_attr("output_padding", c.output_padding));
  } else {
    attrs.push_back(ints_attr("output_shape", c.output_shape));
  }
  OneNodeGraph g("ConvTranspose", inputs, constant, attrs);
  compare_with_reference(g, cpu_backend(), "cpu/conv_transpose", 1e-4f, 1e-5f);
}

TEST(CpuConvTranspose, MatchesReference) {
  // Upsampling 2x (the common decoder / FPN shape), 3x3 and 4x4, pads 1.
  check({1, 8, 7, 9, 5, 4, 4, 1, {2, 2}, {1, 1, 1, 1}});
  check({2, 5, 13, 11, 3, 3, 3, 1, {2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}});
  // Stride 1, no padding; 1x1; single pixel; odd everything.
  check({1, 3, 7, 7, 4, 3, 3, 1});
  check({1, 6, 5, 8, 7, 1, 1, 1});
  check({1, 4, 1, 1, 3, 3, 3, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, {0, 0}, {}, false});
  check({1, 3, 9, 13, 2, 2, 5, 1, {3, 2}, {2, 1, 0, 3}, {1, 1}, {2, 1}, {}, true, false});
  // Dilation, asymmetric pads larger than the kernel's reach at some taps.
  check({1, 2, 6, 7, 3, 3, 3, 1, {2, 1}, {3, 0, 2, 1}, {2, 3}});
  // Grouped and depthwise-style (C = group), run-time weights.
  check({1, 6, 7, 5, 2, 3, 3, 3, {2, 2}, {1, 1, 1, 1}});
  check({2, 4, 6, 6, 1, 4, 4, 4, {2, 2}, {1, 1, 1, 1}, {1, 1}, {0, 0}, {}, true, false});
  check({1, 8, 5, 5, 3, 2, 2, 2, {2, 2}, {0, 0, 0, 0}, {1, 1}, {1, 0}, {}, false, true});
  // output_shape (pads derived from it).
  check({1, 3, 5, 6, 2, 3, 3, 1, {2, 2}, {}, {1, 1}, {}, {10, 12}});
  // Several col chunks: rows (M_g * KH * KW = 1024) * W above the col bound.
  check({1, 2, 7, 300, 64, 4, 4, 1, {1, 1}, {0, 0, 0, 0}});
}

}  // namespace
}  // namespace peregrine
