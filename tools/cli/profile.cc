// peregrine profile MODEL: where the time goes, node by node, against this machine's roofs.
//
// The measurement is profiler::profile_session (src/profiler/session_profile.h): the model
// run `--iterations` times with per-node timing and as many times without, interleaved, so
// the cost of profiling itself shows up as the difference; per top-level node the median
// time, FLOPs and bytes from the op cost model and the roofline numbers. This file parses
// the flags, writes the trace / report files, records the run and prints.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "cli_common.h"
#include "core/file_io.h"
#include "core/json_text.h"
#include "lab/compare_runs.h"
#include "lab/run_record.h"
#include "model_inputs.h"
#include "peregrine/session.h"
#include "profiler/machine.h"
#include "profiler/report.h"
#include "profiler/roofline.h"
#include "profiler/session_profile.h"
#include "profiler/trace.h"
#include "record_run.h"

namespace peregrine::cli {

namespace {

constexpr int kDefaultIterations = 10;
constexpr size_t kBottleneckCount = 5;

std::string fixed(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// Output files are the user's: refuse to replace one unless asked.
Status check_output_path(const Args& args, const std::string& flag) {
  if (!args.has(flag)) return Status::ok();
  const std::string path = args.get(flag);
  if (path.empty()) return invalid_input("--" + flag + " needs a file name");
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !args.is_set("overwrite"))
    return invalid_input("'" + path + "' already exists; pass --overwrite to replace it");
  if (std::filesystem::is_directory(path, ec))
    return invalid_input("--" + flag + ": '" + path + "' is a folder");
  return Status::ok();
}

// The executor's own time per node: the untimed run's latency less the kernels' time, over the
// nodes (kernel time comes from the timed runs, so noise can make it negative: clamped at 0).
double executor_overhead_us_per_node(const profiler::ProfileReport& r) {
  if (r.nodes.empty()) return 0;
  const double gap = r.latency_untimed_median_ms * 1e3 - profiler::total_node_time_us(r.nodes);
  return std::max(0.0, gap) / static_cast<double>(r.nodes.size());
}

std::string text_report(const profiler::ProfileReport& r) {
  std::ostringstream o;
  const double total_us = profiler::total_node_time_us(r.nodes);
  o << "model:      " << r.model_path << "\n";
  o << "machine:    " << r.cpu_model << "\n";
  o << "roofs:      peak " << fixed("%.1f", r.roofs.peak_gflops) << " GFLOP/s (" << r.isa
    << "), bandwidth " << fixed("%.1f", r.roofs.bandwidth_gbps) << " GB/s, ridge "
    << fixed("%.2f", profiler::ridge_intensity(r.roofs)) << " FLOP/B at " << r.threads
    << " thread(s)\n";
  o << "latency:    median " << fixed("%.3f", r.latency_median_ms) << " ms with per-node timing, "
    << fixed("%.3f", r.latency_untimed_median_ms) << " ms without (" << r.iterations
    << " runs each)\n";
  // The rest of a run is the executor's own work between kernels (shape checks, bookkeeping).
  const double in_kernels =
      r.latency_median_ms > 0 ? 100 * total_us / 1e3 / r.latency_median_ms : 0;
  o << "node time:  " << fixed("%.3f", total_us / 1e3) << " ms over " << r.nodes.size()
    << " nodes (" << fixed("%.1f", in_kernels) << "% of the run; the rest is between kernels)\n";
  o << "executor:   " << fixed("%.2f", executor_overhead_us_per_node(r))
    << " us per node between kernels (untimed latency less node time, over the nodes)\n\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-4s %-28s %-20s %10s %6s %10s %9s %9s %8s %9s %7s  %s\n", "#",
                "node", "op", "median_us", "%time", "MFLOP", "GFLOP/s", "GB/s", "FLOP/B", "roof",
                "%roof", "class");
  o << line;
  for (const auto& n : r.nodes) {
    const auto& p = n.roof;
    std::string name = n.name.size() > 28 ? n.name.substr(0, 25) + "..." : n.name;
    std::string op = n.op_type.size() > 20 ? n.op_type.substr(0, 17) + "..." : n.op_type;
    std::snprintf(line, sizeof line,
                  "%-4zu %-28s %-20s %10.1f %6.1f %10.3f %9.3f %9.3f %8.3g %9.2f %7.1f  %s%s\n",
                  n.index, name.c_str(), op.c_str(), n.median_us,
                  total_us > 0 ? 100 * n.median_us / total_us : 0, p.flops / 1e6, p.achieved_gflops,
                  p.achieved_gbps, p.intensity, p.bound_gflops, p.percent_of_bound,
                  profiler::bound_class_name(p.bound_class), n.cost_known ? "" : " (cost partial)");
    o << line;
  }
  o << "\nby op type:\n";
  for (const auto& t : r.op_totals) {
    std::snprintf(line, sizeof line, "  %-22s %4d nodes %12.3f ms %6.1f%% %12.3f GFLOP %10.3f MB\n",
                  t.op_type.c_str(), t.count, t.time_us / 1e3, t.percent_of_nodes, t.flops / 1e9,
                  t.bytes / 1e6);
    o << line;
  }
  o << "\ntop bottlenecks:\n";
  for (size_t k = 0; k < r.bottlenecks.size(); ++k) {
    const auto& n = r.nodes[r.bottlenecks[k]];
    o << "  " << k + 1 << ". " << n.name << " (" << n.op_type << ", " << fixed("%.1f", n.median_us)
      << " us, " << fixed("%.1f", total_us > 0 ? 100 * n.median_us / total_us : 0)
      << "%): " << n.reason << "\n";
  }
  return o.str();
}

std::string json_report(const profiler::ProfileReport& r, double overhead_percent) {
  std::ostringstream o;
  o << "{\"model\": " << json_string(r.model_path) << ", \"threads\": " << r.threads
    << ", \"iterations\": " << r.iterations
    << ", \"machine\": {\"cpu_model\": " << json_string(r.cpu_model)
    << ", \"isa\": " << json_string(r.isa)
    << ", \"peak_gflops\": " << json_number(r.roofs.peak_gflops)
    << ", \"bandwidth_gbps\": " << json_number(r.roofs.bandwidth_gbps)
    << ", \"ridge_flops_per_byte\": " << json_number(profiler::ridge_intensity(r.roofs)) << "}"
    << ", \"latency_median_ms\": " << json_number(r.latency_median_ms)
    << ", \"latency_untimed_median_ms\": " << json_number(r.latency_untimed_median_ms)
    << ", \"profiling_overhead_percent\": " << json_number(overhead_percent)
    << ", \"node_time_ms\": " << json_number(profiler::total_node_time_us(r.nodes) / 1e3)
    << ", \"executor_overhead_us_per_node\": " << json_number(executor_overhead_us_per_node(r))
    << ", \"nodes\": [";
  for (size_t i = 0; i < r.nodes.size(); ++i) {
    const auto& n = r.nodes[i];
    const auto& p = n.roof;
    o << (i ? ",\n  " : "\n  ") << "{\"index\": " << n.index
      << ", \"name\": " << json_string(n.name) << ", \"op_type\": " << json_string(n.op_type)
      << ", \"kernel\": " << json_string(n.kernel)
      << ", \"inputs\": " << json_string(n.input_shapes)
      << ", \"outputs\": " << json_string(n.output_shapes)
      << ", \"median_us\": " << json_number(n.median_us)
      << ", \"min_us\": " << json_number(n.min_us) << ", \"flops\": " << json_number(p.flops)
      << ", \"bytes\": " << json_number(p.bytes)
      << ", \"cost_known\": " << (n.cost_known ? "true" : "false")
      << ", \"gflops\": " << json_number(p.achieved_gflops)
      << ", \"gbps\": " << json_number(p.achieved_gbps)
      << ", \"intensity\": " << json_number(p.intensity)
      << ", \"roof_gflops\": " << json_number(p.bound_gflops)
      << ", \"percent_of_roof\": " << json_number(p.percent_of_bound)
      << ", \"class\": " << json_string(profiler::bound_class_name(p.bound_class)) << "}";
  }
  o << "],\n \"op_types\": [";
  for (size_t i = 0; i < r.op_totals.size(); ++i) {
    const auto& t = r.op_totals[i];
    o << (i ? ", " : "") << "{\"op_type\": " << json_string(t.op_type) << ", \"count\": " << t.count
      << ", \"time_ms\": " << json_number(t.time_us / 1e3)
      << ", \"percent\": " << json_number(t.percent_of_nodes)
      << ", \"flops\": " << json_number(t.flops) << ", \"bytes\": " << json_number(t.bytes) << "}";
  }
  o << "],\n \"bottlenecks\": [";
  for (size_t k = 0; k < r.bottlenecks.size(); ++k) {
    const auto& n = r.nodes[r.bottlenecks[k]];
    o << (k ? ", " : "") << "{\"index\": " << n.index << ", \"name\": " << json_string(n.name)
      << ", \"reason\": " << json_string(n.reason) << "}";
  }
  o << "]}\n";
  return o.str();
}

}  // namespace

int cmd_profile(int argc, char** argv) {
  Args args("profile", "MODEL [options]");
  add_model_input_flags(&args);
  add_engine_flags(&args);
  args.flag("iterations", "profiled runs (default: 10); as many untimed runs are interleaved");
  args.flag("trace", "write a Chrome trace (JSON, loads in Perfetto) of the profiled runs to FILE");
  args.flag("report", "write a self-contained HTML report (roofline, op breakdown, table) to FILE");
  args.toggle("json", "print one JSON object instead of text");
  args.toggle("overwrite", "replace --trace / --report files that already exist");
  add_record_flags(args);  // --db, --no-record
  Status st = args.parse(argc, argv);
  if (!st.is_ok()) return print_error(st);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (args.positional().size() != 1)
    return print_error(invalid_input("peregrine profile: expected exactly one MODEL argument"));
  const std::string model_path = args.positional()[0];

  SessionOptions options;
  uint64_t seed = 0;
  std::map<std::string, Tensor> given;  // --input files are read here, before any timing
  st = parse_model_input_flags(args, &options, &given, &seed);
  if (st.is_ok()) st = parse_engine_flags(args, &options);
  if (!st.is_ok()) return print_error(st);
  int iterations = kDefaultIterations;
  if (args.has("iterations")) {
    auto v = parse_int(args.get("iterations"), "iterations");
    if (!v.is_ok()) return print_error(v.status());
    if (*v < 1 || *v > 1000000)
      return print_error(invalid_input("--iterations must be in 1..1000000"));
    iterations = static_cast<int>(*v);
  }
  for (const char* flag : {"trace", "report"}) {
    Status out = check_output_path(args, flag);
    if (!out.is_ok()) return print_error(out);
  }
  auto session = Session::load(model_path, options);
  if (!session.is_ok()) return print_error(session.status());
  // Inputs are made before any timed region.
  auto tensors = make_model_inputs(**session, given, seed);
  if (!tensors.is_ok()) return print_error(tensors.status());
  const std::string input_shapes = describe_input_shapes(*tensors);  // for the run record
  std::map<std::string, RuntimeValue> inputs;
  for (auto& [name, t] : *tensors) inputs[name] = RuntimeValue::of(std::move(t));

  auto ceilings = load_or_measure_ceilings();
  if (!ceilings.is_ok()) return print_error(ceilings.status().with_context("machine ceilings"));
  profiler::Roofs roofs{ceilings->peak_gflops_at(options.num_threads),
                        ceilings->bandwidth_gbps_at(options.num_threads)};
  const profiler::Roofs bf16_roofs{ceilings->bf16_peak_gflops_at(options.num_threads),
                                   roofs.bandwidth_gbps};
  const profiler::Roofs int8_roofs{ceilings->int8_peak_gflops_at(options.num_threads),
                                   roofs.bandwidth_gbps};

  const profiler::PrecisionRoofs precision_roofs{roofs, bf16_roofs, int8_roofs};
  auto measured =
      profiler::profile_session(**session, inputs, iterations, precision_roofs, kBottleneckCount);
  if (!measured.is_ok()) return print_error(measured.status());
  profiler::SessionProfile& profile = *measured;
  profiler::ProfileReport& report = profile.report;
  report.model_path = model_path;
  report.cpu_model = ceilings->cpu_model;
  report.isa = ceilings->best_isa();
  report.threads = options.num_threads;
  const double overhead_percent = profile.overhead_percent;

  if (args.has("trace")) {
    const profiler::Trace trace =
        profiler::session_trace(profile, "peregrine profile " + model_path,
                                {{"model", json_string(model_path)},
                                 {"threads", std::to_string(options.num_threads)},
                                 {"precision", json_string(precision_name(options.precision))},
                                 {"iterations", std::to_string(iterations)},
                                 {"cpu_model", json_string(ceilings->cpu_model)}});
    Status w = write_file_atomically(args.get("trace"), profiler::trace_to_json(trace));
    if (!w.is_ok()) return print_error(w);
  }
  if (args.has("report")) {
    Status w = write_file_atomically(args.get("report"), profiler::render_html_report(report));
    if (!w.is_ok()) return print_error(w);
  }

  // The run for the experiment store: the profiled runs' latencies (the spread that
  // `peregrine compare` judges by) and per-node medians with their own IQRs.
  RunRecord record;
  record.kind = "profile";
  record.model_path = model_path;
  record.input_shapes = input_shapes;
  record.options_json = "{\"threads\": " + std::to_string(options.num_threads) +
                        ", \"iterations\": " + std::to_string(iterations) +
                        ", \"precision\": \"" + precision_name(options.precision) + "\"}";
  record.machine_fingerprint = ceilings->fingerprint;
  record.machine_json = ceilings_to_json(*ceilings);
  record.latencies_ms = profile.timed_ms;
  record.metrics = {{"latency_median_ms", report.latency_median_ms},
                    {"latency_untimed_median_ms", report.latency_untimed_median_ms},
                    {"profiling_overhead_percent", overhead_percent}};
  for (const auto& n : report.nodes) {
    const double iqr_ms = spread_of(profile.node_samples_us[n.index]).iqr() / 1e3;
    record.nodes.push_back(
        {n.name, n.op_type, n.median_us / 1e3, n.roof.flops, n.roof.bytes, iqr_ms});
  }
  // A store that cannot record makes the exit code non-zero, but the profile still prints.
  const int record_exit_code = record_run(args, record);

  const std::string out =
      args.is_set("json") ? json_report(report, overhead_percent) : text_report(report);
  std::fputs(out.c_str(), stdout);
  if (!args.is_set("json")) {
    for (const char* flag : {"trace", "report"})
      if (args.has(flag)) std::printf("wrote %s\n", args.get(flag).c_str());
  }
  return record_exit_code;
}

}  // namespace peregrine::cli
