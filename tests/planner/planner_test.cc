// Memory planner invariants: no two live tensors overlap, the arena is never below the lower
// bound, in-place reuse only where the op table allows it, and planned runs equal unplanned.
#include <gtest/gtest.h>

#include <random>

#include "backends/cpu/cpu_backend.h"
#include "passes/graph_builder.h"
#include "planner/arena_planner.h"
#include "planner/in_place.h"
#include "planner/liveness.h"

namespace peregrine {
namespace {

using planner::Block;
using testing::GraphBuilder;

// Brute force: every pair of blocks alive together occupies disjoint byte ranges.
void expect_valid_layout(const std::vector<Block>& blocks, const planner::ArenaLayout& l) {
  ASSERT_EQ(l.offsets.size(), blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(l.offsets[i] % planner::kArenaAlignment, 0);
    EXPECT_LE(l.offsets[i] + planner::align_up(blocks[i].bytes), l.arena_bytes);
    for (size_t j = i + 1; j < blocks.size(); ++j) {
      if (!planner::live_together(blocks[i], blocks[j])) continue;
      const int64_t ei = l.offsets[i] + planner::align_up(blocks[i].bytes);
      const int64_t ej = l.offsets[j] + planner::align_up(blocks[j].bytes);
      EXPECT_TRUE(ei <= l.offsets[j] || ej <= l.offsets[i])
          << "blocks " << i << " and " << j << " overlap";
    }
  }
  EXPECT_GE(l.arena_bytes, planner::peak_live_bytes(blocks));
}

TEST(ArenaPlanner, RandomIntervalsNeverOverlap) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 200; ++trial) {
    const int steps = 1 + static_cast<int>(rng() % 40);
    const int n = static_cast<int>(rng() % 60);
    std::vector<Block> blocks;
    for (int i = 0; i < n; ++i) {
      const int first = static_cast<int>(rng() % steps);
      const int last = first + static_cast<int>(rng() % (steps - first));
      const int64_t bytes = 1 + static_cast<int64_t>(rng() % (trial % 2 ? 100000 : 300));
      blocks.push_back({bytes, first, last});
    }
    planner::ArenaLayout l = planner::place_blocks(blocks);
    expect_valid_layout(blocks, l);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(ArenaPlanner, ChainReusesMemory) {
  // a -> b -> c -> d, each live for two steps: two buffers suffice.
  std::vector<Block> blocks = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {1000, 3, 4}};
  planner::ArenaLayout l = planner::place_blocks(blocks);
  expect_valid_layout(blocks, l);
  EXPECT_EQ(l.arena_bytes, 2 * planner::align_up(1000));
  EXPECT_EQ(planner::peak_live_bytes(blocks), 2 * planner::align_up(1000));
}

TEST(Liveness, IntervalsAndExclusions) {
  GraphBuilder b;
  std::string x = b.input("x", {4, 8});
  std::string w = b.random("w", {8, 8});
  std::string a = b.op("MatMul", {x, w});  // step 0
  std::string r = b.op("Relu", {a});       // step 1
  std::string s = b.op("Sigmoid", {r});    // step 2
  std::string t = b.op("Add", {s, a});     // step 3: a read last here
  b.output(t);
  ir::Graph g = b.build();
  auto live = planner::compute_liveness(g);
  std::map<std::string, planner::ValueLifetime> by;
  for (const auto& v : live) by[v.name] = v;
  EXPECT_EQ(by.count(x), 0u);
  EXPECT_EQ(by.count(w), 0u);
  EXPECT_EQ(by.count(t), 0u);  // a graph output
  EXPECT_EQ(by[a].first, 0);
  EXPECT_EQ(by[a].last, 3);
  EXPECT_EQ(by[r].last, 2);
  EXPECT_EQ(by[s].bytes, 4 * 8 * 4);
}

TEST(ArenaPlanner, InPlaceOnlyWhereAllowed) {
  GraphBuilder b;
  std::string x = b.input("x", {4, 8});
  std::string bias = b.random("bias", {1, 8});
  std::string a = b.op("Relu", {x});         // reads a graph input: never in place
  std::string s = b.op("Sigmoid", {a});      // a dies here: in place
  std::string e = b.op("Exp", {s});          // s still read below: not in place
  std::string d = b.op("Add", {e, s});       // both die: in place on one
  std::string sm = b.op("Softmax", {d});     // not elementwise: never in place
  std::string bb = b.op("Add", {bias, sm});  // broadcast: only over the full-shape operand
  std::string rs = b.op("Reshape", {bb, b.ints("shape", {32})});  // a view: shares the block
  std::string out = b.op("Relu", {rs});
  b.output(out);
  ir::Graph g = b.build();
  planner::MemoryPlan plan = planner::plan_memory(g);
  ASSERT_EQ(plan.values.size(), 7u);
  auto& v = plan.values;
  EXPECT_FALSE(v[a].shares_input);
  EXPECT_TRUE(v[s].shares_input);
  EXPECT_EQ(v[s].block, v[a].block);
  EXPECT_FALSE(v[e].shares_input);
  EXPECT_TRUE(v[d].shares_input);
  EXPECT_FALSE(v[sm].shares_input);
  EXPECT_TRUE(v[bb].shares_input);
  EXPECT_EQ(v[bb].block, v[sm].block);
  EXPECT_TRUE(v[rs].shares_input);
  EXPECT_EQ(v[rs].block, v[bb].block);
  EXPECT_GE(plan.arena_bytes, plan.lower_bound_bytes);
  EXPECT_LE(plan.arena_bytes, plan.unshared_bytes);
  expect_valid_layout(plan.blocks, plan.layout);
  // Values sharing a block agree with the table.
  for (const auto& node : g.nodes) {
    auto it = v.find(node->outputs[0]);
    if (it == v.end() || !it->second.shares_input) continue;
    bool allowed = planner::is_view_of_input(*node);
    for (size_t k = 0; k < node->inputs.size(); ++k)
      allowed |= planner::may_run_in_place(*node, k) && v.count(node->inputs[k]) &&
                 v[node->inputs[k]].block == it->second.block;
    EXPECT_TRUE(allowed) << node->describe();
  }
}

// Planned and unplanned runs agree, and the outputs of one run survive the next.
TEST(ArenaPlanner, PlannedRunMatchesUnplanned) {
  GraphBuilder b;
  std::string x = b.input("x", {4, 8});
  std::string w = b.random("w", {8, 8});
  std::string a = b.op("MatMul", {x, w});
  std::string r = b.op("Relu", {a});
  std::string s = b.op("Sigmoid", {r});
  std::string m = b.op("Mul", {s, a});
  std::string t = b.op("Transpose", {m});
  std::string v = b.op("Reshape", {t, b.ints("shape", {32})});  // a graph output viewing arena
  std::string u = b.op("Tanh", {t});
  b.output(v);
  b.output(u);
  ir::Graph g = b.build();
  auto planned = GraphExecutor::create(g, {&reference_backend()}, 1, /*plan_memory=*/true);
  auto plain = GraphExecutor::create(g, {&reference_backend()}, 1, /*plan_memory=*/false);
  ASSERT_TRUE(planned.is_ok() && plain.is_ok());
  ASSERT_NE((*planned)->memory_plan(), nullptr);
  EXPECT_GT((*planned)->memory_plan()->arena_bytes, 0);
  auto run = [&](GraphExecutor& ex, uint64_t seed) {
    std::map<std::string, RuntimeValue> in{
        {x, RuntimeValue::of(testing::random_tensor({4, 8}, seed))}};
    auto outs = ex.run(in, nullptr);
    EXPECT_TRUE(outs.is_ok()) << outs.status().message();
    std::vector<Tensor> r;
    for (auto& o : *outs) r.push_back(o.tensor);
    return r;
  };
  std::vector<Tensor> first = run(**planned, 1);
  std::vector<Tensor> first_copy;
  for (const auto& t : first) first_copy.push_back(t.clone());
  testing::expect_close(first, run(**plain, 1));
  testing::expect_close(run(**planned, 2), run(**plain, 2));
  testing::expect_close(first, first_copy, 0);  // not overwritten by the second run
}

// The graph run with and without a memory plan, on the reference and the CPU backends (2
// threads): the same outputs to the bit.
void expect_planned_runs_exact(const ir::Graph& g, const std::map<std::string, Tensor>& inputs) {
  for (const Backend* backend : std::vector<const Backend*>{&reference_backend(), &cpu_backend()}) {
    SCOPED_TRACE(backend->name());
    auto planned = GraphExecutor::create(g, {backend}, 2, /*plan_memory=*/true);
    auto plain = GraphExecutor::create(g, {backend}, 2, /*plan_memory=*/false);
    ASSERT_TRUE(planned.is_ok() && plain.is_ok());
    std::map<std::string, RuntimeValue> in;
    for (const auto& [name, t] : inputs) in[name] = RuntimeValue::of(t);
    auto got = (*planned)->run(in, nullptr);
    auto want = (*plain)->run(in, nullptr);
    ASSERT_TRUE(got.is_ok() && want.is_ok());
    std::vector<Tensor> gt, wt;
    for (auto& o : *got) gt.push_back(o.tensor);
    for (auto& o : *want) wt.push_back(o.tensor);
    testing::expect_close(gt, wt, 0);
  }
}

// Concat inputs become slices of the Concat's output block where they may: planned
// intermediates starting on an alignment boundary within the output, read once by that Concat,
// claimed by the last Concat that reads them; a graph input, a misaligned part and a Concat
// whose parts are not contiguous runs (a non-unit dim before the axis) are copied. Planned runs,
// on the reference and the CPU backends, equal unplanned ones.
TEST(ArenaPlanner, ConcatInputsAsSlicesOfTheOutput) {
  auto build = [] {
    GraphBuilder b;
    std::string x = b.input("x", {1, 16, 2, 2});
    std::string y = b.input("y", {1, 3, 2, 2});
    std::string a = b.op("Relu", {x});                    // 256 bytes at offset 0: a slice
    std::string c = b.op("Exp", {y});                     // 48 bytes at 256: a slice
    std::string m = b.op("Sigmoid", {x});                 // at 304 in cat: not aligned there
    auto& cat = b.node("Concat", {a, c, m, x}, {"cat"});  // x: a graph input, copied
    cat.attributes["axis"] = testing::int_attr("axis", 1);
    auto& cat2 = b.node("Concat", {a, m}, {"cat2"});  // takes a (at 0) and m (at 256)
    cat2.attributes["axis"] = testing::int_attr("axis", 1);
    std::string t = b.op("Transpose", {b.op("Tanh", {x})});  // (2, 2, 16, 1)
    auto& cat3 = b.node("Concat", {t, t}, {"cat3"});         // parts not contiguous along axis 2
    cat3.attributes["axis"] = testing::int_attr("axis", 2);
    b.output(b.op("Neg", {cat.outputs[0]}));
    b.output(b.op("Neg", {cat2.outputs[0]}));
    b.output(b.op("Neg", {cat3.outputs[0]}));
    return b.build();
  };
  ir::Graph g = build();
  planner::MemoryPlan plan = planner::plan_memory(g);
  auto& v = plan.values;
  const std::string a = g.nodes[0]->outputs[0], c = g.nodes[1]->outputs[0];
  const std::string m = g.nodes[2]->outputs[0];
  ASSERT_TRUE(v.count(a) && v.count(c) && v.count(m) && v.count("cat") && v.count("cat2"));
  EXPECT_EQ(v[a].block, v["cat2"].block);
  EXPECT_EQ(v[a].offset, v["cat2"].offset);
  EXPECT_EQ(v[c].block, v["cat"].block);
  EXPECT_EQ(v[c].offset, v["cat"].offset + 256);
  EXPECT_TRUE(v["cat"].shares_input);
  EXPECT_NE(v[m].block, v["cat"].block);
  EXPECT_EQ(v[m].block, v["cat2"].block);
  EXPECT_EQ(v[m].offset, v["cat2"].offset + 256);
  EXPECT_NE(v["cat3"].block, v[g.nodes[4]->outputs[0]].block);
  EXPECT_EQ(plan.concat_slices, 3);
  EXPECT_EQ(plan.blocks[static_cast<size_t>(v["cat"].block)].bytes, 4 * (16 + 3 + 16 + 16) * 4);
  expect_valid_layout(plan.blocks, plan.layout);
  for (uint64_t seed : {1, 2})
    expect_planned_runs_exact(g, {{"x", testing::random_tensor({1, 16, 2, 2}, seed)},
                                  {"y", testing::random_tensor({1, 3, 2, 2}, seed + 10)}});
}

// A DenseNet-style chain: each Concat takes every feature map so far. The last Concat owns them
// all; the earlier one, whose parts it holds in the same order, is a view of that prefix, so no
// Concat copies anything. Planned runs equal unplanned ones on both backends.
TEST(ArenaPlanner, ConcatPrefixOfALaterConcatIsAView) {
  GraphBuilder b;
  std::string x = b.input("x", {1, 16, 2, 2});
  std::string x0 = b.op("Relu", {x});
  std::string f1 = b.op("Neg", {x0});
  auto& c2 = b.node("Concat", {x0, f1}, {"c2"});
  c2.attributes["axis"] = testing::int_attr("axis", 1);
  std::string f2 = b.op("Exp", {x});
  auto& all = b.node("Concat", {x0, f1, f2}, {"all"});
  all.attributes["axis"] = testing::int_attr("axis", 1);
  b.output(b.op("Sigmoid", {c2.outputs[0]}));
  b.output(b.op("Tanh", {all.outputs[0]}));
  ir::Graph g = b.build();
  planner::MemoryPlan plan = planner::plan_memory(g);
  auto& v = plan.values;
  const int block = v["all"].block;
  const int64_t base = v["all"].offset;
  for (const auto& [name, off] :
       std::vector<std::pair<std::string, int64_t>>{{x0, 0}, {f1, 256}, {f2, 512}, {"c2", 0}}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(v[name].block, block);
    EXPECT_EQ(v[name].offset, base + off);
  }
  EXPECT_TRUE(v["c2"].shares_input);  // written by its parts: no zero fill before the Concat
  EXPECT_TRUE(v["all"].shares_input);
  expect_valid_layout(plan.blocks, plan.layout);
  expect_planned_runs_exact(g, {{x, testing::random_tensor({1, 16, 2, 2}, 3)}});
}

}  // namespace
}  // namespace peregrine
