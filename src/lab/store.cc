#include "lab/store.h"

#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "core/utc_time.h"

namespace peregrine {
namespace {

// 'PRGR' in the SQLite header (offset 68): marks the file as a Peregrine store.
constexpr int32_t kApplicationId = 0x50524752;
constexpr int kBusyTimeoutMs = 15000;

// Version 1. Later versions add migrations from the previous one; never edit these.
constexpr const char* kSchemaV1[] = {
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE runs ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  kind TEXT NOT NULL,"
    "  timestamp TEXT NOT NULL,"
    "  model_path TEXT NOT NULL,"
    "  model_sha256 TEXT NOT NULL,"
    "  input_shapes TEXT NOT NULL,"
    "  options_json TEXT NOT NULL,"
    "  engine_commit TEXT NOT NULL,"
    "  build_flags TEXT NOT NULL,"
    "  machine_fingerprint TEXT NOT NULL,"
    "  machine_json TEXT NOT NULL)",
    "CREATE INDEX runs_by_model_sha256 ON runs (model_sha256)",
    // NULL value = NaN (SQLite stores NaN as NULL).
    "CREATE TABLE run_metrics ("
    "  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,"
    "  name TEXT NOT NULL,"
    "  value REAL,"
    "  PRIMARY KEY (run_id, name)) WITHOUT ROWID",
    "CREATE TABLE run_latencies ("
    "  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,"
    "  iteration INTEGER NOT NULL,"
    "  latency_ms REAL,"
    "  PRIMARY KEY (run_id, iteration)) WITHOUT ROWID",
    "CREATE TABLE run_nodes ("
    "  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,"
    "  position INTEGER NOT NULL,"
    "  node TEXT NOT NULL,"
    "  op_type TEXT NOT NULL,"
    "  time_ms REAL,"
    "  time_iqr_ms REAL,"
    "  flops REAL,"
    "  bytes REAL,"
    "  PRIMARY KEY (run_id, position)) WITHOUT ROWID",
};

Status sqlite_error(sqlite3* db, const std::string& path, const std::string& what) {
  return internal_error("run store '" + path + "': " + what + ": " +
                        (db ? sqlite3_errmsg(db) : "out of memory"));
}

// A prepared statement. Binding and reading go through here so no SQL text is
// ever assembled from data.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& path, const char* sql) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) {
      status_ = sqlite_error(db, path, std::string("preparing '") + sql + "'");
      stmt_ = nullptr;
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  const Status& status() const { return status_; }

  void bind(int index, const std::string& text) {
    if (stmt_) sqlite3_bind_text(stmt_, index, text.data(), int(text.size()), SQLITE_TRANSIENT);
  }
  void bind(int index, int64_t value) {
    if (stmt_) sqlite3_bind_int64(stmt_, index, value);
  }
  void bind(int index, double value) {
    if (!stmt_) return;
    if (std::isnan(value)) {
      sqlite3_bind_null(stmt_, index);
    } else {
      sqlite3_bind_double(stmt_, index, value);
    }
  }

  // True while rows come back; errors end the loop and land in status().
  bool next_row() {
    if (!stmt_ || !status_.is_ok()) return false;
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) status_ = sqlite_error(db_, path_, "query failed");
    return false;
  }
  // Runs a statement that returns no rows, then makes it ready to run again.
  Status execute() {
    if (!status_.is_ok()) return status_;
    int rc = sqlite3_step(stmt_);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) status_ = sqlite_error(db_, path_, "write failed");
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    return status_;
  }
  void reset() {
    if (!stmt_) return;
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  std::string text(int column) const {
    const unsigned char* p = sqlite3_column_text(stmt_, column);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           size_t(sqlite3_column_bytes(stmt_, column)))
             : std::string();
  }
  int64_t integer(int column) const { return sqlite3_column_int64(stmt_, column); }
  double real(int column) const {
    if (sqlite3_column_type(stmt_, column) == SQLITE_NULL)
      return std::numeric_limits<double>::quiet_NaN();
    return sqlite3_column_double(stmt_, column);
  }

 private:
  sqlite3* db_;
  std::string path_;
  sqlite3_stmt* stmt_ = nullptr;
  Status status_;
};

Status exec(sqlite3* db, const std::string& path, const char* sql) {
  Statement st(db, path, sql);
  PG_RETURN_IF_ERROR(st.status());
  return st.execute();
}

// What a database file holds, judged without writing to it.
struct Classification {
  enum Kind { kEmpty, kPeregrine, kForeign } kind = kEmpty;
  int64_t schema_version = 0;
  std::string reason;  // for kForeign
};

Expected<Classification> classify_in_transaction(sqlite3* db, const std::string& path) {
  // The first read is where SQLite notices a file that is not a database.
  Statement tables(db, path, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  if (!tables.status().is_ok()) {
    int code = sqlite3_errcode(db);
    if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT)
      return invalid_input("'" + path +
                           "' is not a Peregrine run store (not a valid SQLite database: " +
                           sqlite3_errmsg(db) + "); it was left unchanged");
    return tables.status();
  }
  std::vector<std::string> names;
  while (tables.next_row()) names.push_back(tables.text(0));
  PG_RETURN_IF_ERROR(tables.status());

  Statement app_id(db, path, "PRAGMA application_id");
  PG_RETURN_IF_ERROR(app_id.status());
  int64_t application_id = app_id.next_row() ? app_id.integer(0) : 0;
  PG_RETURN_IF_ERROR(app_id.status());

  Classification result;
  if (names.empty() && application_id == 0) return result;  // kEmpty
  result.kind = Classification::kForeign;
  if (application_id != kApplicationId) {
    std::string listed;
    for (size_t i = 0; i < names.size() && i < 5; ++i) listed += (i ? ", " : "") + names[i];
    result.reason = names.empty() ? "it is a SQLite database of another application"
                                  : "it is a SQLite database of something else (tables: " + listed +
                                        (names.size() > 5 ? ", ..." : "") + ")";
    return result;
  }
  bool has_meta = false;
  for (const auto& n : names) has_meta |= n == "meta";
  if (!has_meta) {
    result.reason = "it is marked as a Peregrine run store but has no 'meta' table";
    return result;
  }
  Statement version(db, path, "SELECT value FROM meta WHERE key = 'schema_version'");
  PG_RETURN_IF_ERROR(version.status());
  std::string text = version.next_row() ? version.text(0) : "";
  PG_RETURN_IF_ERROR(version.status());
  char* end = nullptr;
  long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || parsed < 1) {
    result.reason = "its schema_version '" + text + "' is not a positive integer";
    return result;
  }
  result.kind = Classification::kPeregrine;
  result.schema_version = parsed;
  return result;
}

// The tables and the application id read from one snapshot: read apart, a store another process
// creates in between looks marked but empty ("no 'meta' table"), or full but unmarked.
Expected<Classification> classify(sqlite3* db, const std::string& path) {
  if (!sqlite3_get_autocommit(db)) return classify_in_transaction(db, path);
  PG_RETURN_IF_ERROR(exec(db, path, "BEGIN"));
  auto result = classify_in_transaction(db, path);
  Status end = exec(db, path, result.is_ok() ? "COMMIT" : "ROLLBACK");
  if (result.is_ok() && !end.is_ok()) return end;
  return result;
}

Status refuse_unless_usable(const Classification& c, const std::string& path) {
  if (c.kind == Classification::kForeign)
    return invalid_input("'" + path + "' is not a Peregrine run store: " + c.reason +
                         "; it was left unchanged (pass another file with --db)");
  if (c.kind == Classification::kPeregrine && c.schema_version > ExperimentStore::kSchemaVersion)
    return invalid_input(
        "run store '" + path + "' has schema version " + std::to_string(c.schema_version) +
        ", newer than this Peregrine understands (" +
        std::to_string(ExperimentStore::kSchemaVersion) +
        "); it was left unchanged (upgrade Peregrine or pass another file with --db)");
  return Status::ok();
}

Expected<sqlite3*> open_connection(const std::string& path, int flags) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return invalid_input("cannot open run store '" + path + "': " + message);
  }
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  return db;
}

Status create_schema(sqlite3* db, const std::string& path) {
  for (const char* sql : kSchemaV1) PG_RETURN_IF_ERROR(exec(db, path, sql));
  Statement meta(db, path, "INSERT INTO meta (key, value) VALUES (?1, ?2)");
  PG_RETURN_IF_ERROR(meta.status());
  meta.bind(1, std::string("schema_version"));
  meta.bind(2, std::to_string(ExperimentStore::kSchemaVersion));
  PG_RETURN_IF_ERROR(meta.execute());
  meta.bind(1, std::string("created_at"));
  meta.bind(2, utc_now_iso8601());
  PG_RETURN_IF_ERROR(meta.execute());
  // PRAGMA takes no parameters; the value is our constant, not user data.
  return exec(db, path, ("PRAGMA application_id = " + std::to_string(kApplicationId)).c_str());
}

// Switching to WAL needs a moment with no other connection mid-transaction; SQLite
// then reports the old mode instead of waiting, so retry for the busy timeout.
Status enable_wal(sqlite3* db, const std::string& path) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  while (true) {
    Statement mode(db, path, "PRAGMA journal_mode = WAL");
    if (mode.status().is_ok() && mode.next_row() && mode.text(0) == "wal") return Status::ok();
    if (std::chrono::steady_clock::now() > deadline)
      return internal_error("run store '" + path + "': could not switch to WAL journal mode");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

void ExperimentStore::Closer::operator()(sqlite3* db) const { sqlite3_close(db); }

Expected<std::string> default_store_path() {
  const char* home = std::getenv("HOME");
  if (!home || !*home) return invalid_input("HOME is not set; pass the run store with --db PATH");
  return std::string(home) + "/.peregrine/runs.db";
}

Expected<ExperimentStore> ExperimentStore::open(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  bool existing = fs::exists(path, ec) && fs::file_size(path, ec) > 0 && !ec;
  if (fs::exists(path, ec) && fs::is_directory(path, ec))
    return invalid_input("run store '" + path + "' is a directory");

  if (existing) {
    // Before SQLite sees it: a file that does not start with the SQLite magic is
    // refused outright.
    char magic[16] = {};
    std::ifstream in(path, std::ios::binary);
    in.read(magic, sizeof(magic));
    if (!in || std::memcmp(magic, "SQLite format 3", 16) != 0)
      return invalid_input("'" + path +
                           "' is not a Peregrine run store (not a SQLite database); it was left "
                           "unchanged (pass another file with --db)");
    // Judge it through a connection that cannot write.
    PG_ASSIGN_OR_RETURN(sqlite3 * reader, open_connection(path, SQLITE_OPEN_READONLY));
    std::unique_ptr<sqlite3, Closer> guard(reader);
    PG_ASSIGN_OR_RETURN(Classification c, classify(reader, path));
    PG_RETURN_IF_ERROR(refuse_unless_usable(c, path));
  } else {
    fs::path parent = fs::path(path).parent_path();
    if (!parent.empty() && !fs::exists(parent, ec)) {
      fs::create_directories(parent, ec);
      if (ec)
        return invalid_input("cannot create directory '" + parent.string() + "': " + ec.message());
    }
  }

  PG_ASSIGN_OR_RETURN(sqlite3 * db,
                      open_connection(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
  ExperimentStore store(path, db);
  // Create the schema unless someone did (another process may be racing us);
  // the check repeats inside the write transaction.
  PG_ASSIGN_OR_RETURN(Classification c, classify(db, path));
  PG_RETURN_IF_ERROR(refuse_unless_usable(c, path));
  if (c.kind == Classification::kEmpty) {
    PG_RETURN_IF_ERROR(exec(db, path, "BEGIN IMMEDIATE"));
    auto inside = classify(db, path);
    Status st = inside.is_ok() ? refuse_unless_usable(*inside, path) : inside.status();
    if (st.is_ok() && inside->kind == Classification::kEmpty) st = create_schema(db, path);
    if (!st.is_ok()) {
      (void)exec(db, path, "ROLLBACK");
      return st;
    }
    PG_RETURN_IF_ERROR(exec(db, path, "COMMIT"));
  }
  // Schema version 1 is the first; migrations from older versions go here.
  PG_RETURN_IF_ERROR(enable_wal(db, path));
  PG_RETURN_IF_ERROR(exec(db, path, "PRAGMA synchronous = NORMAL"));
  PG_RETURN_IF_ERROR(exec(db, path, "PRAGMA foreign_keys = ON"));
  return store;
}

Expected<int64_t> ExperimentStore::record(RunRecord& record) {
  sqlite3* db = db_.get();
  if (record.timestamp.empty()) record.timestamp = utc_now_iso8601();
  PG_RETURN_IF_ERROR(exec(db, path_, "BEGIN IMMEDIATE"));
  auto write = [&]() -> Expected<int64_t> {
    Statement run(db, path_,
                  "INSERT INTO runs (kind, timestamp, model_path, model_sha256, input_shapes, "
                  "options_json, engine_commit, build_flags, machine_fingerprint, machine_json) "
                  "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    PG_RETURN_IF_ERROR(run.status());
    run.bind(1, record.kind);
    run.bind(2, record.timestamp);
    run.bind(3, record.model_path);
    run.bind(4, record.model_sha256);
    run.bind(5, record.input_shapes);
    run.bind(6, record.options_json);
    run.bind(7, record.engine_commit);
    run.bind(8, record.build_flags);
    run.bind(9, record.machine_fingerprint);
    run.bind(10, record.machine_json);
    PG_RETURN_IF_ERROR(run.execute());
    int64_t id = sqlite3_last_insert_rowid(db);

    Statement metric(db, path_,
                     "INSERT INTO run_metrics (run_id, name, value) VALUES (?1, ?2, ?3)");
    PG_RETURN_IF_ERROR(metric.status());
    for (const auto& [name, value] : record.metrics) {
      metric.bind(1, id);
      metric.bind(2, name);
      metric.bind(3, value);
      PG_RETURN_IF_ERROR(metric.execute());
    }
    Statement latency(
        db, path_, "INSERT INTO run_latencies (run_id, iteration, latency_ms) VALUES (?1, ?2, ?3)");
    PG_RETURN_IF_ERROR(latency.status());
    for (size_t i = 0; i < record.latencies_ms.size(); ++i) {
      latency.bind(1, id);
      latency.bind(2, int64_t(i));
      latency.bind(3, record.latencies_ms[i]);
      PG_RETURN_IF_ERROR(latency.execute());
    }
    Statement node(
        db, path_,
        "INSERT INTO run_nodes (run_id, position, node, op_type, time_ms, time_iqr_ms, flops, "
        "bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    PG_RETURN_IF_ERROR(node.status());
    for (size_t i = 0; i < record.nodes.size(); ++i) {
      const NodeMetrics& n = record.nodes[i];
      node.bind(1, id);
      node.bind(2, int64_t(i));
      node.bind(3, n.node);
      node.bind(4, n.op_type);
      node.bind(5, n.time_ms);
      node.bind(6, n.time_iqr_ms);
      node.bind(7, n.flops);
      node.bind(8, n.bytes);
      PG_RETURN_IF_ERROR(node.execute());
    }
    return id;
  };
  Expected<int64_t> id = write();
  if (!id.is_ok()) {
    (void)exec(db, path_, "ROLLBACK");
    return id.status();
  }
  Status committed = exec(db, path_, "COMMIT");
  if (!committed.is_ok()) {
    (void)exec(db, path_, "ROLLBACK");
    return committed;
  }
  record.id = *id;
  return id;
}

namespace {

constexpr const char* kRunColumns =
    "SELECT id, kind, timestamp, model_path, model_sha256, input_shapes, options_json, "
    "engine_commit, "
    "build_flags, machine_fingerprint, machine_json FROM runs ";

RunRecord read_run_row(const Statement& st) {
  RunRecord r;
  r.id = st.integer(0);
  r.kind = st.text(1);
  r.timestamp = st.text(2);
  r.model_path = st.text(3);
  r.model_sha256 = st.text(4);
  r.input_shapes = st.text(5);
  r.options_json = st.text(6);
  r.engine_commit = st.text(7);
  r.build_flags = st.text(8);
  r.machine_fingerprint = st.text(9);
  r.machine_json = st.text(10);
  return r;
}

}  // namespace

Status ExperimentStore::load_metrics(RunRecord& record) {
  Statement st(db_.get(), path_, "SELECT name, value FROM run_metrics WHERE run_id = ?1");
  PG_RETURN_IF_ERROR(st.status());
  st.bind(1, record.id);
  while (st.next_row()) record.metrics[st.text(0)] = st.real(1);
  return st.status();
}

Expected<std::vector<RunRecord>> ExperimentStore::list(const std::string& model_filter,
                                                       int64_t limit) {
  // A read transaction gives one consistent snapshot while other processes write.
  PG_RETURN_IF_ERROR(exec(db_.get(), path_, "BEGIN"));
  auto read = [&]() -> Expected<std::vector<RunRecord>> {
    Statement st(
        db_.get(), path_,
        (std::string(kRunColumns) +
         "WHERE ?1 = '' OR instr(model_path, ?1) > 0 OR substr(model_sha256, 1, length(?1)) = ?1 "
         "ORDER BY id DESC LIMIT ?2")
            .c_str());
    PG_RETURN_IF_ERROR(st.status());
    st.bind(1, model_filter);
    st.bind(2, limit > 0 ? limit : int64_t(-1));
    std::vector<RunRecord> runs;
    while (st.next_row()) runs.push_back(read_run_row(st));
    PG_RETURN_IF_ERROR(st.status());
    for (RunRecord& r : runs) PG_RETURN_IF_ERROR(load_metrics(r));
    return runs;
  };
  auto runs = read();
  (void)exec(db_.get(), path_, runs.is_ok() ? "COMMIT" : "ROLLBACK");
  return runs;
}

Expected<RunRecord> ExperimentStore::get(int64_t id) {
  PG_RETURN_IF_ERROR(exec(db_.get(), path_, "BEGIN"));
  auto read = [&]() -> Expected<RunRecord> {
    Statement st(db_.get(), path_, (std::string(kRunColumns) + "WHERE id = ?1").c_str());
    PG_RETURN_IF_ERROR(st.status());
    st.bind(1, id);
    if (!st.next_row()) {
      PG_RETURN_IF_ERROR(st.status());
      return invalid_input("no run " + std::to_string(id) + " in '" + path_ +
                           "' (see 'peregrine runs')");
    }
    RunRecord r = read_run_row(st);
    PG_RETURN_IF_ERROR(load_metrics(r));
    Statement lat(db_.get(), path_,
                  "SELECT latency_ms FROM run_latencies WHERE run_id = ?1 ORDER BY iteration");
    PG_RETURN_IF_ERROR(lat.status());
    lat.bind(1, id);
    while (lat.next_row()) r.latencies_ms.push_back(lat.real(0));
    PG_RETURN_IF_ERROR(lat.status());
    Statement nodes(db_.get(), path_,
                    "SELECT node, op_type, time_ms, time_iqr_ms, flops, bytes FROM run_nodes "
                    "WHERE run_id = ?1 ORDER BY position");
    PG_RETURN_IF_ERROR(nodes.status());
    nodes.bind(1, id);
    while (nodes.next_row()) {
      NodeMetrics n;
      n.node = nodes.text(0);
      n.op_type = nodes.text(1);
      n.time_ms = nodes.real(2);
      n.time_iqr_ms = nodes.real(3);
      n.flops = nodes.real(4);
      n.bytes = nodes.real(5);
      r.nodes.push_back(std::move(n));
    }
    PG_RETURN_IF_ERROR(nodes.status());
    return r;
  };
  auto run = read();
  (void)exec(db_.get(), path_, run.is_ok() ? "COMMIT" : "ROLLBACK");
  return run;
}

}  // namespace peregrine
