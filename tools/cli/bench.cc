// peregrine bench MODEL: how fast a model runs (trtexec-style). Session creation, first
// run, then a warm-up and timed runs; latency percentiles, throughput, peak RSS.
// Reading --input files and generating random inputs happen before any timing.
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "cli_common.h"
#include "core/json_text.h"
#include "ir/graph.h"
#include "lab/run_record.h"
#include "lab/stats.h"
#include "model_inputs.h"
#include "peregrine/runtime_value.h"
#include "peregrine/session.h"
#include "profiler/machine.h"
#include "record_run.h"
#include "runtime/session_internals.h"

namespace peregrine::cli {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// CPU time of the whole process (every thread), in ms. Per run it is the work done, which on a
// shared machine is steadier than wall time: time spent waiting for a core is not counted.
double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

// Peak resident set size of this process so far, in MiB (Linux reports ru_maxrss in KiB).
double peak_rss_mib() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// Activation bytes, statically: the sum of the sizes of every tensor the top-level nodes
// produce in one run (graph outputs included), from the shapes inferred at load. This is
// the total written, not the peak live at once (the arena below is that); values whose
// shape is not known before running are counted in `unknown`. Subgraph bodies are not counted.
struct ActivationBytes {
  double bytes = 0;
  int64_t values = 0;
  int64_t unknown = 0;
};

ActivationBytes static_activation_bytes(const ir::Graph& g) {
  ActivationBytes a;
  for (const auto& node : g.nodes) {
    for (const auto& name : node->outputs) {
      if (name.empty()) continue;
      ++a.values;
      const ir::Value* v = g.find_value(name);
      if (!v || !v->type.is_static() || dtype_size(v->type.dtype) == 0) {
        ++a.unknown;
        continue;
      }
      double numel = 1;
      for (int64_t d : v->type.dims) numel *= static_cast<double>(d);
      a.bytes += numel * static_cast<double>(dtype_size(v->type.dtype));
    }
  }
  return a;
}

std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Everything a finished bench knows; the text and JSON output and the run record come from it.
struct BenchResult {
  std::string model;
  std::string input_shapes;
  int threads = 1;
  double warmup_ms = 0;
  int64_t warmup_iterations = 0;
  double create_ms = 0;
  double first_run_ms = 0;
  std::vector<double> latencies_ms;
  lab::LatencyStats latency;
  std::vector<double> cpu_ms;  // process CPU time of each timed run
  double cpu_ms_median = 0;
  double measured_wall_ms = 0;  // wall time of the timed loop
  double throughput_per_s = 0;  // timed runs per second of wall time
  double peak_rss_mb = 0;
  ActivationBytes activations;
  MemoryPlanStats arena;  // the session's static activation arena
};

RunRecord to_run_record(const BenchResult& r, const std::string& options_json) {
  RunRecord rec;
  rec.kind = "bench";
  rec.model_path = r.model;
  rec.input_shapes = r.input_shapes;
  rec.options_json = options_json;
  // machine_fingerprint, timestamp, commit, build flags and SHA-256: filled by the recorder
  // when left empty; the ceilings only if this machine has been measured (bench never measures).
  if (auto ceilings = load_cached_ceilings(); ceilings.is_ok()) {
    rec.machine_fingerprint = ceilings->fingerprint;
    rec.machine_json = ceilings_to_json(*ceilings);
  }
  rec.metrics = {
      {"create_ms", r.create_ms},
      {"first_run_ms", r.first_run_ms},
      {"latency_min_ms", r.latency.min},
      {"latency_mean_ms", r.latency.mean},
      {"latency_median_ms", r.latency.median},
      {"latency_p90_ms", r.latency.p90},
      {"latency_p95_ms", r.latency.p95},
      {"latency_p99_ms", r.latency.p99},
      {"latency_max_ms", r.latency.max},
      {"latency_stddev_ms", r.latency.stddev},
      {"throughput_per_s", r.throughput_per_s},
      {"peak_rss_mb", r.peak_rss_mb},
      {"activation_bytes", r.activations.bytes},
      {"arena_bytes", static_cast<double>(r.arena.arena_bytes)},
      {"iterations", static_cast<double>(r.latency.count)},
  };
  rec.latencies_ms = r.latencies_ms;
  return rec;
}

std::string result_json(const BenchResult& r) {
  std::ostringstream o;
  const auto& l = r.latency;
  o << "{\"model\": " << json_string(r.model)
    << ", \"input_shapes\": " << json_string(r.input_shapes) << ", \"threads\": " << r.threads
    << ", \"warmup_iterations\": " << r.warmup_iterations << ", \"iterations\": " << l.count
    << ", \"create_ms\": " << number(r.create_ms)
    << ", \"first_run_ms\": " << number(r.first_run_ms)
    << ", \"latency_ms\": {\"min\": " << number(l.min) << ", \"mean\": " << number(l.mean)
    << ", \"median\": " << number(l.median) << ", \"p90\": " << number(l.p90)
    << ", \"p95\": " << number(l.p95) << ", \"p99\": " << number(l.p99)
    << ", \"max\": " << number(l.max) << ", \"stddev\": " << number(l.stddev)
    << "}, \"cpu_ms_median\": " << number(r.cpu_ms_median)
    << ", \"throughput_per_s\": " << number(r.throughput_per_s)
    << ", \"peak_rss_mb\": " << number(r.peak_rss_mb)
    << ", \"activation_bytes\": " << static_cast<int64_t>(r.activations.bytes)
    << ", \"activation_bytes_method\": "
    << json_string(
           "sum of every node output of one run, from inferred static shapes (not peak live)")
    << ", \"activation_values\": " << r.activations.values
    << ", \"activation_values_unknown_size\": " << r.activations.unknown
    << ", \"arena_bytes\": " << r.arena.arena_bytes
    << ", \"arena_lower_bound_bytes\": " << r.arena.lower_bound_bytes << "}\n";
  return o.str();
}

void print_text(const BenchResult& r) {
  const auto& l = r.latency;
  std::printf("model:           %s\n", r.model.c_str());
  std::printf("inputs:          %s\n", r.input_shapes.empty() ? "(none)" : r.input_shapes.c_str());
  std::printf("threads:         %d\n", r.threads);
  std::printf("session create:  %.3f ms\n", r.create_ms);
  std::printf("first run:       %.3f ms\n", r.first_run_ms);
  std::printf("warm-up:         %lld runs\n", static_cast<long long>(r.warmup_iterations));
  std::printf("timed runs:      %lld in %.1f ms\n", static_cast<long long>(l.count), r.measured_wall_ms);
  std::printf("latency (ms):    min %.3f  mean %.3f  median %.3f  p90 %.3f  p95 %.3f  p99 %.3f  "
              "max %.3f  (stddev %.3f)\n",
              l.min, l.mean, l.median, l.p90, l.p95, l.p99, l.max, l.stddev);
  std::printf("cpu time:        median %.3f ms per run (all threads)\n", r.cpu_ms_median);
  std::printf("throughput:      %.2f runs/s\n", r.throughput_per_s);
  std::printf("peak RSS:        %.1f MiB\n", r.peak_rss_mb);
  std::printf("activations:     %.0f bytes (%.2f MB) written per run (sum of node outputs from "
              "static shapes; not peak live)",
              r.activations.bytes, r.activations.bytes / 1e6);
  if (r.activations.unknown > 0)
    std::printf(", %lld of %lld values of unknown size not counted",
                static_cast<long long>(r.activations.unknown), static_cast<long long>(r.activations.values));
  std::printf("\n");
  std::printf("activation arena: %.2f MB (lower bound %.2f MB; values of data-dependent shape "
              "live outside it)\n",
              r.arena.arena_bytes / 1e6, r.arena.lower_bound_bytes / 1e6);
}

// How long bench warms up and times; iterations 0: run for duration_s.
struct BenchTiming {
  double warmup_ms = 200;
  int64_t iterations = 0;
  double duration_s = 3;
};

Status parse_timing_flags(const Args& args, BenchTiming* t) {
  if (args.has("warmup-ms")) {
    PG_ASSIGN_OR_RETURN(int64_t v, parse_int(args.get("warmup-ms"), "warmup-ms"));
    if (v < 0 || v > 3600 * 1000) return invalid_input("--warmup-ms must be in 0..3600000");
    t->warmup_ms = static_cast<double>(v);
  }
  if (args.has("iterations") && args.has("duration-s"))
    return invalid_input("--iterations and --duration-s are exclusive; give one");
  if (args.has("iterations")) {
    PG_ASSIGN_OR_RETURN(int64_t v, parse_int(args.get("iterations"), "iterations"));
    if (v < 1 || v > 100000000) return invalid_input("--iterations must be in 1..100000000");
    t->iterations = v;
  }
  if (args.has("duration-s")) {
    const std::string text = args.get("duration-s");
    char* end = nullptr;
    t->duration_s = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(t->duration_s > 0) || t->duration_s > 86400)
      return invalid_input("--duration-s: expected seconds in (0, 86400], got '" + text + "'");
  }
  return Status::ok();
}

// The first run, the warm-up (the first run counts toward it) and the timed runs, with their
// summaries, into `r`.
Status measure(Session& s, const std::map<std::string, RuntimeValue>& values,
               const BenchTiming& timing, BenchResult* r) {
  auto t_first = Clock::now();
  auto first = s.run_values(values);
  r->first_run_ms = ms_since(t_first);
  if (!first.is_ok()) return first.status();
  double warmed_ms = r->first_run_ms;
  while (warmed_ms < timing.warmup_ms) {
    auto t0 = Clock::now();
    auto out = s.run_values(values);
    if (!out.is_ok()) return out.status();
    warmed_ms += ms_since(t0);
    ++r->warmup_iterations;
  }
  const int64_t min_duration_runs = 3;
  auto t_loop = Clock::now();
  for (int64_t i = 0;; ++i) {
    if (timing.iterations > 0
            ? i >= timing.iterations
            : (i >= min_duration_runs && ms_since(t_loop) >= timing.duration_s * 1000))
      break;
    const double cpu0 = process_cpu_ms();
    auto t0 = Clock::now();
    auto out = s.run_values(values);
    double ms = ms_since(t0);
    r->cpu_ms.push_back(process_cpu_ms() - cpu0);
    if (!out.is_ok()) return out.status();
    r->latencies_ms.push_back(ms);
  }
  r->measured_wall_ms = ms_since(t_loop);
  r->latency = lab::summarize_latencies(r->latencies_ms);
  r->cpu_ms_median = lab::summarize_latencies(r->cpu_ms).median;
  r->throughput_per_s =
      r->measured_wall_ms > 0 ? r->latency.count * 1000.0 / r->measured_wall_ms : 0;
  r->peak_rss_mb = peak_rss_mib();
  return Status::ok();
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  Args args("bench", "MODEL [options]");
  add_model_input_flags(&args);
  add_engine_flags(&args);
  args.flag("warmup-ms", "warm up for at least this long before timing, first run included "
                         "(default: 200)");
  args.flag("iterations", "timed runs (exclusive with --duration-s)");
  args.flag("duration-s", "time runs for at least this long, at least 3 runs (default: 3)");
  args.toggle("json", "print one JSON object instead of text");
  add_record_flags(args);  // --db, --no-record
  Status st = args.parse(argc, argv);
  if (!st.is_ok()) return print_error(st);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (args.positional().size() != 1)
    return print_error(invalid_input("peregrine bench: expected exactly one MODEL argument"));

  SessionOptions options;
  uint64_t seed = 0;
  std::map<std::string, Tensor> given;
  st = parse_model_input_flags(args, &options, &given, &seed);
  if (st.is_ok()) st = parse_engine_flags(args, &options);
  if (!st.is_ok()) return print_error(st);
  BenchTiming timing;
  st = parse_timing_flags(args, &timing);
  if (!st.is_ok()) return print_error(st);

  BenchResult r;
  r.model = args.positional()[0];
  r.threads = options.num_threads;
  r.warmup_ms = timing.warmup_ms;

  auto t_create = Clock::now();
  auto session = Session::load(r.model, options);
  r.create_ms = ms_since(t_create);
  if (!session.is_ok()) return print_error(session.status());
  Session& s = **session;

  auto inputs = make_model_inputs(s, given, seed);
  if (!inputs.is_ok()) return print_error(inputs.status());
  r.input_shapes = describe_input_shapes(*inputs);
  // The timed calls take RuntimeValues directly, so no per-run conversion is measured.
  std::map<std::string, RuntimeValue> values;
  for (const auto& [name, t] : *inputs) values[name] = RuntimeValue::of(t);
  given.clear();

  st = measure(s, values, timing, &r);
  if (!st.is_ok()) return print_error(st);

  r.activations = static_activation_bytes(session_model(s).graph);
  r.arena = s.memory_plan_stats();
  if (r.activations.unknown > 0) {
    // Dims the model leaves open were fixed by the inputs; infer shapes again with them
    // (after all measurements, so this second session costs no time or RSS above).
    SessionOptions fixed = options;
    for (const auto& [name, t] : *inputs) fixed.input_shapes[name] = t.shape();
    if (auto again = Session::load(r.model, fixed); again.is_ok())
      r.activations = static_activation_bytes(session_model(**again).graph);
  }

  std::ostringstream options_json;
  const bool counted = timing.iterations > 0;
  options_json << "{\"threads\": " << r.threads << ", \"warmup_ms\": " << number(timing.warmup_ms)
               << ", \"iterations\": " << (counted ? std::to_string(timing.iterations) : "null")
               << ", \"duration_s\": " << (counted ? "null" : number(timing.duration_s))
               << ", \"seed\": " << seed << ", \"precision\": \""
               << precision_name(options.precision) << "\"}";
  // The finished bench, as the experiment store records it.
  RunRecord record = to_run_record(r, options_json.str());
  // A store that cannot record makes the exit code non-zero, but the numbers still print.
  const int record_exit_code = record_run(args, record);

  if (args.is_set("json"))
    std::fputs(result_json(r).c_str(), stdout);
  else
    print_text(r);
  return record_exit_code;
}

}  // namespace peregrine::cli
