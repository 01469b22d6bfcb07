// onnx_attention_to_fused: ONNX Attention becomes peregrine.Attention where the fused kernel
// computes the same thing (numerics checked on the reference backend), and is left alone where
// it would not (GQA heads, a read present_key, softcap, causal with unequal lengths).
#include <gtest/gtest.h>

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

TEST(OnnxAttentionToFused, FusesPlainMaskedAndCausalAttention) {
  for (auto [mask, causal] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
    SCOPED_TRACE(std::to_string(mask) + std::to_string(causal));
    ir::Graph g = attention_graph(2, 3, mask, causal, false, 0);
    const std::vector<Tensor> before = run_graph(g);
    passes::PassManager pm;
    pm.add(passes::make_onnx_attention_to_fused());
    ASSERT_TRUE(pm.run(g).is_ok());
    ASSERT_EQ(g.nodes.size(), 1u);
    EXPECT_EQ(g.nodes[0]->domain, "peregrine");
    expect_close(run_graph(g), before, 1e-5);
  }
}

TEST(OnnxAttentionToFused, LeavesWhatTheFusedKernelLacks) {
  EXPECT_FALSE(fuses(attention_graph(1, 3, false, false, false, 0)));  // GQA: 2 query heads, 1 kv
  EXPECT_FALSE(fuses(attention_graph(2, 3, false, false, true, 0)));   // present_key is read
  EXPECT_FALSE(fuses(attention_graph(2, 3, false, false, false, 5)));  // softcap
  EXPECT_FALSE(fuses(attention_graph(2, 5, false, true, false, 0)));   // causal, lengths 3 vs 5
  EXPECT_TRUE(fuses(attention_graph(2, 5, true, false, false, 0)));    // cross-attention
}

}  // namespace
}  // namespace peregrine::testing
