// peregrine compare A B: deltas between two recorded runs, overall and per op
// type, with a verdict only where the difference exceeds the runs' own spread.
// The rule lives in src/lab/compare_runs.h.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "cli_common.h"
#include "core/json_text.h"
#include "lab/compare_runs.h"
#include "lab/store.h"
#include "profiler/trace.h"
#include "record_run.h"

namespace peregrine::cli {
namespace {

const char kUsage[] =
    "RUN_A RUN_B [options]\n\n"
    "Shows how run B differs from run A (ids from 'peregrine runs'): summary metrics and\n"
    "the time per op type (sum of its nodes' times).\n\n"
    "A difference is called a regression or an improvement only when it exceeds the runs'\n"
    "own spread: |median(B) - median(A)| > IQR(A) + IQR(B), where IQR is the interquartile\n"
    "range of each run's per-iteration latencies. The latency_median_ms metric and the\n"
    "op type times use the same spread relative to the median (or the nodes' own IQRs\n"
    "when recorded). Smaller differences are 'within noise'. Runs with fewer than 5\n"
    "iterations, tails (p90..max), means, throughput and one-shot metrics\n"
    "(create_ms, peak_rss_mb, ...) show their deltas with 'no spread'.";

// Three decimals, or three significant digits for values below 0.1 (sub-microsecond
// spreads would otherwise print as 0.000).
std::string fixed(double v, const char* sign = "") {
  if (std::isnan(v)) return "-";
  bool small = v != 0 && std::fabs(v) < 0.1;
  std::string format = std::string("%") + sign + (small ? ".3g" : ".3f");
  char text[32];
  std::snprintf(text, sizeof(text), format.c_str(), v);
  return text;
}

std::string signed_fixed(double v) { return fixed(v, "+"); }

std::string percent(double a, double b) {
  if (!(a > 0) || std::isnan(b)) return "-";  // a relative change needs a positive base
  char text[32];
  std::snprintf(text, sizeof(text), "%+.1f%%", 100.0 * (b - a) / a);
  return text;
}

std::string describe(const RunRecord& r) {
  std::string model = std::filesystem::path(r.model_path).filename().string();
  return "run " + std::to_string(r.id) + ": " + r.kind + " of " + model + " (" +
         r.model_sha256.substr(0, 12) + "), " + r.timestamp + ", commit " + r.engine_commit +
         (r.input_shapes.empty() ? "" : ", inputs " + r.input_shapes);
}

std::string verdict_text(const MetricDelta& m) {
  if (!m.in_a || !m.in_b) return m.in_a ? "only in A" : "only in B";
  return verdict_name(m.verdict);
}

std::string op_verdict_text(const OpTypeDelta& d) {
  if (d.nodes_a == 0) return "only in B";
  if (d.nodes_b == 0) return "only in A";
  return verdict_name(d.verdict);
}

std::string metric_json(const MetricDelta& m) {
  std::ostringstream o;
  o << "{\"name\": " << json_string(m.name) << ", \"a\": " << (m.in_a ? json_number(m.a) : "null")
    << ", \"b\": " << (m.in_b ? json_number(m.b) : "null")
    << ", \"delta\": " << (m.in_a && m.in_b ? json_number(m.delta()) : "null")
    << ", \"noise\": " << (m.noise >= 0 ? json_number(m.noise) : "null")
    << ", \"verdict\": " << json_string(verdict_text(m)) << "}";
  return o.str();
}

std::string spread_json(const SpreadStats& s) {
  std::ostringstream o;
  o << "{\"samples\": " << s.samples << ", \"median\": " << json_number(s.median)
    << ", \"q1\": " << json_number(s.q1) << ", \"q3\": " << json_number(s.q3)
    << ", \"iqr\": " << json_number(s.iqr()) << "}";
  return o.str();
}

std::string comparison_json(const RunRecord& a, const RunRecord& b, const RunComparison& c) {
  std::ostringstream o;
  o << "{\n  \"run_a\": " << a.id << ", \"run_b\": " << b.id
    << ",\n  \"model_a\": " << json_string(a.model_path)
    << ", \"model_b\": " << json_string(b.model_path)
    << ",\n  \"same_model\": " << (a.model_sha256 == b.model_sha256 ? "true" : "false")
    << ",\n  \"rule\": \"|median(B) - median(A)| > IQR(A) + IQR(B)\""
    << ",\n  \"latency_a\": " << spread_json(c.latency_a)
    << ",\n  \"latency_b\": " << spread_json(c.latency_b)
    << ",\n  \"median_latency\": " << metric_json(c.median_latency) << ",\n  \"metrics\": [";
  for (size_t i = 0; i < c.metrics.size(); ++i)
    o << (i ? ",\n    " : "\n    ") << metric_json(c.metrics[i]);
  o << "],\n  \"op_types\": [";
  for (size_t i = 0; i < c.op_types.size(); ++i) {
    const OpTypeDelta& d = c.op_types[i];
    o << (i ? ",\n    " : "\n    ") << "{\"op_type\": " << json_string(d.op_type)
      << ", \"nodes_a\": " << d.nodes_a << ", \"nodes_b\": " << d.nodes_b
      << ", \"a_ms\": " << json_number(d.a_ms) << ", \"b_ms\": " << json_number(d.b_ms)
      << ", \"delta_ms\": " << json_number(d.b_ms - d.a_ms)
      << ", \"noise_ms\": " << (d.noise >= 0 ? json_number(d.noise) : "null")
      << ", \"verdict\": " << json_string(op_verdict_text(d)) << "}";
  }
  o << "],\n  \"warnings\": [";
  for (size_t i = 0; i < c.warnings.size(); ++i) o << (i ? ", " : "") << json_string(c.warnings[i]);
  o << "]\n}\n";
  return o.str();
}

void print_comparison(const RunRecord& a, const RunRecord& b, const RunComparison& c) {
  std::printf("A  %s\nB  %s\n", describe(a).c_str(), describe(b).c_str());
  for (const auto& w : c.warnings) std::printf("warning: %s\n", w.c_str());

  const MetricDelta& m = c.median_latency;
  if (m.in_a && m.in_b) {
    std::printf("\nmedian latency: %s ms -> %s ms (%s ms, %s): %s\n", fixed(m.a).c_str(),
                fixed(m.b).c_str(), signed_fixed(m.delta()).c_str(), percent(m.a, m.b).c_str(),
                verdict_name(m.verdict));
    std::printf("  spread: IQR(A) %s ms over %zu iterations, IQR(B) %s ms over %zu iterations",
                fixed(c.latency_a.iqr()).c_str(), c.latency_a.samples,
                fixed(c.latency_b.iqr()).c_str(), c.latency_b.samples);
    if (m.noise >= 0) std::printf("; threshold %s ms", fixed(m.noise).c_str());
    std::printf("\n");
  } else {
    std::printf("\nmedian latency: not comparable (per-iteration latencies missing in %s)\n",
                m.in_a ? "B" : (m.in_b ? "A" : "both runs"));
  }

  if (!c.metrics.empty()) {
    std::printf("\n%-26s %12s %12s %12s %8s  %s\n", "metric", "A", "B", "delta", "%", "verdict");
    for (const MetricDelta& d : c.metrics) {
      std::printf("%-26s %12s %12s %12s %8s  %s\n", d.name.c_str(),
                  d.in_a ? fixed(d.a).c_str() : "-", d.in_b ? fixed(d.b).c_str() : "-",
                  d.in_a && d.in_b ? signed_fixed(d.delta()).c_str() : "-",
                  d.in_a && d.in_b ? percent(d.a, d.b).c_str() : "-", verdict_text(d).c_str());
    }
  }
  if (!c.op_types.empty()) {
    std::printf("\n%-22s %6s %12s %12s %12s %8s  %s\n", "op type", "nodes", "A ms", "B ms",
                "delta ms", "%", "verdict");
    for (const OpTypeDelta& d : c.op_types) {
      std::string nodes = d.nodes_a == d.nodes_b
                              ? std::to_string(d.nodes_a)
                              : std::to_string(d.nodes_a) + "/" + std::to_string(d.nodes_b);
      std::printf("%-22s %6s %12s %12s %12s %8s  %s\n", d.op_type.c_str(), nodes.c_str(),
                  fixed(d.a_ms).c_str(), fixed(d.b_ms).c_str(),
                  signed_fixed(d.b_ms - d.a_ms).c_str(), percent(d.a_ms, d.b_ms).c_str(),
                  op_verdict_text(d).c_str());
    }
  } else {
    std::printf(
        "\n(no per-node times in either run: compare two profile runs for the op-type "
        "breakdown)\n");
  }
}

}  // namespace

int cmd_compare(int argc, char** argv) {
  Args args("compare", kUsage);
  args.flag("db", "experiment store (default ~/.peregrine/runs.db)");
  args.toggle("json", "print the comparison as one JSON object");
  Status parsed = args.parse(argc, argv);
  if (!parsed.is_ok()) return print_error(parsed);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (args.positional().size() != 2)
    return print_error(
        invalid_input("peregrine compare needs two run ids, RUN_A and RUN_B (see --help)"));
  auto id_a = parse_int(args.positional()[0], "RUN_A");
  if (!id_a.is_ok())
    return print_error(invalid_input("RUN_A must be a run id, got '" + args.positional()[0] + "'"));
  auto id_b = parse_int(args.positional()[1], "RUN_B");
  if (!id_b.is_ok())
    return print_error(invalid_input("RUN_B must be a run id, got '" + args.positional()[1] + "'"));

  auto path = store_path_from(args);
  if (!path.is_ok()) return print_error(path.status());
  if (!std::filesystem::exists(*path))
    return print_error(
        invalid_input("no run store at '" + *path + "' (record runs with bench or profile)"));
  auto store = ExperimentStore::open(*path);
  if (!store.is_ok()) return print_error(store.status());
  auto a = store->get(*id_a);
  if (!a.is_ok()) return print_error(a.status());
  auto b = store->get(*id_b);
  if (!b.is_ok()) return print_error(b.status());

  RunComparison comparison = compare_runs(*a, *b);
  if (args.is_set("json")) {
    std::fputs(comparison_json(*a, *b, comparison).c_str(), stdout);
  } else {
    print_comparison(*a, *b, comparison);
  }
  return 0;
}

}  // namespace peregrine::cli
