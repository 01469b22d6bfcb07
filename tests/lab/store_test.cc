// The experiment store: round trip, concurrent writers, refusing databases it
// must not touch, and the rule that tells a regression from noise.
#include "lab/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "lab/compare_runs.h"

namespace peregrine {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards (tests may run side by side).
class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "peregrine_store_test_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  std::string dir_;
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// Runs SQL through the raw C API, as another program would.
void raw_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << message;
}

RunRecord sample_record(const std::string& model = "/models/resnet50.onnx") {
  RunRecord r;
  r.kind = "profile";
  r.timestamp = "2025-01-31T12:00:00Z";
  r.model_path = model;
  r.model_sha256 = "ab12cd34" + std::string(56, '0');
  r.input_shapes = "data=1x3x224x224";
  // Quotes and SQL in user data must come back verbatim (bound, never spliced).
  r.options_json = "{\"threads\": 2, \"note\": \"it's'; DROP TABLE runs; --\"}";
  r.engine_commit = "abc1234";
  r.build_flags = "Release, GNU 12.2.0, -O3 -DNDEBUG";
  r.machine_fingerprint = "0123456789abcdef";
  r.machine_json = "{\"cpu_model\": \"Test CPU\"}";
  r.metrics = {{"latency_median_ms", 10.5},
               {"latency_p90_ms", 11.25},
               {"throughput_per_s", 95.2},
               {"not_measured", std::nan("")}};
  r.latencies_ms = {10.0, 10.5, 11.25, 9.75, 10.5};
  r.nodes = {{"conv_1", "Conv", 4.5, 1.2e9, 3.0e6, 0.1}, {"relu_1", "Relu", 0.25, 8e5, 6.4e6, 0}};
  return r;
}

TEST_F(StoreTest, RoundTripsARunWithNodesAndLatencies) {
  std::string db = path("sub/dir/runs.db");  // parent directories are created
  auto store = ExperimentStore::open(db);
  ASSERT_TRUE(store.is_ok()) << store.status().message();
  RunRecord written = sample_record();
  auto id = store->record(written);
  ASSERT_TRUE(id.is_ok()) << id.status().message();
  EXPECT_EQ(written.id, *id);

  auto read = store->get(*id);
  ASSERT_TRUE(read.is_ok()) << read.status().message();
  const RunRecord& r = *read;
  EXPECT_EQ(r.id, *id);
  EXPECT_EQ(r.kind, written.kind);
  EXPECT_EQ(r.timestamp, written.timestamp);
  EXPECT_EQ(r.model_path, written.model_path);
  EXPECT_EQ(r.model_sha256, written.model_sha256);
  EXPECT_EQ(r.input_shapes, written.input_shapes);
  EXPECT_EQ(r.options_json, written.options_json);
  EXPECT_EQ(r.engine_commit, written.engine_commit);
  EXPECT_EQ(r.build_flags, written.build_flags);
  EXPECT_EQ(r.machine_fingerprint, written.machine_fingerprint);
  EXPECT_EQ(r.machine_json, written.machine_json);
  ASSERT_EQ(r.metrics.size(), 4u);
  EXPECT_EQ(r.metrics.at("latency_median_ms"), 10.5);
  EXPECT_EQ(r.metrics.at("throughput_per_s"), 95.2);
  EXPECT_TRUE(std::isnan(r.metrics.at("not_measured")));
  EXPECT_EQ(r.latencies_ms, written.latencies_ms);
  ASSERT_EQ(r.nodes.size(), 2u);
  EXPECT_EQ(r.nodes[0].node, "conv_1");
  EXPECT_EQ(r.nodes[0].op_type, "Conv");
  EXPECT_EQ(r.nodes[0].time_ms, 4.5);
  EXPECT_EQ(r.nodes[0].flops, 1.2e9);
  EXPECT_EQ(r.nodes[0].bytes, 3.0e6);
  EXPECT_EQ(r.nodes[0].time_iqr_ms, 0.1);
  EXPECT_EQ(r.nodes[1].node, "relu_1");

  EXPECT_FALSE(store->get(*id + 100).is_ok());
}

TEST_F(StoreTest, ListsNewestFirstWithFilterAndLimit) {
  auto store = ExperimentStore::open(path("runs.db"));
  ASSERT_TRUE(store.is_ok()) << store.status().message();
  for (const char* model : {"/m/resnet50.onnx", "/m/bert.onnx", "/m/resnet50.onnx"}) {
    RunRecord r = sample_record(model);
    if (std::string(model).find("bert") != std::string::npos)
      r.model_sha256 = "ffee" + std::string(60, '1');
    ASSERT_TRUE(store->record(r).is_ok());
  }
  auto all = store->list("", 0);
  ASSERT_TRUE(all.is_ok()) << all.status().message();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_GT((*all)[0].id, (*all)[1].id);
  EXPECT_EQ((*all)[0].metrics.at("latency_median_ms"), 10.5);  // summary metrics come along
  EXPECT_TRUE((*all)[0].latencies_ms.empty());                 // details only through get()

  auto resnet = store->list("resnet", 0);
  ASSERT_TRUE(resnet.is_ok());
  EXPECT_EQ(resnet->size(), 2u);
  auto by_sha = store->list("ffee", 0);
  ASSERT_TRUE(by_sha.is_ok());
  ASSERT_EQ(by_sha->size(), 1u);
  EXPECT_EQ((*by_sha)[0].model_path, "/m/bert.onnx");
  auto limited = store->list("", 1);
  ASSERT_TRUE(limited.is_ok());
  EXPECT_EQ(limited->size(), 1u);
  auto none = store->list("%", 0);  // LIKE wildcards are plain text here
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->empty());
}

TEST_F(StoreTest, TwoProcessesWritingAtOnceLoseNothing) {
  // Both processes also race to create the store.
  std::string db = path("shared.db");
  constexpr int kRunsPerWriter = 50;
  pid_t children[2];
  for (int writer = 0; writer < 2; ++writer) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto store = ExperimentStore::open(db);
      if (!store.is_ok()) {
        std::fprintf(stderr, "writer %d: %s\n", writer, store.status().message().c_str());
        _exit(1);
      }
      for (int i = 0; i < kRunsPerWriter; ++i) {
        RunRecord r = sample_record("/writer" + std::to_string(writer) + "/model.onnx");
        r.metrics["iteration"] = i;
        auto id = store->record(r);
        if (!id.is_ok()) {
          std::fprintf(stderr, "writer %d run %d: %s\n", writer, i, id.status().message().c_str());
          _exit(1);
        }
      }
      _exit(0);
    }
    children[writer] = pid;
  }
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  auto store = ExperimentStore::open(db);
  ASSERT_TRUE(store.is_ok()) << store.status().message();
  auto all = store->list("", 0);
  ASSERT_TRUE(all.is_ok()) << all.status().message();
  ASSERT_EQ(all->size(), size_t(2 * kRunsPerWriter));
  for (int writer = 0; writer < 2; ++writer) {
    auto mine = store->list("/writer" + std::to_string(writer) + "/", 0);
    ASSERT_TRUE(mine.is_ok());
    EXPECT_EQ(mine->size(), size_t(kRunsPerWriter));
    std::vector<bool> seen(kRunsPerWriter, false);
    for (const RunRecord& r : *mine) seen[size_t(r.metrics.at("iteration"))] = true;
    EXPECT_EQ(std::count(seen.begin(), seen.end(), true), kRunsPerWriter);
  }
  // Every run is whole: its latencies and nodes arrived with it.
  for (const RunRecord& listed : *all) {
    auto full = store->get(listed.id);
    ASSERT_TRUE(full.is_ok());
    EXPECT_EQ(full->latencies_ms.size(), 5u);
    EXPECT_EQ(full->nodes.size(), 2u);
  }
}

TEST_F(StoreTest, RefusesANewerSchemaAndLeavesItUnchanged) {
  std::string db = path("newer.db");
  {
    auto store = ExperimentStore::open(db);
    ASSERT_TRUE(store.is_ok()) << store.status().message();
    RunRecord r = sample_record();
    ASSERT_TRUE(store->record(r).is_ok());
  }
  raw_sql(db, "UPDATE meta SET value = '" + std::to_string(ExperimentStore::kSchemaVersion + 1) +
                  "' WHERE key = 'schema_version'");
  std::string before = read_bytes(db);
  ASSERT_FALSE(before.empty());
  auto store = ExperimentStore::open(db);
  ASSERT_FALSE(store.is_ok());
  EXPECT_NE(store.status().message().find("newer"), std::string::npos) << store.status().message();
  EXPECT_EQ(store.status().exit_code(), 2);
  EXPECT_EQ(read_bytes(db), before);
}

TEST_F(StoreTest, RefusesACorruptFileAndLeavesItUnchanged) {
  std::mt19937 rng(1234);
  std::string noise(8192, '\0');
  for (char& c : noise) c = char(rng());
  // Plain random bytes, and random bytes behind a valid SQLite header magic.
  std::string with_magic = std::string("SQLite format 3", 16) + noise;
  for (const std::string& bytes : {noise, with_magic}) {
    std::string db = path("corrupt.db");
    write_bytes(db, bytes);
    auto store = ExperimentStore::open(db);
    ASSERT_FALSE(store.is_ok());
    EXPECT_NE(store.status().message().find("not a Peregrine run store"), std::string::npos)
        << store.status().message();
    EXPECT_NE(store.status().message().find("unchanged"), std::string::npos);
    EXPECT_EQ(read_bytes(db), bytes);
  }
}

TEST_F(StoreTest, RefusesAForeignSqliteDatabaseAndLeavesItUnchanged) {
  std::string db = path("customers.db");
  raw_sql(db, "CREATE TABLE customers (name TEXT); INSERT INTO customers VALUES ('Ada')");
  std::string before = read_bytes(db);
  auto store = ExperimentStore::open(db);
  ASSERT_FALSE(store.is_ok());
  EXPECT_NE(store.status().message().find("customers"), std::string::npos)
      << store.status().message();
  EXPECT_EQ(read_bytes(db), before);
}

TEST_F(StoreTest, AnEmptyFileBecomesAStoreAndReopens) {
  std::string db = path("empty.db");
  write_bytes(db, "");
  {
    auto store = ExperimentStore::open(db);
    ASSERT_TRUE(store.is_ok()) << store.status().message();
    RunRecord r = sample_record();
    ASSERT_TRUE(store->record(r).is_ok());
  }
  auto reopened = ExperimentStore::open(db);
  ASSERT_TRUE(reopened.is_ok()) << reopened.status().message();
  auto runs = reopened->list("", 0);
  ASSERT_TRUE(runs.is_ok());
  EXPECT_EQ(runs->size(), 1u);
}

// ---- The comparison rule -------------------------------------------------

TEST(CompareRule, QuartilesByLinearInterpolation) {
  SpreadStats s = spread_of({5, 1, 4, 2, 3});
  EXPECT_EQ(s.samples, 5u);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.q1, 2);
  EXPECT_DOUBLE_EQ(s.q3, 4);
  SpreadStats even = spread_of({1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(even.median, 2.5);
  EXPECT_DOUBLE_EQ(even.q1, 1.75);
  EXPECT_DOUBLE_EQ(even.q3, 3.25);
}

TEST(CompareRule, JudgesAgainstTheNoise) {
  EXPECT_EQ(judge(10, 11, 0.5, true), Verdict::kRegression);
  EXPECT_EQ(judge(10, 9, 0.5, true), Verdict::kImprovement);
  EXPECT_EQ(judge(10, 10.4, 0.5, true), Verdict::kWithinNoise);
  EXPECT_EQ(judge(100, 90, 5, false), Verdict::kRegression);  // throughput fell
  EXPECT_EQ(judge(10, 20, -1, true), Verdict::kNoSpread);
}

RunRecord run_with_latencies(double center, double half_spread) {
  // IQR = half_spread exactly: quartiles of {c-h, c-h/2, c, c+h/2, c+h} are c -/+ h/2.
  RunRecord r;
  r.kind = "bench";
  r.model_sha256 = "same";
  r.latencies_ms = {center - half_spread, center - half_spread / 2, center,
                    center + half_spread / 2, center + half_spread};
  r.metrics["latency_median_ms"] = center;
  r.metrics["throughput_per_s"] = 1000.0 / center;
  r.metrics["peak_rss_mb"] = 100;
  return r;
}

TEST(CompareRule, CallsARegressionOnlyBeyondBothSpreads) {
  RunRecord a = run_with_latencies(10.0, 0.2);  // IQR 0.2
  // Threshold = IQR(A) + IQR(B) = 0.4.
  RunComparison slower = compare_runs(a, run_with_latencies(10.5, 0.2));
  EXPECT_NEAR(slower.median_latency.noise, 0.4, 1e-9);
  EXPECT_EQ(slower.median_latency.verdict, Verdict::kRegression);
  EXPECT_EQ(compare_runs(a, run_with_latencies(10.3, 0.2)).median_latency.verdict,
            Verdict::kWithinNoise);
  EXPECT_EQ(compare_runs(a, run_with_latencies(9.5, 0.2)).median_latency.verdict,
            Verdict::kImprovement);
  // The same shift is noise when the runs themselves are noisy.
  EXPECT_EQ(compare_runs(a, run_with_latencies(10.5, 1.0)).median_latency.verdict,
            Verdict::kWithinNoise);

  for (const MetricDelta& m : slower.metrics) {
    if (m.name == "latency_median_ms") EXPECT_EQ(m.verdict, Verdict::kRegression);
    // The IQR says nothing about the spread of a mean-based or one-shot metric.
    if (m.name == "throughput_per_s") EXPECT_EQ(m.verdict, Verdict::kNoSpread);
    if (m.name == "peak_rss_mb") EXPECT_EQ(m.verdict, Verdict::kNoSpread);
  }
  EXPECT_TRUE(slower.warnings.empty());
}

TEST(CompareRule, TooFewIterationsGiveNoVerdict) {
  RunRecord a = run_with_latencies(10.0, 0.2);
  RunRecord b = run_with_latencies(20.0, 0.2);
  b.latencies_ms.resize(kMinSamplesForSpread - 1);
  EXPECT_EQ(compare_runs(a, b).median_latency.verdict, Verdict::kNoSpread);
}

TEST(CompareRule, OpTypesSumTheirNodesAndUseTheRunSpread) {
  RunRecord a = run_with_latencies(10.0, 0.2),
            b = run_with_latencies(10.0, 0.2);  // 2% relative IQR
  a.nodes = {{"c1", "Conv", 3.0}, {"c2", "Conv", 3.0}, {"r1", "Relu", 1.0}, {"old", "Pad", 0.1}};
  b.nodes = {{"c1", "Conv", 4.0}, {"c2", "Conv", 3.0}, {"r1", "Relu", 1.01}, {"new", "Gelu", 0.1}};
  RunComparison c = compare_runs(a, b);
  ASSERT_EQ(c.op_types.size(), 4u);
  const OpTypeDelta& conv = c.op_types[0];  // largest first
  EXPECT_EQ(conv.op_type, "Conv");
  EXPECT_EQ(conv.nodes_a, 2);
  EXPECT_DOUBLE_EQ(conv.a_ms, 6.0);
  EXPECT_DOUBLE_EQ(conv.b_ms, 7.0);
  EXPECT_NEAR(conv.noise, 0.02 * 6.0 + 0.02 * 7.0, 1e-12);
  EXPECT_EQ(conv.verdict, Verdict::kRegression);
  for (const OpTypeDelta& d : c.op_types) {
    if (d.op_type == "Relu") EXPECT_EQ(d.verdict, Verdict::kWithinNoise);
    if (d.op_type == "Gelu") EXPECT_EQ(d.nodes_a, 0);
  }
  b.model_sha256 = "other";
  EXPECT_FALSE(compare_runs(a, b).warnings.empty());
}

}  // namespace
}  // namespace peregrine
