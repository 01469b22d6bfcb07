#include "lab/compare_runs.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace peregrine {
namespace {

double quantile(const std::vector<double>& sorted, double q) {
  double position = q * double(sorted.size() - 1);
  size_t below = size_t(std::floor(position));
  size_t above = std::min(below + 1, sorted.size() - 1);
  double fraction = position - double(below);
  return sorted[below] + fraction * (sorted[above] - sorted[below]);
}

// Spread relative to the median, so it can scale metrics other than the median.
double relative_spread(const SpreadStats& s) {
  if (s.samples < kMinSamplesForSpread || s.median <= 0) return -1;
  return s.iqr() / s.median;
}

bool higher_is_better(const std::string& metric) {
  return metric.find("throughput") != std::string::npos ||
         metric.find("gflops") != std::string::npos || metric.find("gbps") != std::string::npos;
}

// Only central values: the IQR describes their spread, not that of tails or means.
bool judged_by_latency_spread(const std::string& metric) { return metric == "latency_median_ms"; }

}  // namespace

SpreadStats spread_of(std::vector<double> samples) {
  samples.erase(
      std::remove_if(samples.begin(), samples.end(), [](double v) { return std::isnan(v); }),
      samples.end());
  SpreadStats s;
  s.samples = samples.size();
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.median = quantile(samples, 0.5);
  s.q1 = quantile(samples, 0.25);
  s.q3 = quantile(samples, 0.75);
  return s;
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kRegression:
      return "regression";
    case Verdict::kImprovement:
      return "improvement";
    case Verdict::kWithinNoise:
      return "within noise";
    case Verdict::kNoSpread:
      return "no spread";
  }
  return "?";
}

Verdict judge(double a, double b, double noise, bool lower_is_better) {
  if (noise < 0 || std::isnan(a) || std::isnan(b) || std::isnan(noise)) return Verdict::kNoSpread;
  double change = b - a;
  if (std::fabs(change) <= noise) return Verdict::kWithinNoise;
  bool worse = lower_is_better ? change > 0 : change < 0;
  return worse ? Verdict::kRegression : Verdict::kImprovement;
}

RunComparison compare_runs(const RunRecord& a, const RunRecord& b) {
  RunComparison out;
  if (a.model_sha256 != b.model_sha256)
    out.warnings.push_back("the runs measured different model files (SHA-256 differs)");
  if (a.input_shapes != b.input_shapes)
    out.warnings.push_back("input shapes differ: '" + a.input_shapes + "' vs '" + b.input_shapes +
                           "'");
  if (a.machine_fingerprint != b.machine_fingerprint)
    out.warnings.push_back("the runs come from different machines (fingerprint differs)");
  if (a.options_json != b.options_json) out.warnings.push_back("run options differ");
  if (a.kind != b.kind)
    out.warnings.push_back("comparing a " + a.kind + " run with a " + b.kind + " run");

  out.latency_a = spread_of(a.latencies_ms);
  out.latency_b = spread_of(b.latencies_ms);
  double rel_a = relative_spread(out.latency_a), rel_b = relative_spread(out.latency_b);
  bool have_spread = rel_a >= 0 && rel_b >= 0;

  MetricDelta& median = out.median_latency;
  median.name = "latency_median_ms (from iterations)";
  median.in_a = out.latency_a.samples > 0;
  median.in_b = out.latency_b.samples > 0;
  median.a = out.latency_a.median;
  median.b = out.latency_b.median;
  if (have_spread) median.noise = out.latency_a.iqr() + out.latency_b.iqr();
  if (median.in_a && median.in_b) median.verdict = judge(median.a, median.b, median.noise, true);

  std::map<std::string, MetricDelta> by_name;
  for (const auto& [name, value] : a.metrics) {
    by_name[name].in_a = true;
    by_name[name].a = value;
  }
  for (const auto& [name, value] : b.metrics) {
    by_name[name].in_b = true;
    by_name[name].b = value;
  }
  for (auto& [name, m] : by_name) {
    m.name = name;
    if (m.in_a && m.in_b && have_spread && judged_by_latency_spread(name)) {
      m.noise = rel_a * std::fabs(m.a) + rel_b * std::fabs(m.b);
      m.verdict = judge(m.a, m.b, m.noise, !higher_is_better(name));
    }
    out.metrics.push_back(m);
  }

  struct OpSums {
    int nodes_a = 0, nodes_b = 0;
    double a_ms = 0, b_ms = 0, iqr_a = 0, iqr_b = 0;
    bool all_have_iqr = true;
  };
  std::map<std::string, OpSums> ops;
  for (const NodeMetrics& n : a.nodes) {
    OpSums& s = ops[n.op_type];
    ++s.nodes_a;
    s.a_ms += n.time_ms;
    s.iqr_a += n.time_iqr_ms;
    s.all_have_iqr &= n.time_iqr_ms > 0;
  }
  for (const NodeMetrics& n : b.nodes) {
    OpSums& s = ops[n.op_type];
    ++s.nodes_b;
    s.b_ms += n.time_ms;
    s.iqr_b += n.time_iqr_ms;
    s.all_have_iqr &= n.time_iqr_ms > 0;
  }
  for (const auto& [op_type, s] : ops) {
    OpTypeDelta d;
    d.op_type = op_type;
    d.nodes_a = s.nodes_a;
    d.nodes_b = s.nodes_b;
    d.a_ms = s.a_ms;
    d.b_ms = s.b_ms;
    if (s.nodes_a > 0 && s.nodes_b > 0) {
      if (s.all_have_iqr) {
        d.noise = s.iqr_a + s.iqr_b;
      } else if (have_spread) {
        d.noise = rel_a * s.a_ms + rel_b * s.b_ms;
      }
      d.verdict = judge(d.a_ms, d.b_ms, d.noise, true);
    }
    out.op_types.push_back(d);
  }
  std::stable_sort(out.op_types.begin(), out.op_types.end(),
                   [](const OpTypeDelta& x, const OpTypeDelta& y) {
                     return std::max(x.a_ms, x.b_ms) > std::max(y.a_ms, y.b_ms);
                   });
  return out;
}

}  // namespace peregrine
