// peregrine runs: lists the bench and profile runs in the experiment store.
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "cli_common.h"
#include "core/json_text.h"
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

// JSON text stored by the measuring command is embedded as is; anything else is quoted.
std::string embedded_json(const std::string& text) {
  if (text.empty()) return "null";
  if (text.front() == '{' || text.front() == '[') return text;
  return json_string(text);
}

std::string runs_to_json(const std::vector<RunRecord>& runs) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunRecord& r = runs[i];
    o << (i ? ",\n " : "\n ") << "{\"id\": " << r.id << ", \"kind\": " << json_string(r.kind)
      << ", \"timestamp\": " << json_string(r.timestamp)
      << ", \"model_path\": " << json_string(r.model_path)
      << ", \"model_sha256\": " << json_string(r.model_sha256)
      << ", \"input_shapes\": " << json_string(r.input_shapes)
      << ", \"options\": " << embedded_json(r.options_json)
      << ", \"engine_commit\": " << json_string(r.engine_commit)
      << ", \"build_flags\": " << json_string(r.build_flags)
      << ", \"machine_fingerprint\": " << json_string(r.machine_fingerprint) << ", \"metrics\": {";
    bool first = true;
    for (const auto& [name, value] : r.metrics) {
      o << (first ? "" : ", ") << json_string(name) << ": " << json_number(value);
      first = false;
    }
    o << "}}";
  }
  o << (runs.empty() ? "]\n" : "\n]\n");
  return o.str();
}

}  // namespace

int cmd_runs(int argc, char** argv) {
  Args args("runs", "[options]\n\nLists recorded bench and profile runs, newest first.");
  args.flag("model", "only runs whose model path contains M, or whose model SHA-256 starts with M");
  args.flag("limit", "show at most N runs (default 20; 0 for all)");
  args.flag("db", "experiment store (default ~/.peregrine/runs.db)");
  args.toggle("json", "print the runs as a JSON array");
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
  auto path = store_path_from(args);
  if (!path.is_ok()) return print_error(path.status());
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
  auto runs = store->list(args.get("model"), limit);
  if (!runs.is_ok()) return print_error(runs.status());

  if (args.is_set("json")) {
    std::fputs(runs_to_json(*runs).c_str(), stdout);
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
