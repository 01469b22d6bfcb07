#include "record_run.h"

#include <cstdio>
#include <filesystem>

#include "core/utc_time.h"
#include "lab/build_info.h"
#include "lab/sha256.h"
#include "lab/store.h"
#include "profiler/machine.h"

namespace peregrine::cli {

void add_record_flags(Args& args) {
  args.flag("db", "experiment store to record the run in (default ~/.peregrine/runs.db)");
  args.toggle("no-record", "do not record this run in the experiment store");
}

Expected<std::string> store_path_from(const Args& args) {
  if (args.has("db")) {
    std::string path = args.get("db");
    if (path.empty()) return invalid_input("--db needs a file path");
    return path;
  }
  return default_store_path();
}

int record_run(const Args& args, RunRecord& record) {
  if (args.is_set("no-record")) return 0;
  auto path = store_path_from(args);
  if (!path.is_ok()) return print_error(path.status());

  if (record.timestamp.empty()) record.timestamp = utc_now_iso8601();
  if (record.engine_commit.empty()) record.engine_commit = engine_commit();
  if (record.build_flags.empty()) record.build_flags = engine_build_flags();
  if (!record.model_path.empty()) {
    std::error_code ec;
    auto absolute = std::filesystem::absolute(record.model_path, ec);
    if (!ec) record.model_path = absolute.lexically_normal().string();
    if (record.model_sha256.empty()) {
      auto sha = sha256_file(record.model_path);
      if (!sha.is_ok()) return print_error(sha.status().with_context("recording the run"));
      record.model_sha256 = *sha;
    }
  }

  // The ceilings only when this machine was measured before: recording never measures.
  if (record.machine_json.empty()) {
    if (auto ceilings = load_cached_ceilings(); ceilings.is_ok()) {
      record.machine_json = ceilings_to_json(*ceilings);
      if (record.machine_fingerprint.empty()) record.machine_fingerprint = ceilings->fingerprint;
    }
  }
  if (record.machine_fingerprint.empty()) {
    CpuInfo cpu = detect_cpu();
    record.machine_fingerprint = machine_fingerprint(cpu.model, cpu.flags, cpu.logical_cores);
  }

  auto store = ExperimentStore::open(*path);
  if (!store.is_ok()) return print_error(store.status());
  auto id = store->record(record);
  if (!id.is_ok()) return print_error(id.status());
  std::fprintf(stderr, "recorded run %lld in %s\n", static_cast<long long>(*id), path->c_str());
  return 0;
}

}  // namespace peregrine::cli
