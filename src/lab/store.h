// The experiment store: every bench and profile run, recorded in one SQLite file
// (default ~/.peregrine/runs.db) so later runs can be listed and compared.
//
// Guarantees:
//  - The schema is versioned (table `meta`, key `schema_version`, and the SQLite
//    header's application_id). A database from a newer Peregrine, a SQLite file
//    that belongs to something else, or a file that is not SQLite at all is
//    refused with an error and never written to: it is inspected through a
//    read-only connection before any writable one is opened.
//  - Several processes may record at once: WAL journal, a busy timeout, and one
//    IMMEDIATE transaction per run, so every run is stored whole or not at all.
//  - User data reaches SQL only through bound parameters of prepared statements.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lab/run_record.h"
#include "peregrine/status.h"

struct sqlite3;

namespace peregrine {

class ExperimentStore {
 public:
  static constexpr int kSchemaVersion = 1;

  // Opens `path`, creating it (and its directory) when missing or empty.
  static Expected<ExperimentStore> open(const std::string& path);

  // Stores the run in one transaction and sets record.id. An empty timestamp is
  // filled with the current UTC time.
  Expected<int64_t> record(RunRecord& record);

  // Newest first. `model_filter` (empty: all) matches a substring of the model
  // path or a prefix of its SHA-256. `limit` <= 0 means no limit. The listed
  // records carry their summary metrics but not their latencies or nodes.
  Expected<std::vector<RunRecord>> list(const std::string& model_filter, int64_t limit);

  // The complete run, latencies and nodes included.
  Expected<RunRecord> get(int64_t id);

  const std::string& path() const { return path_; }

 private:
  struct Closer {
    void operator()(sqlite3* db) const;
  };
  ExperimentStore(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  Status load_metrics(RunRecord& record);

  std::string path_;
  std::unique_ptr<sqlite3, Closer> db_;
};

// ~/.peregrine/runs.db, or an error when HOME is not set.
Expected<std::string> default_store_path();

}  // namespace peregrine
