// onnx_attention_to_fused: ONNX Attention becomes peregrine.Attention where the fused kernel
// computes the same thing (numerics checked on the reference backend), grouped-query heads
// and softcap included, and is left alone where it would not (a read present_key, causal with
// unequal lengths, KV heads that do not divide the query heads).
#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"
#include "graph_builder.h"
#include "passes/pass_list.h"
#include "passes/pass_manager.h"

namespace peregrine::testing {
namespace {

// Q (1, 2, 3, 4); K, V (1, kv_heads, kv_len, 4); a float mask when asked.
ir::Graph attention_graph(int64_t kv_heads, int64_t kv_len, bool mask, bool causal,
                          bool read_present, float softcap) {
  GraphBuilder b(23);
  b.input("q", {1, 2, 3, 4});
  b.input("k", {1, kv_heads, kv_len, 4});
  b.input("v", {1, kv_heads, kv_len, 4});
  std::vector<std::string> in = {"q", "k", "v"};
  if (mask) {
    b.random("m", {3, kv_len}, 9);
    in.push_back("m");
  }
  ir::Node& n = b.node("Attention", in, {"y", read_present ? "pk" : "", "", ""});
  if (causal) n.attributes["is_causal"] = int_attr("is_causal", 1);
  if (softcap > 0) n.attributes["softcap"] = float_attr("softcap", softcap);
  b.output("y");
  if (read_present) b.output("pk");
  return b.build();
}

bool fuses(ir::Graph g) {
  passes::PassManager pm;
  pm.add(passes::make_onnx_attention_to_fused());
  EXPECT_TRUE(pm.run(g).is_ok());
  return count_op(g, "Attention") == 1 && g.nodes[0]->domain == "peregrine";
}

// Runs the pass on g, expects exactly one fused peregrine.Attention, and returns the graph's
// outputs before the pass (computed on the reference backend) for further checks; the outputs
// after it must match them.
std::vector<Tensor> fuse_and_compare(ir::Graph& g) {
  const std::vector<Tensor> before = run_graph(g);
  passes::PassManager pm;
  pm.add(passes::make_onnx_attention_to_fused());
  EXPECT_TRUE(pm.run(g).is_ok());
  EXPECT_EQ(count_op(g, "Attention"), 1);
  for (const auto& node : g.nodes)
    if (node->op_type == "Attention") EXPECT_EQ(node->domain, "peregrine");
  expect_close(run_graph(g), before, 1e-5);
  return before;
}

TEST(OnnxAttentionToFused, FusesPlainMaskedAndCausalAttention) {
  for (auto [mask, causal] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
    SCOPED_TRACE(std::to_string(mask) + std::to_string(causal));
    ir::Graph g = attention_graph(2, 3, mask, causal, false, 0);
    fuse_and_compare(g);
    EXPECT_EQ(g.nodes.size(), 1u);
  }
}

// Q with 6 heads of 5, K / V with kv_heads heads over 7 keys; 4-D, or 3-D with the head counts
// as attributes.
ir::Graph grouped_graph(bool three_d, int64_t kv_heads, bool mask) {
  GraphBuilder b(23);
  if (three_d) {
    b.input("q", {2, 7, 6 * 5});
    b.input("k", {2, 7, kv_heads * 5});
    b.input("v", {2, 7, kv_heads * 5});
  } else {
    b.input("q", {2, 6, 7, 5});
    b.input("k", {2, kv_heads, 7, 5});
    b.input("v", {2, kv_heads, 7, 5});
  }
  std::vector<std::string> in = {"q", "k", "v"};
  if (mask) {
    b.random("m", {2, 6, 7, 7}, 9);
    in.push_back("m");
  }
  ir::Node& n = b.node("Attention", in, {"y"});
  if (three_d) {
    n.attributes["q_num_heads"] = int_attr("q_num_heads", 6);
    n.attributes["kv_num_heads"] = int_attr("kv_num_heads", kv_heads);
  }
  b.output("y");
  return b.build();
}

TEST(OnnxAttentionToFused, FusesGroupedQueryAttention) {
  for (bool three_d : {false, true})
    for (int64_t kv_heads : {1, 2, 3})
      for (bool mask : {false, true}) {
        SCOPED_TRACE(std::to_string(three_d) + " kv_heads " + std::to_string(kv_heads) + " mask " +
                     std::to_string(mask));
        ir::Graph g = grouped_graph(three_d, kv_heads, mask);
        fuse_and_compare(g);
        EXPECT_EQ(g.nodes.size(), 1u);
      }
}

// A decode step: 4-D Q / K / V of `steps` new tokens after a cache of 9, grouped heads, the
// present caches as graph outputs (or not read), a mask over all 9 + steps keys.
ir::Graph cached_graph(int64_t steps, bool causal, bool mask, bool output_present,
                       bool three_d = false) {
  GraphBuilder b(23);
  if (three_d) {
    b.input("q", {2, steps, 4 * 8});
    b.input("k", {2, steps, 2 * 8});
    b.input("v", {2, steps, 2 * 6});
  } else {
    b.input("q", {2, 4, steps, 8});
    b.input("k", {2, 2, steps, 8});
    b.input("v", {2, 2, steps, 6});
  }
  b.input("pk", {2, 2, 9, 8});
  b.input("pv", {2, 2, 9, 6});
  if (mask) b.random("m", {steps, 9 + steps}, 9);
  ir::Node& n = b.node("Attention", {"q", "k", "v", mask ? "m" : "", "pk", "pv"},
                       {"y", output_present ? "present_k" : "", output_present ? "present_v" : ""});
  if (causal) n.attributes["is_causal"] = int_attr("is_causal", 1);
  if (three_d) {
    n.attributes["q_num_heads"] = int_attr("q_num_heads", 4);
    n.attributes["kv_num_heads"] = int_attr("kv_num_heads", 2);
  }
  b.output("y");
  if (output_present) {
    b.output("present_k");
    b.output("present_v");
  }
  return b.build();
}

TEST(OnnxAttentionToFused, FusesAttentionWithAKvCache) {
  for (bool three_d : {false, true})
    for (int64_t steps : {1, 3})
      for (bool causal : {false, true})
        for (bool mask : {false, true})
          for (bool output_present : {false, true}) {
            SCOPED_TRACE("3-D " + std::to_string(three_d) + " steps " + std::to_string(steps) +
                         " causal " + std::to_string(causal) + " mask " + std::to_string(mask) +
                         " present " + std::to_string(output_present));
            ir::Graph g = cached_graph(steps, causal, mask, output_present, three_d);
            fuse_and_compare(g);
            EXPECT_EQ(count_op(g, "Concat"), 2);
          }
}

// A bool attn_mask (true attends) with a query row that attends to nothing: ONNX gives that
// row zeros, and so must the fused kernel.
TEST(OnnxAttentionToFused, FusesABoolMask) {
  GraphBuilder b(23);
  b.input("q", {1, 2, 4, 8});
  b.input("k", {1, 2, 6, 8});
  b.input("v", {1, 2, 6, 8});
  Tensor mask = Tensor::zeros(DType::kBool, {4, 6});
  for (int64_t i = 0; i < 24; ++i)
    mask.data<bool>()[i] = (i * 7) % 3 != 0 && i / 6 != 2;  // row 2: none
  b.constant("m", mask);
  b.node("Attention", {"q", "k", "v", "m"}, {"y"});
  b.output("y");
  ir::Graph g = b.build();
  const std::vector<Tensor> before = fuse_and_compare(g);
  EXPECT_EQ(count_op(g, "Where"), 1);
  expect_close(run_graph_on(cpu_backend(), g), before, 1e-5);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t c = 0; c < 8; ++c) EXPECT_EQ(before[0].data<float>()[(h * 4 + 2) * 8 + c], 0.0f);
}

TEST(OnnxAttentionToFused, FusesSoftcap) {
  ir::Graph g = attention_graph(2, 3, true, false, false, 0.5f);
  fuse_and_compare(g);
  EXPECT_EQ(g.nodes.size(), 1u);
}

// Frontiers the fused kernel's causal flag does not express: a causal mask at query length 3
// over 5 keys (ONNX aligns it top-left), sliding windows to the left and right, with and without
// the node's own mask: a constant mask, and the flag off.
TEST(OnnxAttentionToFused, FusesWindowsAndUnalignedCausalAsAConstantMask) {
  struct Case {
    bool causal, mask;
    int64_t left, right;
  };
  for (const Case& c : {Case{true, false, -1, -1}, Case{true, true, 1, -1}, Case{false, true, 0, 2},
                        Case{false, false, -1, 1}}) {
    SCOPED_TRACE(std::to_string(c.causal) + std::to_string(c.mask) + " " + std::to_string(c.left) +
                 " " + std::to_string(c.right));
    ir::Graph g = attention_graph(2, 5, c.mask, c.causal, false, 0);
    for (auto& n : g.nodes) {
      if (c.left >= 0) n->attributes["left_window_size"] = int_attr("left_window_size", c.left);
      if (c.right >= 0) n->attributes["right_window_size"] = int_attr("right_window_size", c.right);
    }
    fuse_and_compare(g);
    for (const auto& n : g.nodes)
      if (n->op_type == "Attention") EXPECT_EQ(n->attribute("causal")->i, 0);
  }
}

TEST(OnnxAttentionToFused, LeavesWhatTheFusedKernelLacks) {
  EXPECT_FALSE(fuses(grouped_graph(true, 4, false)));  // 4 KV heads for 6 query heads
  EXPECT_FALSE(fuses(attention_graph(2, 3, false, false, true, 0)));   // present_key is read
  EXPECT_TRUE(fuses(attention_graph(2, 5, true, false, false, 0)));    // cross-attention
}

}  // namespace
}  // namespace peregrine::testing
