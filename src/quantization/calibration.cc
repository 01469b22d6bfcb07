#include "quantization/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "peregrine/session.h"
#include "runtime/session_internals.h"

namespace peregrine::quantization {

namespace {

constexpr int kHistogramBins = 2048;
// Share of the values in the top bin of |x| above which entropy calibration keeps the range.
constexpr double kSaturationShare = 1e-3;

struct Observed {
  float min = std::numeric_limits<float>::infinity();
  float max = -std::numeric_limits<float>::infinity();
  std::vector<double> bins;  // the histogram pass
};

void add_to_histogram(const Tensor& t, float lo, float hi, bool absolute, std::vector<double>& bins) {
  const float* x = t.data<float>();
  const double width = (static_cast<double>(hi) - lo) / kHistogramBins;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = absolute ? std::fabs(x[i]) : x[i];
    if (!std::isfinite(v)) continue;
    int64_t b = width > 0 ? static_cast<int64_t>((v - lo) / width) : 0;
    b = std::clamp<int64_t>(b, 0, kHistogramBins - 1);
    bins[static_cast<size_t>(b)] += 1;
  }
}

// KL(p || q) over bins where p > 0; q is smoothed where it is zero so the sum stays finite.
double kl_divergence(const std::vector<double>& p, const std::vector<double>& q) {
  double p_sum = 0, q_sum = 0;
  for (double v : p) p_sum += v;
  for (double v : q) q_sum += v;
  if (p_sum <= 0 || q_sum <= 0) return std::numeric_limits<double>::infinity();
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) continue;
    const double pi = p[i] / p_sum;
    const double qi = std::max(q[i] / q_sum, 1e-12);
    kl += pi * std::log(pi / qi);
  }
  return kl;
}

}  // namespace

Expected<CalibrationMethod> parse_calibration_method(const std::string& text) {
  if (text == "minmax") return CalibrationMethod::kMinMax;
  if (text == "percentile") return CalibrationMethod::kPercentile;
  if (text == "entropy") return CalibrationMethod::kEntropy;
  return invalid_input("--method '" + text + "': expected minmax, percentile or entropy");
}

Range percentile_range(const std::vector<double>& bins, float lo, float hi, double percentile) {
  double total = 0;
  for (double b : bins) total += b;
  if (total <= 0 || bins.empty()) return {lo, hi};
  const double width = (static_cast<double>(hi) - lo) / static_cast<double>(bins.size());
  const double tail = total * (100.0 - percentile) / 100.0;
  // The lower bound: the first bin edge past which more than `tail` values lie below.
  double below = 0;
  size_t first = 0;
  while (first + 1 < bins.size() && below + bins[first] <= tail) below += bins[first++];
  double above = 0;
  size_t last = bins.size() - 1;
  while (last > first && above + bins[last] <= tail) above += bins[last--];
  return {static_cast<float>(lo + width * static_cast<double>(first)),
          static_cast<float>(lo + width * static_cast<double>(last + 1))};
}

Range entropy_range(const std::vector<double>& abs_bins, float abs_max, bool never_negative) {
  const int n = static_cast<int>(abs_bins.size());
  const int levels = never_negative ? 256 : 128;  // uint8 steps the range [0, T] or [-T, T] has
  const Range full{never_negative ? 0.0f : -abs_max, abs_max};
  if (n <= levels || abs_max <= 0) return full;
  // A spike in the top bin is a saturating activation (ReLU6, a clamp): values pile up at the
  // bound on purpose, and any threshold below it would move all of them.
  double total = 0;
  for (double b : abs_bins) total += b;
  if (abs_bins.back() > kSaturationShare * total) return full;
  double best_kl = std::numeric_limits<double>::infinity();
  int best = n;
  std::vector<double> p, q;
  for (int i = levels; i <= n; ++i) {
    // Reference: the first i bins, everything beyond clipped into the last one.
    p.assign(abs_bins.begin(), abs_bins.begin() + i);
    for (int k = i; k < n; ++k) p[static_cast<size_t>(i - 1)] += abs_bins[static_cast<size_t>(k)];
    // Candidate: the first i bins merged into `levels` groups, each group's count spread back
    // evenly over its bins that were not empty.
    q.assign(static_cast<size_t>(i), 0.0);
    for (int g = 0; g < levels; ++g) {
      const int begin = static_cast<int>(static_cast<int64_t>(g) * i / levels);
      const int end = static_cast<int>(static_cast<int64_t>(g + 1) * i / levels);
      double sum = 0;
      int nonzero = 0;
      for (int k = begin; k < end; ++k) {
        sum += abs_bins[static_cast<size_t>(k)];
        nonzero += abs_bins[static_cast<size_t>(k)] > 0;
      }
      for (int k = begin; k < end && nonzero > 0; ++k)
        if (abs_bins[static_cast<size_t>(k)] > 0) q[static_cast<size_t>(k)] = sum / nonzero;
    }
    // Bin 0 (the zeros a ReLU makes, half of its outputs) is left out: every grid holds 0
    // exactly, and merged with its neighbours its mass would swamp the comparison, which then
    // favours the narrowest range.
    p[0] = q[0] = 0;
    const double kl = kl_divergence(p, q);
    if (kl < best_kl) {
      best_kl = kl;
      best = i;
    }
  }
  const float threshold = abs_max * (static_cast<float>(best) / static_cast<float>(n));
  return {never_negative ? 0.0f : -threshold, threshold};
}

Expected<std::map<std::string, Range>> calibrate(
    ir::Model&& model, const std::vector<std::string>& tensors,
    const std::vector<std::map<std::string, Tensor>>& samples, const CalibrationOptions& options) {
  if (samples.empty()) return invalid_input("calibration needs at least one sample");
  ir::Graph& g = model.graph;
  const std::set<std::string> graph_inputs(g.inputs.begin(), g.inputs.end());
  for (const auto& t : tensors)
    if (!graph_inputs.count(t) && std::find(g.outputs.begin(), g.outputs.end(), t) == g.outputs.end())
      g.outputs.push_back(t);
  SessionOptions so;
  so.opt_level = 0;  // every observed tensor must survive as it is named
  so.num_threads = options.num_threads;
  PG_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, session_from_model(std::move(model), so));
  std::map<std::string, size_t> output_index;
  for (size_t i = 0; i < session->outputs().size(); ++i) output_index[session->outputs()[i].name] = i;

  std::map<std::string, Observed> seen;
  auto each_observed = [&](auto&& visit) -> Status {
    for (size_t s = 0; s < samples.size(); ++s) {
      std::map<std::string, RuntimeValue> feed;
      for (const auto& [name, t] : samples[s]) feed[name] = RuntimeValue::of(t);
      auto outs = session->run_values(feed);
      if (!outs.is_ok()) return outs.status().with_context("calibration sample " + std::to_string(s));
      for (const auto& t : tensors) {
        const Tensor* value = nullptr;
        if (graph_inputs.count(t)) {
          auto it = samples[s].find(t);
          if (it != samples[s].end()) value = &it->second;
        } else if (auto it = output_index.find(t); it != output_index.end()) {
          const RuntimeValue& v = (*outs)[it->second];
          if (v.is_tensor()) value = &v.tensor;
        }
        if (!value || value->dtype() != DType::kFloat32)
          return internal_error("calibration: tensor '" + t + "' was not observed as float32");
        visit(t, *value);
      }
    }
    return Status::ok();
  };
  PG_RETURN_IF_ERROR(each_observed([&](const std::string& name, const Tensor& t) {
    Observed& o = seen[name];
    const float* x = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (!std::isfinite(x[i])) continue;
      o.min = std::min(o.min, x[i]);
      o.max = std::max(o.max, x[i]);
    }
  }));
  for (auto& [name, o] : seen)
    if (o.min > o.max) o.min = o.max = 0;  // no finite value seen
  if (options.method != CalibrationMethod::kMinMax) {
    const bool absolute = options.method == CalibrationMethod::kEntropy;
    for (auto& [name, o] : seen) o.bins.assign(kHistogramBins, 0.0);
    PG_RETURN_IF_ERROR(each_observed([&](const std::string& name, const Tensor& t) {
      Observed& o = seen[name];
      if (absolute)
        add_to_histogram(t, 0, std::max(std::fabs(o.min), std::fabs(o.max)), true, o.bins);
      else
        add_to_histogram(t, o.min, o.max, false, o.bins);
    }));
  }
  std::map<std::string, Range> ranges;
  for (const auto& [name, o] : seen) {
    switch (options.method) {
      case CalibrationMethod::kMinMax: ranges[name] = {o.min, o.max}; break;
      case CalibrationMethod::kPercentile:
        ranges[name] = percentile_range(o.bins, o.min, o.max, options.percentile);
        break;
      case CalibrationMethod::kEntropy:
        ranges[name] = entropy_range(o.bins, std::max(std::fabs(o.min), std::fabs(o.max)),
                                     o.min >= 0);
        break;
    }
  }
  return ranges;
}

}  // namespace peregrine::quantization
