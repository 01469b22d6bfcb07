// Conv, MatMul, Gemm and Attention nodes at bf16 precision through the CPU backend, against the
// reference backend run on the same inputs rounded to bf16 (products of bf16 values are exact in
// float32, so only the order of the float32 sums differs): odd shapes, groups, strides, pads, the
// fused epilogue, 1-3 threads. Depthwise convs stay float32 and match the unrounded reference.
// Skipped where the CPU has no AVX512_BF16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm/bf16_gemm.h"
#include "backends/reference/reference_backend.h"
#include "cpu_one_node_graph.h"
#include "cpu_test_util.h"

namespace peregrine {
namespace {

using cpu::testing::expect_close;
using cpu::testing::float_attr;
using cpu::testing::int_attr;
using cpu::testing::ints_attr;
using cpu::testing::OneNodeGraph;
using cpu::testing::random_tensor;
using cpu::testing::string_attr;

Tensor rounded(const Tensor& t) {
  Tensor r = t;
  for (int64_t i = 0; i < r.numel(); ++i)
    r.data<float>()[i] = cpu::bf16_bits_to_float(cpu::float_to_bf16_bits(t.data<float>()[i]));
  return r;
}

// Builds the node twice from `inputs` (the `rounded_inputs` of them rounded for the reference),
// runs it at bf16 on the CPU backend and checks the kernel name holds `kernel_part`.
void check(const std::string& op, const std::vector<std::pair<std::string, Tensor>>& inputs,
           const std::vector<bool>& constant, const std::vector<ir::Attribute>& attrs,
           const std::vector<bool>& rounded_inputs, const std::string& kernel_part,
           const std::string& domain = "", float atol = 2e-4f) {
  std::vector<std::pair<std::string, Tensor>> ref_inputs = inputs;
  for (size_t i = 0; i < ref_inputs.size(); ++i)
    if (rounded_inputs[i]) ref_inputs[i].second = rounded(ref_inputs[i].second);
  OneNodeGraph ref(op, ref_inputs, constant, attrs, domain);
  const Tensor want = ref.run(reference_backend(), 1, nullptr);
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE("threads=" + std::to_string(threads));
    OneNodeGraph g(op, inputs, constant, attrs, domain);
    g.graph.nodes[0]->precision = Precision::kBFloat16;
    std::string kernel;
    const Tensor got = g.run(cpu_backend(), threads, &kernel);
    EXPECT_NE(kernel.find(kernel_part), std::string::npos) << kernel;
    expect_close(got, want, atol, 2e-5f);
  }
}

struct ConvCase {
  int64_t n, c, h, w, out_c, k, group;
  std::vector<int64_t> strides, pads;
};

void check_conv(const ConvCase& cc, const std::string& kernel_part = "bf16") {
  SCOPED_TRACE("conv c=" + std::to_string(cc.c) + " oc=" + std::to_string(cc.out_c) +
               " k=" + std::to_string(cc.k) + " group=" + std::to_string(cc.group));
  const bool bf16 = kernel_part.find("bf16") != std::string::npos;  // else float32 inputs
  check("Conv",
        {{"X", random_tensor({cc.n, cc.c, cc.h, cc.w}, 1)},
         {"W", random_tensor({cc.out_c, cc.c / cc.group, cc.k, cc.k}, 2)},
         {"B", random_tensor({cc.out_c}, 3)}},
        {false, true, true},
        {ints_attr("strides", cc.strides), ints_attr("pads", cc.pads), int_attr("group", cc.group)},
        {bf16, bf16, false}, kernel_part);
}

TEST(CpuBf16Conv, MatchesReferenceOnRoundedInputs) {
  if (!cpu::bf16_gemm_kernel()) GTEST_SKIP() << cpu::bf16_unavailable_reason();
  check_conv({1, 8, 7, 9, 15, 1, 1, {1, 1}, {0, 0, 0, 0}});           // 1x1: B the input planes
  check_conv({2, 5, 9, 8, 16, 1, 1, {2, 2}, {0, 0, 0, 0}});           // strided 1x1: im2col
  check_conv({1, 5, 13, 11, 17, 3, 1, {1, 1}, {1, 1, 1, 1}});         // 3x3, odd K (45)
  check_conv({1, 3, 13, 11, 17, 3, 1, {1, 1}, {1, 1, 1, 1}}, "f32");  // K 27 < 32: float32
  check_conv({1, 8, 9, 9, 13, 3, 1, {1, 1}, {1, 1, 1, 1}}, "f32");    // 13 rows: float32
  check_conv({1, 40, 12, 12, 30, 3, 1, {1, 1}, {1, 1, 1, 1}});        // K 360: two K blocks
  check_conv({1, 3, 31, 29, 16, 7, 1, {2, 2}, {3, 3, 3, 3}});         // a stem conv
  check_conv({1, 12, 9, 7, 45, 3, 3, {1, 1}, {1, 1, 1, 1}});          // grouped, 15 per group
  check_conv({1, 16, 9, 7, 16, 3, 2, {2, 2}, {1, 1, 1, 1}}, "f32");   // 8 per group: float32
  check_conv({1, 64, 20, 21, 20, 1, 1, {1, 1}, {0, 0, 0, 0}});        // N 420: several N blocks
  // Dilated, taps mostly in the padding: tap-wise 1x1 products, on the bf16 GEMM.
  check("Conv",
        {{"X", random_tensor({1, 12, 9, 10}, 1)},
         {"W", random_tensor({14, 12, 3, 3}, 2)},
         {"B", random_tensor({14}, 3)}},
        {false, true, true}, {ints_attr("dilations", {6, 6}), ints_attr("pads", {6, 6, 6, 6})},
        {true, true, false}, "tapwise-bf16");
  // 1-D and 3-D (kernels/conv_nd.cc).
  check("Conv",
        {{"X", random_tensor({2, 5, 41}, 1)},
         {"W", random_tensor({16, 5, 3}, 2)},
         {"B", random_tensor({16}, 3)}},
        {false, true, true}, {ints_attr("pads", {1, 1}), ints_attr("strides", {2})},
        {true, true, false}, "conv_nd-bf16");
  check("Conv",
        {{"X", random_tensor({1, 3, 6, 7, 9}, 1)},
         {"W", random_tensor({14, 3, 3, 3, 3}, 2)},
         {"B", random_tensor({14}, 3)}},
        {false, true, true}, {ints_attr("pads", {1, 1, 1, 1, 1, 1})}, {true, true, false},
        "conv_nd-bf16");
  // ConvTranspose, grouped, strided (kernels/conv_transpose.cc).
  check("ConvTranspose",
        {{"X", random_tensor({1, 6, 7, 8}, 1)},
         {"W", random_tensor({6, 5, 3, 3}, 2)},
         {"B", random_tensor({10}, 3)}},
        {false, true, true},
        {ints_attr("strides", {2, 2}), ints_attr("pads", {1, 1, 1, 1}), int_attr("group", 2)},
        {true, true, false}, "conv_transpose-bf16");
  // Depthwise: float32 kernels, the unrounded reference.
  check_conv({1, 7, 11, 13, 7, 3, 7, {1, 1}, {1, 1, 1, 1}}, "dwconv");
}

// Convs forced onto the bf16 phase planes (kernels/conv_phase_planes.h: planes of channel
// pairs, K ordered by tap then channel): odd channel counts (the zero channel of the last
// pair), C straight into Y and through scratch and compaction, 1-3 strides per axis,
// dilations, asymmetric pads, batches, K over two K blocks, maps down to 2x3; bias, residual
// and activations fused in the tile or applied after it.
TEST(CpuBf16Conv, PhasePlanesMatchReferenceOnRoundedInputs) {
  if (!cpu::bf16_gemm_kernel()) GTEST_SKIP() << cpu::bf16_unavailable_reason();
  cpu::testing::ScopedConvAlgo algo("planes");
  struct Case {
    int64_t n, c, h, w, out_c, kh, kw;
    std::vector<int64_t> strides, pads, dilations;
    std::string act;
    bool z;
  };
  for (const Case& cc : {
           Case{1, 5, 13, 11, 17, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, "Relu", false},
           Case{2, 7, 9, 10, 15, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, "", true},
           Case{1, 12, 17, 17, 19, 7, 1, {1, 1}, {3, 0, 3, 0}, {1, 1}, "Relu", true},
           Case{1, 12, 17, 17, 14, 1, 7, {1, 1}, {0, 3, 0, 3}, {1, 1}, "SiLU", true},
           Case{1, 40, 12, 12, 30, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, "Gelu", false},
           Case{1, 4, 16, 13, 15, 3, 3, {1, 2}, {2, 1, 0, 2}, {2, 3}, "Relu", false},
           Case{2, 5, 19, 23, 16, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, "", true},
           Case{1, 5, 20, 17, 14, 4, 5, {3, 2}, {1, 2, 2, 0}, {1, 2}, "", false},
           Case{1, 3, 31, 29, 16, 7, 7, {2, 2}, {3, 3, 3, 3}, {1, 1}, "Relu", false},
           Case{1, 9, 8, 8, 40, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, "Tanh", true},
           Case{1, 4, 2, 3, 14, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, "", true},
       }) {
    const int64_t oh =
        (cc.h + cc.pads[0] + cc.pads[2] - (cc.kh - 1) * cc.dilations[0] - 1) / cc.strides[0] + 1;
    const int64_t ow =
        (cc.w + cc.pads[1] + cc.pads[3] - (cc.kw - 1) * cc.dilations[1] - 1) / cc.strides[1] + 1;
    SCOPED_TRACE("bf16 phase-plane conv c=" + std::to_string(cc.c) +
                 " oc=" + std::to_string(cc.out_c) + " k=" + std::to_string(cc.kh) + "x" +
                 std::to_string(cc.kw) + " out=" + std::to_string(oh) + "x" + std::to_string(ow) +
                 " act=" + cc.act);
    std::vector<std::pair<std::string, Tensor>> inputs = {
        {"X", random_tensor({cc.n, cc.c, cc.h, cc.w}, 1)},
        {"W", random_tensor({cc.out_c, cc.c, cc.kh, cc.kw}, 2)},
        {"B", random_tensor({cc.out_c}, 3)}};
    std::vector<bool> constant = {false, true, true}, rounded_inputs = {true, true, false};
    if (cc.z) {
      inputs.push_back({"Z", random_tensor({cc.n, cc.out_c, oh, ow}, 4)});
      constant.push_back(false);
      rounded_inputs.push_back(false);
    }
    check("FusedConv", inputs, constant,
          {ints_attr("strides", cc.strides), ints_attr("pads", cc.pads),
           ints_attr("dilations", cc.dilations), string_attr("activation", cc.act),
           passes::floats_attr("activation_params", {})},
          rounded_inputs, "phase_planes-bf16", "peregrine");
  }
}

// Winograd at bf16 (F(2x2) only): U and V are rounded after the transforms, so the error is
// not that of rounded x and w. The check: the output's RMS error relative to its RMS stays
// within 2.5x the direct bf16 conv's on the same layer (measured: F(2x2) 1.9x, F(4x4) 12x,
// which is why the rule never picks F(4x4) at bf16).
double relative_rms_error(const Tensor& got, const Tensor& want) {
  double err = 0, ref = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double d = got.data<float>()[i] - want.data<float>()[i];
    err += d * d;
    ref += static_cast<double>(want.data<float>()[i]) * want.data<float>()[i];
  }
  return std::sqrt(err / ref);
}

void check_winograd(int64_t channels, int64_t size) {
  SCOPED_TRACE("winograd c=" + std::to_string(channels) + " size=" + std::to_string(size));
  const std::vector<std::pair<std::string, Tensor>> inputs = {
      {"X", random_tensor({1, channels, size, size}, 1)},
      {"W", random_tensor({channels, channels, 3, 3}, 2)},
      {"B", random_tensor({channels}, 3)}};
  const std::vector<ir::Attribute> attrs = {ints_attr("pads", {1, 1, 1, 1})};
  OneNodeGraph ref("Conv", inputs, {false, true, true}, attrs);
  const Tensor want = ref.run(reference_backend(), 1, nullptr);
  setenv("PEREGRINE_CONV_ALGO", "im2col", 1);  // read at prepare time
  OneNodeGraph direct("Conv", inputs, {false, true, true}, attrs);
  direct.graph.nodes[0]->precision = Precision::kBFloat16;
  std::string direct_kernel;
  const double direct_error =
      relative_rms_error(direct.run(cpu_backend(), 1, &direct_kernel), want);
  unsetenv("PEREGRINE_CONV_ALGO");
  EXPECT_EQ(direct_kernel.find("winograd"), std::string::npos) << direct_kernel;
  cpu::testing::ScopedConvAlgo algo("winograd_f2x3");  // the rule picks it on wide layers only
  for (int threads : {1, 2}) {
    OneNodeGraph g("Conv", inputs, {false, true, true}, attrs);
    g.graph.nodes[0]->precision = Precision::kBFloat16;
    std::string kernel;
    const Tensor got = g.run(cpu_backend(), threads, &kernel);
    EXPECT_NE(kernel.find("winograd_f2x3-bf16"), std::string::npos) << kernel;
    EXPECT_LE(relative_rms_error(got, want), 2.5 * direct_error);
  }
}

TEST(CpuBf16Conv, WinogradWithinBf16Error) {
  if (!cpu::bf16_gemm_kernel()) GTEST_SKIP() << cpu::bf16_unavailable_reason();
  check_winograd(40, 29);  // where float32 takes F(4x4); K 40: partial K panels
  check_winograd(64, 14);  // where float32 takes F(2x2)
}

// The automatic choice at bf16 between Winograd F(2x2) and the phase planes (conv.cc,
// bf16_phase_planes_beat_winograd): Winograd only for many channels (h = in_c out_c / (in_c +
// out_c) >= 110) on maps of 14x14 and up.
TEST(CpuBf16Conv, AutoRuleBetweenWinogradAndPhasePlanes) {
  if (!cpu::bf16_gemm_kernel()) GTEST_SKIP() << cpu::bf16_unavailable_reason();
  struct Case {
    int64_t channels, size;
    const char* kernel;
  };
  for (const Case& cc : {Case{64, 28, "phase_planes-bf16"}, Case{224, 14, "winograd_f2x3-bf16"},
                         Case{216, 14, "phase_planes-bf16"}, Case{224, 13, "phase_planes-bf16"}}) {
    SCOPED_TRACE("c=" + std::to_string(cc.channels) + " size=" + std::to_string(cc.size));
    OneNodeGraph g("Conv",
                   {{"X", random_tensor({1, cc.channels, cc.size, cc.size}, 1)},
                    {"W", random_tensor({cc.channels, cc.channels, 3, 3}, 2)}},
                   {false, true}, {ints_attr("pads", {1, 1, 1, 1})});
    g.graph.nodes[0]->precision = Precision::kBFloat16;
    std::string kernel;
    g.run(cpu_backend(), 1, &kernel);
    EXPECT_NE(kernel.find(cc.kernel), std::string::npos) << kernel;
  }
}

TEST(CpuBf16MatMul, MatchesReferenceOnRoundedInputs) {
  if (!cpu::bf16_gemm_kernel()) GTEST_SKIP() << cpu::bf16_unavailable_reason();
  struct Case {
    Shape a, b;
  };
  for (const Case& c :
       {Case{{7, 13}, {13, 17}}, Case{{2, 3, 5, 64}, {64, 33}}, Case{{1, 300}, {300, 40}},
        Case{{130, 65}, {65, 70}}, Case{{1, 1}, {1, 1}}}) {
    SCOPED_TRACE("matmul " + shape_to_string(c.a) + " x " + shape_to_string(c.b));
    check("MatMul", {{"A", random_tensor(c.a, 1)}, {"Bm", random_tensor(c.b, 2)}}, {false, true},
          {}, {true, true}, "bf16");
  }
}

// peregrine.Attention at bf16: Q, K and V rounded for the reference (the scale 0.125 is a power
// of two, so rounding Q then scaling is the kernel's rounding of the scaled Q). The kernel also
// rounds the softmax weights P to bf16, a relative error of at most 2^-9 each; with V in
// [-1, 1] an output moves by at most 2^-9 < 2e-3.
TEST(CpuBf16Attention, MatchesReferenceOnRoundedInputs) {
  if (!cpu::bf16_gemm_kernel()) GTEST_SKIP() << cpu::bf16_unavailable_reason();
  struct Case {
    Shape q, k, v, mask;
    int64_t heads, k_transposed, causal;
  };
  for (const Case& c :
       {Case{{1, 13, 3 * 7}, {1, 13, 3 * 7}, {1, 13, 3 * 5}, {}, 3, 0, 0},
        Case{{2, 130, 2 * 64}, {2, 130, 2 * 64}, {2, 130, 2 * 64}, {2, 1, 1, 130}, 2, 0, 1},
        Case{{1, 3, 29, 40}, {1, 3, 40, 45}, {1, 3, 45, 33}, {1, 1, 1, 45}, 0, 1, 0}}) {
    SCOPED_TRACE("attention Q=" + shape_to_string(c.q) + " K=" + shape_to_string(c.k));
    std::vector<std::pair<std::string, Tensor>> inputs = {
        {"Q", random_tensor(c.q, 1)}, {"K", random_tensor(c.k, 2)}, {"V", random_tensor(c.v, 3)}};
    std::vector<bool> constant = {false, false, false}, rounded_inputs = {true, true, true};
    if (!c.mask.empty()) {
      inputs.push_back({"M", random_tensor(c.mask, 4)});
      constant.push_back(false);
      rounded_inputs.push_back(false);
    }
    check("Attention", inputs, constant,
          {int_attr("num_heads", c.heads), float_attr("scale", 0.125f),
           int_attr("k_transposed", c.k_transposed), int_attr("causal", c.causal)},
          rounded_inputs, "bf16_attention", "peregrine", 2e-3f);
  }
}

TEST(CpuBf16Gemm, MatchesReferenceOnRoundedInputs) {
  if (!cpu::bf16_gemm_kernel()) GTEST_SKIP() << cpu::bf16_unavailable_reason();
  struct Case {
    int64_t m, n, k;
    bool ta, tb;
    float alpha, beta;
    Shape c;
  };
  for (const Case& c :
       {Case{7, 13, 5, false, false, 1, 1, {13}}, Case{20, 3, 31, true, true, 0.5f, 2, {20, 3}},
        Case{150, 70, 40, false, true, 1, 1, {70}},
        Case{20, 3, 31, false, false, -1, 0.25f, {1, 3}}}) {
    SCOPED_TRACE("gemm " + std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
                 std::to_string(c.k));
    const Shape sa = c.ta ? Shape{c.k, c.m} : Shape{c.m, c.k};
    const Shape sb = c.tb ? Shape{c.n, c.k} : Shape{c.k, c.n};
    check("Gemm",
          {{"A", random_tensor(sa, 1)}, {"Bm", random_tensor(sb, 2)}, {"C", random_tensor(c.c, 3)}},
          {false, true, true},
          {int_attr("transA", c.ta), int_attr("transB", c.tb), float_attr("alpha", c.alpha),
           float_attr("beta", c.beta)},
          {true, true, false}, "bf16");
  }
}

}  // namespace
}  // namespace peregrine
