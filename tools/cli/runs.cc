// peregrine runs: lists the bench and profile runs in the experiment store, compares one model
// across machines, and moves complete runs between stores (--export / --import).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>

#include "cli_common.h"
#include "core/file_io.h"
#include "core/json_value.h"
#include "lab/run_record_json.h"
#include "lab/store.h"
#include "profiler/trace.h"
#include "record_run.h"

namespace peregrine::cli {
namespace {

std::string metric_text(const RunRecord& r, const char* name) {
  auto it = r.metrics.find(name);
  if (it == r.metrics.end()) return "-";
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", it->second);
  return text;
}

// Records every run of a JSON array `runs --export` wrote ("-": standard input) into `store`.
int import_runs(ExperimentStore& store, const std::string& file) {
  std::string text;
  if (file == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream in(file, std::ios::binary);
    if (!in) return print_error(invalid_input("cannot read '" + file + "'"));
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  auto records = run_records_from_json(text);
  if (!records.is_ok()) return print_error(records.status().with_context(file));
  for (RunRecord& r : *records) {
    auto id = store.record(r);
    if (!id.is_ok()) return print_error(id.status().with_context(file));
  }
  std::printf("imported %zu run%s from %s into %s\n", records->size(),
              records->size() == 1 ? "" : "s", file.c_str(), store.path().c_str());
  return 0;
}

// The complete runs `list` selected (latencies and nodes included) into a new file.
int export_runs(ExperimentStore& store, const std::vector<RunRecord>& listed,
                const std::string& file) {
  if (std::filesystem::exists(file))
    return print_error(invalid_input("'" + file + "' exists; --export never overwrites a file"));
  std::vector<RunRecord> complete;
  for (const RunRecord& r : listed) {
    auto full = store.get(r.id);
    if (!full.is_ok()) return print_error(full.status());
    complete.push_back(std::move(*full));
  }
  Status s = write_file_atomically(file, run_records_to_json(complete));
  if (!s.is_ok()) return print_error(s);
  std::printf("exported %zu run%s to %s\n", complete.size(), complete.size() == 1 ? "" : "s",
              file.c_str());
  return 0;
}

std::string cpu_model_of(const RunRecord& r) {
  if (r.machine_json.empty()) return "";
  auto machine = parse_json(r.machine_json);
  if (!machine.is_ok()) return "";
  const Json* cpu = machine->get("cpu_model");
  return cpu && cpu->type == Json::Type::kString ? cpu->string : "";
}

// The options that make two runs comparable, as one text: how long a run measured (warm-up,
// iterations, duration) is left out, and JSON spacing does not count.
std::string configuration_of(const RunRecord& r) {
  auto options = parse_json(r.options_json.empty() ? "{}" : r.options_json);
  if (!options.is_ok() || !options->is_object()) return r.options_json;
  Json kept = Json::make_object();
  for (size_t i = 0; i < options->keys.size(); ++i) {
    const std::string& k = options->keys[i];
    if (k != "warmup_ms" && k != "iterations" && k != "duration_s") kept.set(k, options->values[i]);
  }
  return to_json_text(kept) + (r.input_shapes.empty() ? "" : " " + r.input_shapes);
}

// One model and configuration across machines: the newest run of each (model, options, machine)
// with its median, and its ratio to the fastest machine's.
void print_by_machine(const std::vector<RunRecord>& runs) {
  struct Row {
    const RunRecord* run;
    std::string cpu;
  };
  // (model file, SHA-256 prefix, kind, options) -> machine fingerprint -> newest run.
  std::map<std::string, std::map<std::string, Row>> groups;
  for (const RunRecord& r : runs) {  // newest first: the first seen is kept
    if (!r.metrics.count("latency_median_ms")) continue;
    std::string model = std::filesystem::path(r.model_path).filename().string();
    std::string key =
        model + " (" + r.model_sha256.substr(0, 12) + ") " + r.kind + " " + configuration_of(r);
    groups[key].emplace(r.machine_fingerprint, Row{&r, cpu_model_of(r)});
  }
  if (groups.empty()) {
    std::printf("no runs with a median latency to compare\n");
    return;
  }
  for (const auto& [key, machines] : groups) {
    double best = 0;
    for (const auto& [fp, row] : machines) {
      double m = row.run->metrics.at("latency_median_ms");
      if (best == 0 || m < best) best = m;
    }
    std::printf("%s\n", key.c_str());
    std::printf("  %-18s  %-40s  %10s  %8s  %6s  %s\n", "machine", "cpu", "median ms", "vs best",
                "run", "time (UTC)");
    for (const auto& [fp, row] : machines) {
      double m = row.run->metrics.at("latency_median_ms");
      std::string cpu = row.cpu.size() > 40 ? row.cpu.substr(0, 37) + "..." : row.cpu;
      std::printf("  %-18s  %-40s  %10.3f  %7.2fx  %6lld  %s\n", fp.substr(0, 18).c_str(),
                  cpu.empty() ? "-" : cpu.c_str(), m, best > 0 ? m / best : 1.0,
                  static_cast<long long>(row.run->id), row.run->timestamp.c_str());
    }
  }
}

}  // namespace

int cmd_runs(int argc, char** argv) {
  Args args("runs", "[options]\n\nLists recorded bench and profile runs, newest first.");
  args.flag("model", "only runs whose model path contains M, or whose model SHA-256 starts with M");
  args.flag("limit", "show at most N runs (default 20; 0 for all)");
  args.flag("db", "experiment store (default ~/.peregrine/runs.db)");
  args.toggle("json", "print the runs as a JSON array");
  args.flag("group-by",
            "machine: the newest run of each model and configuration on each machine, "
            "side by side");
  args.flag("export",
            "FILE: write the selected runs, complete (latencies, nodes, machine), to a "
            "new JSON file");
  args.flag("import", "FILE: record the runs of a file --export wrote ('-': standard input)");
  Status parsed = args.parse(argc, argv);
  if (!parsed.is_ok()) return print_error(parsed);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (!args.positional().empty())
    return print_error(invalid_input("peregrine runs takes no positional arguments (see --help)"));
  int64_t limit = 20;
  if (args.has("limit")) {
    auto n = parse_int(args.get("limit"), "limit");
    if (!n.is_ok()) return print_error(n.status());
    limit = *n;
  }
  if (args.has("group-by") && args.get("group-by") != "machine")
    return print_error(
        invalid_input("--group-by takes 'machine', not '" + args.get("group-by") + "'"));
  auto path = store_path_from(args);
  if (!path.is_ok()) return print_error(path.status());
  if (args.has("import")) {
    auto store = ExperimentStore::open(*path);
    if (!store.is_ok()) return print_error(store.status());
    return import_runs(*store, args.get("import"));
  }
  // Listing never creates a store.
  if (!std::filesystem::exists(*path)) {
    if (args.is_set("json")) {
      std::fputs("[]\n", stdout);
    } else {
      std::printf("no runs recorded yet (%s does not exist)\n", path->c_str());
    }
    return 0;
  }
  auto store = ExperimentStore::open(*path);
  if (!store.is_ok()) return print_error(store.status());
  // Comparing machines looks at every run unless a limit is given.
  if (args.has("group-by") && !args.has("limit")) limit = 0;
  auto runs = store->list(args.get("model"), limit);
  if (!runs.is_ok()) return print_error(runs.status());
  if (args.has("export")) return export_runs(*store, *runs, args.get("export"));
  if (args.has("group-by")) {
    print_by_machine(*runs);
    return 0;
  }

  if (args.is_set("json")) {
    std::fputs(run_records_to_json(*runs, RunRecordDetail::kSummary).c_str(), stdout);
    return 0;
  }
  if (runs->empty()) {
    std::printf("no runs%s in %s\n", args.has("model") ? " match" : " recorded yet", path->c_str());
    return 0;
  }
  std::printf("%6s  %-20s  %-7s  %-28s  %10s  %10s  %-10s  %s\n", "id", "time (UTC)", "kind",
              "model", "median ms", "p90 ms", "commit", "inputs");
  for (const RunRecord& r : *runs) {
    std::string model = std::filesystem::path(r.model_path).filename().string();
    if (model.size() > 28) model = model.substr(0, 25) + "...";
    std::printf("%6lld  %-20s  %-7s  %-28s  %10s  %10s  %-10s  %s\n", static_cast<long long>(r.id),
                r.timestamp.c_str(), r.kind.c_str(), model.c_str(),
                metric_text(r, "latency_median_ms").c_str(),
                metric_text(r, "latency_p90_ms").c_str(), r.engine_commit.c_str(),
                r.input_shapes.empty() ? "-" : r.input_shapes.c_str());
  }
  std::printf("%zu run%s from %s ('peregrine compare A B' compares two)\n", runs->size(),
              runs->size() == 1 ? "" : "s", path->c_str());
  return 0;
}

}  // namespace peregrine::cli
