// Comparing two recorded runs, and the rule that decides when a difference is
// real. Machines are noisy, so a difference counts as a regression or an
// improvement only when it is larger than the runs' own spread:
//
//   |median(B) - median(A)| > IQR(A) + IQR(B)
//
// where IQR is the interquartile range (Q3 - Q1, linear interpolation) of each
// run's per-iteration latencies. Otherwise the verdict is "within noise". A run
// with fewer than kMinSamplesForSpread latencies has no usable spread, and its
// differences are reported without a verdict ("no spread").
//
// The recorded latency_median_ms metric is judged with the same spread, scaled
// to its value: noise = IQR(A)/median(A) * |m(A)| + IQR(B)/median(B) * |m(B)|; so
// is the time of each op type (the sum of its nodes' median times). When every
// node of an op type carries its own time_iqr_ms in both runs, the sum of those
// is the noise instead. The IQR says nothing about the spread of tails (p90..max,
// stddev), of means and throughput (both pulled by outliers) or of one-shot
// metrics (create_ms, peak_rss_mb, ...): those show their deltas with "no spread".
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "lab/run_record.h"

namespace peregrine {

constexpr size_t kMinSamplesForSpread = 5;

struct SpreadStats {
  size_t samples = 0;
  double median = 0;
  double q1 = 0;  // 25th percentile
  double q3 = 0;  // 75th percentile
  double iqr() const { return q3 - q1; }
};
// Quantiles by linear interpolation between order statistics (R type 7). NaNs are ignored.
SpreadStats spread_of(std::vector<double> samples);

enum class Verdict { kRegression, kImprovement, kWithinNoise, kNoSpread };
const char* verdict_name(Verdict v);  // "regression", "improvement", "within noise", "no spread"

// The rule: a change of `b - a` is real when its magnitude exceeds `noise`.
// noise < 0 means the spread is unknown.
Verdict judge(double a, double b, double noise, bool lower_is_better);

struct MetricDelta {
  std::string name;
  bool in_a = false, in_b = false;
  double a = 0, b = 0;
  double noise = -1;  // the threshold the rule used; < 0: unknown
  Verdict verdict = Verdict::kNoSpread;
  double delta() const { return b - a; }
  double relative() const { return a != 0 ? (b - a) / a : 0; }  // 0.1 = +10%
};

struct OpTypeDelta {
  std::string op_type;
  int nodes_a = 0, nodes_b = 0;
  double a_ms = 0, b_ms = 0;
  double noise = -1;
  Verdict verdict = Verdict::kNoSpread;
};

struct RunComparison {
  SpreadStats latency_a, latency_b;
  MetricDelta median_latency;         // from the latencies, judged by the rule above
  std::vector<MetricDelta> metrics;   // every summary metric of either run, by name
  std::vector<OpTypeDelta> op_types;  // by op type, largest time in B (or A) first
  std::vector<std::string> warnings;  // different model, inputs, machine, build...
};

RunComparison compare_runs(const RunRecord& a, const RunRecord& b);

}  // namespace peregrine
