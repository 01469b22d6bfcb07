// The CPU backend's pooling kernels (kernels/pool.cc) against the reference
// backend through the executor: odd plane sizes, strides 1 / 2 / 3 (the vector
// and element paths of the pooling-row micro-kernel), pads, dilations,
// ceil_mode, auto_pad, count_include_pad; global pools. At the selected ISA
// (run again with PEREGRINE_ISA=scalar); the micro-kernels themselves are
// tested at every ISA level in cpu_elementwise_test.cc.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/ukernels/q8_ukernels.h"
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
    // Narrow planes (the AVX-512 whole-plane kernel): several planes per vector of 16, planes
    // ending mid-vector, 2x2 / 3x3 / 5x5 (unrolled) and 7x7 (taps at run time) windows, strided
    // windows sampled with ceil_mode and end pads past the input, dilations.
    {{1, 37, 7, 7}, {3, 3}, {1, 1}, {1, 1, 1, 1}},
    {{2, 9, 3, 5}, {2, 2}, {1, 1}, {0, 0, 1, 1}},
    {{1, 19, 14, 14}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},
    // 2x2 / 2: the plane kernel (odd sizes drop the last row / column; ceil_mode on an odd
    // size leaves partial windows to the generic rows).
    {{1, 4, 56, 56}, {2, 2}, {2, 2}},
    {{2, 3, 7, 33}, {2, 2}, {2, 2}},
    {{1, 2, 9, 9}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},
    {{1, 5, 9, 11}, {7, 7}, {1, 1}, {3, 3, 3, 3}},
    {{1, 3, 20, 20}, {5, 5}, {1, 1}, {2, 2, 2, 2}},
    {{1, 7, 17, 17}, {3, 3}, {3, 3}, {1, 1, 2, 2}, {1, 1}, 1},
    {{1, 6, 12, 10}, {3, 2}, {1, 2}, {2, 1, 2, 1}, {2, 2}},
    {{1, 4, 31, 32}, {3, 3}, {2, 1}, {0, 1, 0, 1}},
};

// The case's attributes on `x` (default: random float32 values in [-2, 2]).
void check_pool(const char* op, const PoolCase& c, int64_t count_include_pad, Tensor x = Tensor()) {
  if (x.dtype() == DType::kUndefined) x = random_tensor(c.x, 1, -2.0f, 2.0f);
  SCOPED_TRACE(std::string(op) + " " + std::string(dtype_name(x.dtype())) +
               " x=" + shape_to_string(c.x) + " k=" + std::to_string(c.kernel[0]) + "x" +
               std::to_string(c.kernel[1]) + " s=" + std::to_string(c.strides[0]) + "," +
               std::to_string(c.strides[1]) + " cip=" + std::to_string(count_include_pad) + " " +
               c.auto_pad);
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
  OneNodeGraph g(op, {{"X", x}}, {false}, attrs, "", 19);
  // An average counting the padding under ceil_mode may leave its last window to the reference
  // (taps past the end padding do not count): any kernel name then.
  const bool may_fall_back = std::string(op) != "MaxPool" && count_include_pad && c.ceil_mode;
  compare_with_reference(g, cpu_backend(),
                         may_fall_back
                             ? std::string()
                             : std::string("cpu/") + (std::string(op) == "MaxPool" ? "max" : "avg"),
                         1e-6f, 1e-5f);
}

TEST(CpuPool, MaxPoolMatchesReference) {
  for (const PoolCase& c : kCases) check_pool("MaxPool", c, 0);
}

// 8-bit MaxPool (QDQ models' pools, fuse_qdq_max_pool): every case on uint8 and int8 values,
// equal outputs (the tolerance is below one step).
TEST(CpuPool, EightBitMaxPoolMatchesReference) {
  std::mt19937 rng(5);
  for (DType dtype : {DType::kUInt8, DType::kInt8})
    for (const PoolCase& c : kCases) {
      Tensor x = Tensor::zeros(dtype, c.x);
      uint8_t* bytes = static_cast<uint8_t*>(x.raw());
      for (int64_t i = 0; i < x.numel(); ++i) bytes[i] = static_cast<uint8_t>(rng());
      check_pool("MaxPool", c, 0, x);
    }
}

// The 8-bit row micro-kernels agree exactly across ISA levels: strides 1 / 2 / 3 (the vector
// paths and the per-column one), dilations, pads, widths around the 64-byte vector.
TEST(CpuPool, EightBitMaxPoolRowKernelsAgree) {
  if (!isa_supported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(9);
  for (size_t w : {1, 7, 63, 64, 65, 130})
    for (size_t kw : {1, 2, 3, 5})
      for (size_t sw : {1, 2, 3})
        for (size_t dw : {1, 2})
          for (size_t pl : {0, 1, 2}) {
            const size_t extent = (kw - 1) * dw + 1;
            if (pl >= extent || w + 2 * pl < extent) continue;
            const size_t ow = (w + 2 * pl - extent) / sw + 1;
            bool every_window_inside = true;  // the kernels' precondition
            for (size_t ox = 0; ox < ow; ++ox) {
              bool any = false;
              for (size_t j = 0; j < kw; ++j) {
                const size_t at = ox * sw + j * dw;
                any = any || (at >= pl && at - pl < w);
              }
              every_window_inside = every_window_inside && any;
            }
            if (!every_window_inside) continue;
            for (bool is_signed : {false, true}) {
              SCOPED_TRACE("w=" + std::to_string(w) + " kw=" + std::to_string(kw) +
                           " sw=" + std::to_string(sw) + " dw=" + std::to_string(dw) +
                           " pl=" + std::to_string(pl) + " signed=" + std::to_string(is_signed));
              std::vector<uint8_t> r0(w), r1(w);
              for (size_t i = 0; i < w; ++i) r0[i] = static_cast<uint8_t>(rng());
              for (size_t i = 0; i < w; ++i) r1[i] = static_cast<uint8_t>(rng());
              const uint8_t* rows[2] = {r0.data(), r1.data()};
              const Q8MaxPoolRow g{w, ow, kw, sw, dw, pl, is_signed};
              std::vector<uint8_t> scratch(q8_max_pool_scratch_bytes(g));
              std::vector<uint8_t> want(ow), got(ow + 1, 0xA5);
              q8_max_pool_row__scalar(rows, 2, g, scratch.data(), want.data());
              avx512::q8_max_pool_row__avx512(rows, 2, g, scratch.data(), got.data());
              EXPECT_EQ(got[ow], 0xA5) << "wrote past the row";
              got.resize(ow);
              EXPECT_EQ(got, want);
            }
          }
}

TEST(CpuPool, AveragePoolMatchesReference) {
  for (const PoolCase& c : kCases)
    for (int64_t cip : {0, 1}) check_pool("AveragePool", c, cip);
}

// count_include_pad with ceil_mode: the padding counts, the taps the last window reaches past
// the end padding do not (onnx 1.23's reference, PyTorch). A 1x1x1x5 row, kernel 1x3, stride
// 1x3, end pad 1: windows {0,1,2} and {3,4,pad}; ceil_mode adds nothing here. With end pad 0
// and ceil_mode the second window is {3,4,past}: divisor 2, where counting the kernel gave 3.
TEST(CpuPool, AverageCountsPaddingButNotTapsPastIt) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5}, {1, 1, 1, 5});
  for (const auto& [end_pad, second] : {std::pair<int64_t, float>{1, 3.0f}, {0, 4.5f}}) {
    OneNodeGraph g("AveragePool", {{"X", x}}, {false},
                   {ints_attr("kernel_shape", {1, 3}), ints_attr("strides", {1, 3}),
                    ints_attr("pads", {0, 0, 0, end_pad}), int_attr("ceil_mode", 1),
                    int_attr("count_include_pad", 1)},
                   "", 19);
    for (const Backend* backend :
         std::vector<const Backend*>{&reference_backend(), &cpu_backend()}) {
      SCOPED_TRACE(backend->name() + " end pad " + std::to_string(end_pad));
      Tensor y = g.run(*backend, 1, nullptr);
      ASSERT_EQ(y.numel(), 2);
      EXPECT_FLOAT_EQ(y.data<float>()[0], 2.0f);
      EXPECT_FLOAT_EQ(y.data<float>()[1], second);
    }
  }
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
