// Latency statistics of repeated runs: order statistics with linear interpolation
// between closest ranks (numpy's default "linear" method), mean and spread.
#pragma once

#include <cstdint>
#include <vector>

namespace peregrine::lab {

struct LatencyStats {
  int64_t count = 0;
  double min = 0, max = 0, mean = 0;
  double stddev = 0;  // sample standard deviation (n - 1); 0 for fewer than two values
  double median = 0, p90 = 0, p95 = 0, p99 = 0;
};

// The p-th percentile (0 <= p <= 100) of `sorted` (ascending): the value at rank
// p/100 * (n - 1), interpolated linearly between neighbours. 0 for an empty input.
double percentile_sorted(const std::vector<double>& sorted, double p);
// Same for unsorted values (copies and sorts).
double percentile(std::vector<double> values, double p);
// Everything above; all zeros for an empty input.
LatencyStats summarize_latencies(const std::vector<double>& values);

}  // namespace peregrine::lab
