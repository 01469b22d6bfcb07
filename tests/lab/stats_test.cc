#include "lab/stats.h"

#include <gtest/gtest.h>

namespace peregrine::lab {
namespace {

TEST(StatsTest, PercentilesOfOneToHundredInterpolateLikeNumpy) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);  // unsorted on purpose
  LatencyStats s = summarize_latencies(v);
  EXPECT_EQ(s.count, 100);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 100);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.median, 50.5);
  EXPECT_NEAR(s.p90, 90.1, 1e-9);
  EXPECT_NEAR(s.p95, 95.05, 1e-9);
  EXPECT_NEAR(s.p99, 99.01, 1e-9);
}

TEST(StatsTest, SmallSampleMatchesNumpy) {
  LatencyStats s = summarize_latencies({5, 1, 4, 2, 3});
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_NEAR(s.p90, 4.6, 1e-12);
  EXPECT_NEAR(s.p95, 4.8, 1e-12);
  EXPECT_NEAR(s.p99, 4.96, 1e-12);
  EXPECT_NEAR(s.stddev, 1.5811388300841898, 1e-12);  // numpy std(ddof=1)
}

TEST(StatsTest, EdgeCases) {
  LatencyStats empty = summarize_latencies({});
  EXPECT_EQ(empty.count, 0);
  EXPECT_EQ(empty.median, 0);
  LatencyStats one = summarize_latencies({7.5});
  EXPECT_EQ(one.count, 1);
  EXPECT_DOUBLE_EQ(one.min, 7.5);
  EXPECT_DOUBLE_EQ(one.p99, 7.5);
  EXPECT_DOUBLE_EQ(one.stddev, 0);
  EXPECT_DOUBLE_EQ(percentile({3, 1, 2}, 0), 1);
  EXPECT_DOUBLE_EQ(percentile({3, 1, 2}, 100), 3);
  EXPECT_DOUBLE_EQ(percentile({3, 1, 2}, 250), 3);  // clamped
  EXPECT_DOUBLE_EQ(percentile({10, 20}, 25), 12.5);
}

}  // namespace
}  // namespace peregrine::lab
