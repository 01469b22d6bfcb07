// Roofline arithmetic: known FLOPs, bytes and time -> known bound, percentage and class.
#include "profiler/roofline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/op_schema.h"
#include "profiler/report.h"

namespace peregrine::profiler {
namespace {

// 100 GFLOP/s peak, 10 GB/s: the ridge is at 10 FLOP/byte.
constexpr Roofs kRoofs{100.0, 10.0};

TEST(Roofline, RidgeIsPeakOverBandwidth) {
  EXPECT_DOUBLE_EQ(ridge_intensity(kRoofs), 10.0);
  EXPECT_DOUBLE_EQ(attainable_gflops(10.0, kRoofs), 100.0);  // both roofs meet at the ridge
  EXPECT_DOUBLE_EQ(ridge_intensity(Roofs{}), 0.0);
}

TEST(Roofline, BoundFollowsSlopeThenPeak) {
  EXPECT_DOUBLE_EQ(attainable_gflops(0.5, kRoofs), 5.0);
  EXPECT_DOUBLE_EQ(attainable_gflops(2.0, kRoofs), 20.0);
  EXPECT_DOUBLE_EQ(attainable_gflops(40.0, kRoofs), 100.0);
  EXPECT_DOUBLE_EQ(attainable_gflops(std::numeric_limits<double>::infinity(), kRoofs), 100.0);
  EXPECT_DOUBLE_EQ(attainable_gflops(0.0, kRoofs), 0.0);
}

TEST(Roofline, MemoryBoundNode) {
  // 1e6 FLOP over 4e6 bytes (0.25 FLOP/B) in 1 ms: 1 GFLOP/s, 4 GB/s.
  // Bound at 0.25 FLOP/B = 2.5 GFLOP/s, so 40% of it; t_min = 4e6 B / 10 GB/s = 0.4 ms.
  RooflinePoint p = analyze(1e6, 4e6, 1e-3, kRoofs);
  EXPECT_DOUBLE_EQ(p.intensity, 0.25);
  EXPECT_NEAR(p.achieved_gflops, 1.0, 1e-12);
  EXPECT_NEAR(p.achieved_gbps, 4.0, 1e-12);
  EXPECT_DOUBLE_EQ(p.bound_gflops, 2.5);
  EXPECT_NEAR(p.min_seconds, 4e-4, 1e-15);
  EXPECT_NEAR(p.percent_of_bound, 40.0, 1e-9);
  EXPECT_EQ(p.bound_class, BoundClass::kMemory);
  EXPECT_STREQ(bound_class_name(p.bound_class), "memory-bound");
}

TEST(Roofline, ComputeBoundNode) {
  // 2e9 FLOP over 1e7 bytes (200 FLOP/B) in 100 ms: 20 GFLOP/s = 20% of the 100 GFLOP/s peak.
  RooflinePoint p = analyze(2e9, 1e7, 0.1, kRoofs);
  EXPECT_DOUBLE_EQ(p.intensity, 200.0);
  EXPECT_DOUBLE_EQ(p.bound_gflops, 100.0);
  EXPECT_NEAR(p.achieved_gflops, 20.0, 1e-9);
  EXPECT_NEAR(p.percent_of_bound, 20.0, 1e-9);
  EXPECT_EQ(p.bound_class, BoundClass::kCompute);
  EXPECT_NE(bottleneck_reason(p, kRoofs).find("compute-bound"), std::string::npos);
}

TEST(Roofline, PercentEqualsAchievedOverBoundWhenThereAreFlops) {
  for (double intensity : {0.1, 1.0, 9.9, 10.0, 10.1, 1000.0}) {
    const double bytes = 1e7, flops = intensity * bytes;
    RooflinePoint p = analyze(flops, bytes, 0.05, kRoofs);
    EXPECT_NEAR(p.percent_of_bound, 100 * p.achieved_gflops / p.bound_gflops, 1e-9) << intensity;
  }
}

TEST(Roofline, RidgePointItselfIsComputeBound) {
  // Exactly at the ridge both roofs bind; the class says compute (intensity >= ridge).
  EXPECT_EQ(analyze(1e8, 1e7, 0.01, kRoofs).bound_class, BoundClass::kCompute);
  EXPECT_EQ(analyze(0.99e8, 1e7, 0.01, kRoofs).bound_class, BoundClass::kMemory);
}

TEST(Roofline, ZeroFlopNodeIsMeasuredAgainstBandwidth) {
  // A Transpose moving 8 MB in 2 ms: 4 GB/s = 40% of 10 GB/s.
  RooflinePoint p = analyze(0, 8e6, 2e-3, kRoofs);
  EXPECT_EQ(p.intensity, 0.0);
  EXPECT_EQ(p.achieved_gflops, 0.0);
  EXPECT_EQ(p.bound_gflops, 0.0);
  EXPECT_NEAR(p.percent_of_bound, 40.0, 1e-9);
  EXPECT_EQ(p.bound_class, BoundClass::kMemory);
  EXPECT_NE(bottleneck_reason(p, kRoofs).find("data movement"), std::string::npos);
}

TEST(Roofline, ZeroByteNodeIsMeasuredAgainstPeak) {
  // 1e9 FLOP, no traffic, 50 ms: 20 GFLOP/s = 20% of peak; intensity is infinite.
  RooflinePoint p = analyze(1e9, 0, 0.05, kRoofs);
  EXPECT_TRUE(std::isinf(p.intensity));
  EXPECT_DOUBLE_EQ(p.bound_gflops, 100.0);
  EXPECT_NEAR(p.percent_of_bound, 20.0, 1e-9);
  EXPECT_EQ(p.bound_class, BoundClass::kCompute);
}

TEST(Roofline, NoWorkIsOverheadBound) {
  RooflinePoint p = analyze(0, 0, 1e-3, kRoofs);
  EXPECT_EQ(p.bound_class, BoundClass::kOverhead);
  EXPECT_EQ(p.percent_of_bound, 0.0);
}

TEST(Roofline, TinyTimeIsOverheadBound) {
  // Plenty of work on paper, but measured under 5 µs.
  EXPECT_EQ(analyze(1e6, 1e6, 4e-6, kRoofs).bound_class, BoundClass::kOverhead);
  // Work the roofs would finish in 0.1 µs (1 KB at 10 GB/s), however long it took.
  RooflinePoint p = analyze(100, 1000, 50e-6, kRoofs);
  EXPECT_EQ(p.bound_class, BoundClass::kOverhead);
  EXPECT_NE(bottleneck_reason(p, kRoofs).find("overhead-bound"), std::string::npos);
  // The same slowness with real work (10 MB, t_min 1 ms) is memory-bound, not overhead.
  EXPECT_EQ(analyze(1e6, 1e7, 50e-3, kRoofs).bound_class, BoundClass::kMemory);
}

TEST(Roofline, ZeroOrNegativeTimeDoesNotDivideByZero) {
  RooflinePoint p = analyze(1e9, 1e6, 0, kRoofs);
  EXPECT_EQ(p.achieved_gflops, 0.0);
  EXPECT_EQ(p.percent_of_bound, 0.0);
  EXPECT_EQ(p.bound_class, BoundClass::kOverhead);
  RooflinePoint q = analyze(-5, -5, -1, kRoofs);
  EXPECT_EQ(q.flops, 0.0);
  EXPECT_EQ(q.bytes, 0.0);
  EXPECT_EQ(q.seconds, 0.0);
}

TEST(Roofline, ReasonSaysWhetherNearTheRoof) {
  // 80% of bandwidth: only less traffic helps.
  RooflinePoint near = analyze(1e6, 8e6, 1e-3, kRoofs);
  EXPECT_NE(bottleneck_reason(near, kRoofs).find("less traffic"), std::string::npos);
  // 4% of bandwidth: the implementation, not the roof, limits it.
  RooflinePoint far = analyze(1e6, 8e6, 20e-3, kRoofs);
  EXPECT_NE(bottleneck_reason(far, kRoofs).find("not bandwidth"), std::string::npos);
}

NodeProfile node(size_t index, const std::string& op, double us, double flops, double bytes) {
  NodeProfile n;
  n.index = index;
  n.name = op + std::to_string(index);
  n.op_type = op;
  n.median_us = us;
  n.roof = analyze(flops, bytes, us / 1e6, kRoofs);
  return n;
}

TEST(ProfileSummary, TotalsByOpTypeAndBottlenecks) {
  std::vector<NodeProfile> nodes = {node(0, "Conv", 300, 1e9, 1e6), node(1, "Relu", 50, 1e5, 8e5),
                                    node(2, "Conv", 500, 2e9, 2e6), node(3, "Relu", 150, 1e5, 8e5),
                                    node(4, "Reshape", 0, 0, 0)};
  EXPECT_DOUBLE_EQ(total_node_time_us(nodes), 1000.0);
  auto totals = totals_by_op_type(nodes);
  ASSERT_EQ(totals.size(), 3u);
  EXPECT_EQ(totals[0].op_type, "Conv");
  EXPECT_EQ(totals[0].count, 2);
  EXPECT_DOUBLE_EQ(totals[0].time_us, 800.0);
  EXPECT_DOUBLE_EQ(totals[0].flops, 3e9);
  EXPECT_DOUBLE_EQ(totals[0].percent_of_nodes, 80.0);
  EXPECT_EQ(totals[1].op_type, "Relu");
  EXPECT_DOUBLE_EQ(totals[1].percent_of_nodes, 20.0);
  auto worst = top_bottlenecks(nodes, 2);
  ASSERT_EQ(worst.size(), 2u);
  EXPECT_EQ(worst[0], 2u);
  EXPECT_EQ(worst[1], 0u);
  EXPECT_EQ(top_bottlenecks(nodes, 10).size(), 4u);  // the zero-time node is no bottleneck
}

TEST(Report, EscapesModelStrings) {
  EXPECT_EQ(html_escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
  EXPECT_EQ(html_escape(std::string("a\xff") + "b"),
            "a\xEF\xBF\xBD"
            "b");  // invalid UTF-8 -> U+FFFD
  ProfileReport r;
  r.model_path = "m.onnx";
  r.roofs = kRoofs;
  r.nodes = {node(0, "Conv", 300, 1e9, 1e6), node(1, "Relu", 50, 1e5, 8e5)};
  r.nodes[0].name = "</title><script>alert(1)</script>";
  r.op_totals = totals_by_op_type(r.nodes);
  r.bottlenecks = top_bottlenecks(r.nodes, 5);
  const std::string html = render_html_report(r);
  EXPECT_EQ(html.find("<script>alert(1)"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)"), std::string::npos);
  size_t points = 0;
  for (size_t at = html.find("class=\"node-point"); at != std::string::npos;
       at = html.find("class=\"node-point", at + 1))
    ++points;
  EXPECT_EQ(points, 2u);
  // Self-contained: nothing to fetch; the only URLs are SVG namespace names.
  auto count = [&](const std::string& needle) {
    size_t k = 0;
    for (size_t at = html.find(needle); at != std::string::npos; at = html.find(needle, at + 1))
      ++k;
    return k;
  };
  EXPECT_EQ(count("://"), count("http://www.w3.org/2000/svg"));
  EXPECT_EQ(count(" src="), 0u);
  EXPECT_EQ(count(" href="), 0u);
}

}  // namespace
}  // namespace peregrine::profiler

namespace peregrine {
namespace {

// peregrine.Attention's cost: 2 * B*H*Sq*Sk*D for Q K^T plus 2 * B*H*Sq*Sk*Dv for the product
// with V, whichever way K is laid out (k_transposed: (..., D, S)).
TEST(OpCost, AttentionCountsBothProductsWithEitherKLayout) {
  const OpSchema* schema = SchemaRegistry::global().find(kPeregrineDomain, "Attention");
  ASSERT_NE(schema, nullptr);
  ir::Node node;
  node.op_type = "Attention";
  node.domain = kPeregrineDomain;
  const auto t = [](Shape s) { return ir::ValueType::tensor(DType::kFloat32, std::move(s)); };
  const double want = 2.0 * 6 * 100 * 150 * 64 + 2.0 * 6 * 100 * 150 * 32;
  auto cost = schema->cost(node, {t({1, 6, 100, 64}), t({1, 6, 150, 64}), t({1, 6, 150, 32})},
                           {t({1, 6, 100, 32})});
  EXPECT_DOUBLE_EQ(cost.flops, want);
  ir::Attribute kt;
  kt.name = "k_transposed";
  kt.type = ir::Attribute::Type::kInt;
  kt.i = 1;
  node.attributes["k_transposed"] = kt;
  cost = schema->cost(node, {t({1, 6, 100, 64}), t({1, 6, 64, 150}), t({1, 6, 150, 32})},
                      {t({1, 6, 100, 32})});
  EXPECT_DOUBLE_EQ(cost.flops, want);
}

}  // namespace
}  // namespace peregrine
