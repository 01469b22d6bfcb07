// Fused attention on the CPU (kernels/attention.h):
//   - the driver at every ISA level this machine has against a naive
//     softmax(Q K^T * scale + mask) V in double, over odd sequence lengths and head sizes, every
//     broadcast form of the mask, causal, 1 / 3 / 12 heads and 1 / 2 / 3 threads, with the
//     output ending at a guard page;
//   - peregrine.Attention through the CPU backend against the reference backend, in the head
//     form (B, S, H*D), the per-head form (..., S, D) with K or K^T and broadcast batch dims.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm/bf16_gemm.h"
#include "backends/cpu/kernels/attention.h"
#include "backends/cpu/ukernels/bf16_gemm_ukernels.h"
#include "backends/reference/evaluate.h"
#include "backends/reference/reference_backend.h"
#include "cpu_one_node_graph.h"
#include "cpu_test_util.h"
#include "ir/graph.h"
#include "ops/type_inference.h"
#include "passes/pass_util.h"
#include "runtime/executor.h"

namespace peregrine {
namespace {

using cpu::testing::compare_with_reference;
using cpu::testing::OneNodeGraph;
using cpu::testing::random_tensor;

using cpu::testing::GuardedBuffer;
using cpu::testing::random_floats;

std::vector<const cpu::AttentionKernelInfo*> available_kernels() {
  std::vector<const cpu::AttentionKernelInfo*> out;
  for (cpu::Isa isa : cpu::testing::isa_levels())
    if (const auto* k = cpu::f32_attention_kernel_for(isa)) out.push_back(k);
  return out;
}

// How the driver finds K: row-major in the head form (B, Skv, H*D), transposed per head
// (B, H, D, Skv), or neither (per head, key j feature e at 2 j + 2 Skv e: no stride is 1).
enum class KeyLayout { kRows, kTransposed, kStrided };

// Head-form problem: Q (B, Sq, H*D), K (B, Skv, H*D) or as `keys` says, V (B, Skv, H*Dv), out
// (B, Sq, H*Dv); mask of shape `mask_shape` broadcast to the scores (B, H, Sq, Skv) (empty
// shape: no mask).
struct Case {
  int64_t b, h, sq, skv, d, dv;
  Shape mask_shape;  // rank 4 (1 where broadcast), or {} for none
  bool causal = false;
  KeyLayout keys = KeyLayout::kRows;
};

std::string describe(const Case& c) {
  return "B=" + std::to_string(c.b) + " H=" + std::to_string(c.h) + " Sq=" + std::to_string(c.sq) +
         " Skv=" + std::to_string(c.skv) + " D=" + std::to_string(c.d) +
         " Dv=" + std::to_string(c.dv) + " mask=" + shape_to_string(c.mask_shape) +
         " causal=" + std::to_string(c.causal) + " keys=" + std::to_string(int(c.keys));
}

float bf16_rounded(float x) { return cpu::bf16_bits_to_float(cpu::float_to_bf16_bits(x)); }

// The driver against softmax(Q K^T * scale + mask) V in double. With `bf16`, the reference
// takes Q * scale, K and V rounded to bf16 as the kernel does; what remains is the kernel's
// rounding of P to bf16, a relative error of at most 2^-9 per weight, so at most 2^-9 of
// max |V| per output.
void check_driver(const cpu::AttentionKernelInfo& kernel, const Case& c, int threads,
                  bool bf16 = false) {
  SCOPED_TRACE(std::string(kernel.name) + " " + describe(c) +
               " threads=" + std::to_string(threads));
  const int64_t hd = c.h * c.d, hdv = c.h * c.dv;
  std::vector<float> q = random_floats(size_t(c.b * c.sq * hd), 1, -2, 2);
  std::vector<float> k = random_floats(size_t(c.b * c.skv * hd), 2, -2, 2);
  std::vector<float> v = random_floats(size_t(c.b * c.skv * hdv), 3);
  std::vector<float> mask;
  int64_t mstride[4] = {0, 0, 0, 0};
  if (!c.mask_shape.empty()) {
    int64_t n = 1;
    for (int i = 3; i >= 0; --i) {
      mstride[i] = c.mask_shape[size_t(i)] == 1 ? 0 : n;
      n *= c.mask_shape[size_t(i)];
    }
    mask = random_floats(size_t(n), 4, -3, 0);
    // BERT's padding value on some keys (a value shared by a whole row only shifts it, and in
    // float costs the scores their low bits, so only where the mask varies along the keys).
    if (c.mask_shape[3] != 1)
      for (size_t i = 0; i < mask.size(); i += 5) mask[i] = -10000.0f;
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(std::max<int64_t>(c.d, 1)));
  GuardedBuffer out(size_t(c.b * c.sq * hdv));
  // K in the case's layout: element (b, h, j, e) of the logical head-form K.
  std::vector<float> k_stored(k.size() * (c.keys == KeyLayout::kStrided ? 2 : 1), NAN);
  int64_t k_rs = hd, k_cs = 1, k_bs = c.skv * hd, k_hs = c.d;
  if (c.keys == KeyLayout::kTransposed) k_rs = 1, k_cs = c.skv;
  if (c.keys == KeyLayout::kStrided) k_rs = 2, k_cs = 2 * c.skv;
  if (c.keys != KeyLayout::kRows) k_hs = 2 * c.d * c.skv, k_bs = c.h * k_hs;
  if (c.keys == KeyLayout::kTransposed) k_hs = c.d * c.skv, k_bs = c.h * k_hs;
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t j = 0; j < c.skv; ++j)
        for (int64_t e = 0; e < c.d; ++e)
          k_stored[size_t(b * k_bs + h * k_hs + j * k_rs + e * k_cs)] =
              k[size_t((b * c.skv + j) * hd + h * c.d + e)];

  cpu::AttentionProblem p;
  p.batch_rank = 2;
  p.batch_dims[0] = c.b;
  p.batch_dims[1] = c.h;
  p.sq = c.sq;
  p.skv = c.skv;
  p.d = c.d;
  p.dv = c.dv;
  p.scale = scale;
  p.causal = c.causal;
  auto operand = [&](const float* data, int64_t rows, int64_t width) {
    cpu::AttentionOperand o;
    o.data = data;
    o.batch_strides[0] = rows * c.h * width;
    o.batch_strides[1] = width;
    o.rs = c.h * width;
    o.cs = 1;
    return o;
  };
  p.q = operand(q.data(), c.sq, c.d);
  p.k.data = k_stored.data();
  p.k.batch_strides[0] = k_bs;
  p.k.batch_strides[1] = k_hs;
  p.k.rs = k_rs;
  p.k.cs = k_cs;
  p.v = operand(v.data(), c.skv, c.dv);
  p.out = operand(out.data(), c.sq, c.dv);
  if (!mask.empty()) {
    p.mask.data = mask.data();
    p.mask.batch_strides[0] = mstride[0];
    p.mask.batch_strides[1] = mstride[1];
    p.mask.rs = mstride[2];
    p.mask.cs = mstride[3];
  }
  cpu::run_attention(kernel, p, threads);

  auto rounded = [&](float x) { return bf16 ? bf16_rounded(x) : x; };
  float v_max = 0;
  for (float x : v) v_max = std::max(v_max, std::abs(x));
  const double tolerance_abs = 2e-5 + (bf16 ? std::ldexp(double(v_max), -9) : 0.0);
  std::vector<double> s(size_t(c.skv));
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t i = 0; i < c.sq; ++i) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < c.skv; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < c.d; ++e) {
            const float qe = q[size_t((b * c.sq + i) * hd + h * c.d + e)];
            const float ke = k[size_t((b * c.skv + j) * hd + h * c.d + e)];
            dot += bf16 ? double(rounded(qe * scale)) * rounded(ke) : double(qe) * ke * scale;
          }
          double x = dot;
          const int64_t idx[4] = {b, h, i, j};
          if (!mask.empty()) {
            int64_t off = 0;
            for (int a = 0; a < 4; ++a) off += idx[a] * mstride[a];
            x += mask[size_t(off)];
          }
          if (c.causal && j > i + c.skv - c.sq) x = -INFINITY;
          s[size_t(j)] = x;
          mx = std::max(mx, x);
        }
        double sum = 0;
        for (auto& x : s) sum += (x = std::exp(x - mx));
        for (int64_t col = 0; col < c.dv; ++col) {
          double want = 0;
          for (int64_t j = 0; j < c.skv; ++j)
            want += s[size_t(j)] * rounded(v[size_t((b * c.skv + j) * hdv + h * c.dv + col)]);
          want /= sum;
          const float got = out.data()[(b * c.sq + i) * hdv + h * c.dv + col];
          ASSERT_NEAR(got, want, tolerance_abs + 2e-5 * std::abs(want))
              << "b=" << b << " h=" << h << " i=" << i << " col=" << col;
        }
      }
}

TEST(CpuAttention, DriverMatchesNaiveAtEveryIsa) {
  const std::vector<Case> cases = {
      // Odd sequence lengths and head sizes, no mask.
      {1, 1, 1, 1, 1, 1, {}},
      {1, 3, 7, 7, 7, 7, {}},
      {2, 1, 13, 13, 64, 64, {}},
      {1, 12, 127, 127, 64, 64, {}},
      {1, 3, 13, 127, 8, 24, {}},
      {1, 1, 130, 70, 16, 17, {}},  // several query blocks and key blocks, dv % 8 != 0
      {1, 2, 7, 200, 9, 5, {}},
      {1, 2, 300, 197, 64, 48, {}},  // three query blocks; dv: a 32- and a 16-column tile
      {4, 4, 256, 256, 36, 36, {}},  // MobileViT: dv padded from 36 to whole vectors
      // Mask in each broadcast form.
      {2, 3, 13, 13, 64, 64, {2, 1, 1, 13}},  // padding mask (B, 1, 1, Skv)
      {1, 3, 13, 13, 7, 7, {1, 1, 13, 13}},   // (1, 1, Sq, Skv)
      {2, 3, 7, 13, 8, 8, {2, 3, 7, 13}},     // full
      {2, 3, 7, 13, 8, 8, {1, 3, 1, 1}},      // per head
      {1, 2, 13, 7, 16, 16, {1, 1, 13, 1}},   // per query row (broadcast over keys)
      {1, 12, 127, 127, 64, 64, {1, 1, 1, 127}},
      // Causal, with and without a mask, Skv >= Sq.
      {1, 3, 13, 13, 64, 64, {}, true},
      {1, 1, 127, 127, 7, 7, {}, true},
      {2, 3, 7, 130, 16, 16, {2, 1, 1, 130}, true},
      {1, 1, 1, 13, 1, 1, {}, true},
      {1, 2, 70, 70, 8, 8, {1, 1, 70, 70}, true},
      // Keys and values packed once for many query blocks, three key blocks, mask and causal.
      {1, 2, 260, 300, 24, 20, {1, 1, 260, 300}, true},
      // K^T (k_transposed) and K with no contiguous axis.
      {1, 3, 13, 70, 9, 7, {}, false, KeyLayout::kTransposed},
      {1, 2, 200, 140, 33, 40, {1, 1, 1, 140}, false, KeyLayout::kTransposed},
      {1, 3, 13, 70, 9, 7, {1, 3, 13, 70}, true, KeyLayout::kStrided},
  };
  for (const auto* kernel : available_kernels())
    for (const Case& c : cases)
      for (int threads : {1, 2, 3}) check_driver(*kernel, c, threads);
}

// The same cases on the bf16 tile, where this CPU has AVX512_BF16, against a reference on the
// bf16-rounded operands; plus head sizes past 32 features and odd key counts (the bf16 pairs).
TEST(CpuAttention, Bf16DriverMatchesRoundedNaive) {
  const cpu::AttentionKernelInfo* kernel = cpu::bf16_attention_kernel();
  if (kernel == nullptr) GTEST_SKIP() << cpu::bf16_unavailable_reason();
  const std::vector<Case> cases = {
      {1, 1, 1, 1, 1, 1, {}},
      {1, 3, 7, 7, 7, 7, {}},
      {1, 12, 127, 127, 64, 64, {1, 1, 1, 127}},
      {1, 1, 130, 70, 16, 17, {}},
      {1, 2, 300, 197, 64, 48, {}},
      {4, 4, 256, 256, 36, 36, {}},
      {1, 2, 29, 45, 80, 33, {1, 1, 1, 45}},  // 40 pairs: a 16-pair transpose block and a part
      {2, 3, 7, 13, 8, 8, {2, 3, 7, 13}},
      {1, 3, 13, 13, 64, 64, {}, true},
      {2, 3, 7, 130, 16, 16, {2, 1, 1, 130}, true},
      {1, 2, 260, 300, 24, 20, {1, 1, 260, 300}, true},
      {1, 3, 13, 70, 9, 7, {}, false, KeyLayout::kTransposed},
      {1, 2, 200, 140, 33, 40, {1, 1, 1, 140}, false, KeyLayout::kTransposed},
      {1, 3, 13, 70, 9, 7, {1, 3, 13, 70}, true, KeyLayout::kStrided},
  };
  for (const Case& c : cases)
    for (int threads : {1, 2, 3}) check_driver(*kernel, c, threads, /*bf16=*/true);
}

TEST(CpuAttention, EmptyShapesDoNothing) {
  for (const auto* kernel : available_kernels()) {
    cpu::AttentionProblem p;
    p.batch_rank = 2;
    p.batch_dims[0] = 0;  // no batch
    p.batch_dims[1] = 3;
    p.sq = p.skv = p.d = p.dv = 4;
    cpu::run_attention(*kernel, p, 2);  // touches nothing (all pointers null)
  }
}

// ---- Through the backends -------------------------------------------------------------------

using passes::float_attr;
using passes::int_attr;

// One peregrine.Attention node, every input a graph input.
struct AttentionGraph : OneNodeGraph {
  AttentionGraph(const std::vector<std::pair<std::string, Tensor>>& inputs,
                 std::vector<ir::Attribute> attrs)
      : OneNodeGraph("Attention", inputs, std::vector<bool>(inputs.size(), false), std::move(attrs),
                     "peregrine") {}
};

void compare_backends(AttentionGraph& g, bool expect_cpu_kernel = true) {
  compare_with_reference(g, cpu_backend(), expect_cpu_kernel ? "cpu/f32_attention" : "", 1e-5f,
                         1e-5f);
}

TEST(CpuAttention, HeadFormMatchesReference) {
  struct HeadCase {
    int64_t b, s, heads, d;
    Shape mask;
    bool causal;
  };
  for (const HeadCase& c :
       {HeadCase{1, 1, 1, 1, {}, false}, HeadCase{1, 7, 3, 7, {1, 1, 1, 7}, false},
        HeadCase{2, 13, 12, 8, {2, 1, 1, 13}, false},
        HeadCase{1, 127, 12, 64, {1, 1, 1, 127}, false}, HeadCase{1, 13, 3, 64, {13, 13}, true},
        HeadCase{1, 30, 1, 64, {}, true}}) {
    SCOPED_TRACE("B=" + std::to_string(c.b) + " S=" + std::to_string(c.s) +
                 " H=" + std::to_string(c.heads) + " D=" + std::to_string(c.d) +
                 " mask=" + shape_to_string(c.mask) + " causal=" + std::to_string(c.causal));
    const Shape x{c.b, c.s, c.heads * c.d};
    std::vector<std::pair<std::string, Tensor>> inputs = {{"Q", random_tensor(x, 1, -2, 2)},
                                                          {"K", random_tensor(x, 2, -2, 2)},
                                                          {"V", random_tensor(x, 3)}};
    if (!c.mask.empty()) inputs.push_back({"M", random_tensor(c.mask, 4, -3, 0)});
    AttentionGraph g(inputs, {int_attr("num_heads", c.heads), float_attr("scale", 0.125f),
                              int_attr("causal", c.causal)});
    compare_backends(g);
  }
}

TEST(CpuAttention, PerHeadFormMatchesReference) {
  struct PlainCase {
    Shape q, k, v, mask;
    bool k_transposed;
  };
  for (const PlainCase& c : {
           PlainCase{{1, 3, 7, 8}, {1, 3, 8, 7}, {1, 3, 7, 5}, {1, 1, 1, 7}, true},
           PlainCase{{2, 3, 13, 7}, {2, 3, 13, 7}, {2, 3, 13, 9}, {}, false},
           PlainCase{{2, 3, 13, 7}, {3, 7, 70}, {1, 70, 9}, {13, 70}, true},  // broadcast K / V
           PlainCase{{5, 1}, {1, 5}, {5, 3}, {5, 5}, true},                   // no batch dims
           PlainCase{{1, 12, 127, 64}, {1, 12, 64, 127}, {1, 12, 127, 64}, {1, 1, 1, 127}, true},
       }) {
    SCOPED_TRACE("Q=" + shape_to_string(c.q) + " K=" + shape_to_string(c.k) +
                 " V=" + shape_to_string(c.v) + " mask=" + shape_to_string(c.mask));
    std::vector<std::pair<std::string, Tensor>> inputs = {{"Q", random_tensor(c.q, 1, -2, 2)},
                                                          {"K", random_tensor(c.k, 2, -2, 2)},
                                                          {"V", random_tensor(c.v, 3)}};
    if (!c.mask.empty()) inputs.push_back({"M", random_tensor(c.mask, 4, -3, 0)});
    AttentionGraph g(inputs, {float_attr("scale", 0.3f), int_attr("k_transposed", c.k_transposed)});
    compare_backends(g);
  }
}

// Grouped-query attention: K / V with fewer heads than Q, in both forms, with masks that vary
// per head and per batch.
TEST(CpuAttention, GroupedQueryHeadsMatchReference) {
  struct GroupCase {
    int64_t b, sq, skv, heads, kv_heads, d, dv;
    bool per_head, mask, causal;
  };
  for (const GroupCase& c : {GroupCase{1, 7, 7, 4, 2, 8, 8, false, false, false},
                             GroupCase{2, 5, 9, 6, 3, 7, 5, false, true, false},
                             GroupCase{1, 13, 13, 6, 1, 16, 16, false, false, true},
                             GroupCase{2, 3, 11, 8, 2, 9, 6, true, true, false},
                             GroupCase{1, 17, 17, 6, 3, 64, 64, true, false, true},
                             // decode steps: one query per head, the group's queries as rows
                             GroupCase{2, 1, 9, 8, 2, 16, 16, false, true, true},
                             GroupCase{1, 1, 33, 6, 3, 64, 40, true, true, false},
                             GroupCase{2, 1, 130, 4, 2, 8, 8, true, false, true}}) {
    SCOPED_TRACE("B=" + std::to_string(c.b) + " Sq=" + std::to_string(c.sq) +
                 " Skv=" + std::to_string(c.skv) + " H=" + std::to_string(c.heads) +
                 " Hkv=" + std::to_string(c.kv_heads) + " per_head=" + std::to_string(c.per_head));
    const Shape q = c.per_head ? Shape{c.b, c.heads, c.sq, c.d} : Shape{c.b, c.sq, c.heads * c.d};
    const Shape k =
        c.per_head ? Shape{c.b, c.kv_heads, c.skv, c.d} : Shape{c.b, c.skv, c.kv_heads * c.d};
    const Shape v =
        c.per_head ? Shape{c.b, c.kv_heads, c.skv, c.dv} : Shape{c.b, c.skv, c.kv_heads * c.dv};
    std::vector<std::pair<std::string, Tensor>> inputs = {{"Q", random_tensor(q, 1, -2, 2)},
                                                          {"K", random_tensor(k, 2, -2, 2)},
                                                          {"V", random_tensor(v, 3)}};
    if (c.mask) inputs.push_back({"M", random_tensor({c.b, c.heads, c.sq, c.skv}, 4, -3, 0)});
    std::vector<ir::Attribute> attrs = {float_attr("scale", 0.3f), int_attr("causal", c.causal)};
    if (!c.per_head) {
      attrs.push_back(int_attr("num_heads", c.heads));
      attrs.push_back(int_attr("kv_num_heads", c.kv_heads));
    }
    AttentionGraph g(inputs, attrs);
    compare_backends(g);
  }
}

// softcap: scores tanh-capped before the mask, in both forms and with causal.
TEST(CpuAttention, SoftcapMatchesReference) {
  for (bool per_head : {false, true})
    for (bool causal : {false, true}) {
      SCOPED_TRACE("per_head=" + std::to_string(per_head) + " causal=" + std::to_string(causal));
      const Shape x = per_head ? Shape{2, 3, 37, 16} : Shape{2, 37, 3 * 16};
      std::vector<std::pair<std::string, Tensor>> inputs = {
          {"Q", random_tensor(x, 1, -3, 3)},
          {"K", random_tensor(x, 2, -3, 3)},
          {"V", random_tensor(x, 3)},
          {"M", random_tensor({37, 37}, 4, -3, 0)}};
      std::vector<ir::Attribute> attrs = {float_attr("scale", 0.5f), float_attr("softcap", 2.5f),
                                          int_attr("causal", causal)};
      if (!per_head) attrs.push_back(int_attr("num_heads", 3));
      AttentionGraph g(inputs, attrs);
      compare_backends(g);
    }
}

// empty_rows_zero: a query row whose every key is masked gives zeros, not NaN.
TEST(CpuAttention, EmptyRowsGiveZerosWhenAsked) {
  const Shape x{1, 2, 37, 16};
  Tensor mask = random_tensor({37, 37}, 4, -3, 0);
  for (int64_t j = 0; j < 37; ++j) mask.data<float>()[5 * 37 + j] = -INFINITY;
  std::vector<std::pair<std::string, Tensor>> inputs = {{"Q", random_tensor(x, 1)},
                                                        {"K", random_tensor(x, 2)},
                                                        {"V", random_tensor(x, 3)},
                                                        {"M", mask}};
  AttentionGraph g(inputs, {float_attr("scale", 0.25f), int_attr("empty_rows_zero", 1)});
  compare_backends(g);
  std::string kernel;
  const Tensor got = g.run(cpu_backend(), 1, &kernel);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t c = 0; c < 16; ++c) EXPECT_EQ(got.data<float>()[(h * 37 + 5) * 16 + c], 0.0f);
}

TEST(CpuAttention, EmptyTensorsMatchReference) {
  AttentionGraph g({{"Q", random_tensor({1, 0, 8}, 1)},
                    {"K", random_tensor({1, 5, 8}, 2)},
                    {"V", random_tensor({1, 5, 8}, 3)}},
                   {int_attr("num_heads", 2), float_attr("scale", 0.5f)});
  compare_backends(g, /*expect_cpu_kernel=*/false);
}

}  // namespace
}  // namespace peregrine
