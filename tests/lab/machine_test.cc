#include "profiler/machine.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace peregrine {
namespace {

MachineCeilings sample_ceilings() {
  MachineCeilings c;
  c.cpu_model = "Test \"CPU\" \\ 9000\t\xc3\xa9";  // escapes and UTF-8 survive
  c.fingerprint = machine_fingerprint(c.cpu_model, {"avx2", "fma", "sse2"}, 4);
  c.logical_cores = 4;
  c.measured_at = "2025-01-02T03:04:05Z";
  c.isa_levels = {"scalar", "avx2"};
  c.peak_gflops["scalar"] = {10.5, 21.0, 31.25, 41.0};
  c.peak_gflops["avx2"] = {100.125, 199.9, 0.1 + 0.2, 1e-300};
  c.bandwidth_gbps["read"] = {12, 20, 25, 26};
  c.bandwidth_gbps["copy"] = {10, 18, 22, 23};
  c.bandwidth_gbps["triad"] = {11, 19, 24, 25.5};
  c.cache_read_gbps = {{"L1", 300}, {"L2", 150}, {"L3", 60}};
  c.cache_bytes = {{"L1", 32768}, {"L2", 1 << 20}, {"L3", 32 << 20}};
  c.dram_buffer_bytes = 268431360;
  return c;
}

void expect_same(const MachineCeilings& a, const MachineCeilings& b) {
  EXPECT_EQ(a.cpu_model, b.cpu_model);
  EXPECT_EQ(a.fingerprint, b.fingerprint);
  EXPECT_EQ(a.logical_cores, b.logical_cores);
  EXPECT_EQ(a.measured_at, b.measured_at);
  EXPECT_EQ(a.isa_levels, b.isa_levels);
  EXPECT_EQ(a.peak_gflops, b.peak_gflops);  // exact: doubles are written round-trippably
  EXPECT_EQ(a.bandwidth_gbps, b.bandwidth_gbps);
  EXPECT_EQ(a.cache_read_gbps, b.cache_read_gbps);
  EXPECT_EQ(a.cache_bytes, b.cache_bytes);
  EXPECT_EQ(a.dram_buffer_bytes, b.dram_buffer_bytes);
}

TEST(MachineTest, JsonRoundTrip) {
  MachineCeilings c = sample_ceilings();
  std::string json = ceilings_to_json(c);
  auto back = ceilings_from_json(json);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  expect_same(c, *back);
  EXPECT_EQ(ceilings_to_json(*back), json);
}

TEST(MachineTest, MalformedJsonIsAnError) {
  std::string good = ceilings_to_json(sample_ceilings());
  EXPECT_FALSE(ceilings_from_json("").is_ok());
  EXPECT_FALSE(ceilings_from_json("[]").is_ok());
  EXPECT_FALSE(ceilings_from_json(good.substr(0, good.size() / 2)).is_ok());
  EXPECT_FALSE(ceilings_from_json(good + "x").is_ok());
  std::string other_version = good;
  other_version.replace(other_version.find("\"schema_version\": 1"), 19, "\"schema_version\": 99");
  EXPECT_FALSE(ceilings_from_json(other_version).is_ok());
  std::string bad_value = good;
  bad_value.replace(bad_value.find("[10.5"), 5, "[\"x\"");
  EXPECT_FALSE(ceilings_from_json(bad_value).is_ok());
}

TEST(MachineTest, FingerprintIsStableAndSensitive) {
  std::string a = machine_fingerprint("CPU X", {"avx2", "fma", "sse2"}, 8);
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a, machine_fingerprint("CPU X", {"avx2", "fma", "sse2"}, 8));
  EXPECT_EQ(a, machine_fingerprint("CPU X", {"sse2", "fma", "avx2"}, 8));  // flag order
  EXPECT_NE(a, machine_fingerprint("CPU Y", {"avx2", "fma", "sse2"}, 8));
  EXPECT_NE(a, machine_fingerprint("CPU X", {"avx2", "fma", "sse2", "avx512f"}, 8));
  EXPECT_NE(a, machine_fingerprint("CPU X", {"avx2", "fma", "sse2"}, 16));
  // Pinned (computed independently in Python): a change of the hash orphans every cache.
  EXPECT_EQ(a, "08df4d44ecf824a2");
  CpuInfo cpu = detect_cpu();
  EXPECT_EQ(
      machine_fingerprint(cpu.model, cpu.flags, cpu.logical_cores),
      machine_fingerprint(detect_cpu().model, detect_cpu().flags, detect_cpu().logical_cores));
  ASSERT_FALSE(cpu.isa_levels.empty());
  EXPECT_EQ(cpu.isa_levels.front(), "scalar");
  EXPECT_GE(cpu.logical_cores, 1);
}

TEST(MachineTest, AccessorsPickBestIsaAndClampThreads) {
  MachineCeilings c = sample_ceilings();
  EXPECT_EQ(c.best_isa(), "avx2");
  EXPECT_DOUBLE_EQ(c.peak_gflops_at(1), 100.125);
  EXPECT_DOUBLE_EQ(c.peak_gflops_at(2), 199.9);
  EXPECT_DOUBLE_EQ(c.peak_gflops_at(0), 100.125);  // clamped up to 1 thread
  EXPECT_DOUBLE_EQ(c.peak_gflops_at(64), 1e-300);  // clamped down to the last measured
  EXPECT_DOUBLE_EQ(c.bandwidth_gbps_at(1), 11);    // triad
  EXPECT_DOUBLE_EQ(c.bandwidth_gbps_at(4), 25.5);
  c.peak_gflops["avx512"] = {100.125, 1, 1, 1};  // tie at 1 thread: the wider level wins
  EXPECT_EQ(c.best_isa(), "avx512");
  c.peak_gflops["avx512"] = {50, 1, 1, 1};  // slower (e.g. down-clocked): not best
  EXPECT_EQ(c.best_isa(), "avx2");
  EXPECT_EQ(c.bf16_peak_gflops_at(1), 0);  // not measured
  c.peak_gflops[kBf16Level] = {400, 800};  // the bf16 dot product: never the fp32 roof
  EXPECT_EQ(c.best_isa(), "avx2");
  EXPECT_DOUBLE_EQ(c.peak_gflops_at(1), 100.125);
  EXPECT_DOUBLE_EQ(c.bf16_peak_gflops_at(2), 800);
  EXPECT_EQ(c.int8_peak_gflops_at(1), 0);   // not measured
  c.peak_gflops[kInt8Level] = {900, 1700};  // nor is the int8 one
  EXPECT_EQ(c.best_isa(), "avx2");
  EXPECT_DOUBLE_EQ(c.int8_peak_gflops_at(2), 1700);
  MachineCeilings empty;
  EXPECT_EQ(empty.best_isa(), "");
  EXPECT_EQ(empty.peak_gflops_at(1), 0);
  EXPECT_EQ(empty.bandwidth_gbps_at(1), 0);
}

// Runs every kernel this machine has, briefly: catches crashes and wrong plumbing, and
// asserts only that each number is positive (timings are noise on shared machines).
TEST(MachineTest, QuickMeasurementGivesPositiveNumbers) {
  MeasureOptions quick;
  quick.seconds_per_point = 0.001;
  quick.dram_bytes = 3 << 20;
  quick.max_threads = 2;
  auto c = measure_ceilings(quick);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  int threads = std::min(2, c->logical_cores);
  EXPECT_EQ(c->isa_levels, detect_cpu().isa_levels);
  for (const auto& isa : c->isa_levels) {
    ASSERT_EQ(c->peak_gflops[isa].size(), static_cast<size_t>(threads)) << isa;
    for (double v : c->peak_gflops[isa]) EXPECT_GT(v, 0) << isa;
  }
  for (const char* kind : {"read", "copy", "triad"}) {
    ASSERT_EQ(c->bandwidth_gbps[kind].size(), static_cast<size_t>(threads)) << kind;
    for (double v : c->bandwidth_gbps[kind]) EXPECT_GT(v, 0) << kind;
  }
  for (const auto& [level, v] : c->cache_read_gbps) EXPECT_GT(v, 0) << level;
  EXPECT_GT(c->peak_gflops_at(1), 0);
  EXPECT_FALSE(c->fingerprint.empty());
}

TEST(MachineTest, CachePathAndCachedLookup) {
  namespace fs = std::filesystem;
  fs::path dir =
      fs::temp_directory_path() / ("peregrine_machine_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  EXPECT_EQ(ceilings_cache_path(dir.string(), "abc"), (dir / "machine-abc.json").string());
  EXPECT_FALSE(load_cached_ceilings(dir.string()).is_ok());  // nothing cached yet
  CpuInfo cpu = detect_cpu();
  MachineCeilings c = sample_ceilings();
  c.fingerprint = machine_fingerprint(cpu.model, cpu.flags, cpu.logical_cores);
  c.isa_levels = cpu.isa_levels;  // a cache with other levels is measured again
  fs::create_directories(dir);
  std::string path = ceilings_cache_path(dir.string(), c.fingerprint);
  std::ofstream(path) << ceilings_to_json(c);
  auto cached = load_cached_ceilings(dir.string());
  ASSERT_TRUE(cached.is_ok()) << cached.status().message();
  expect_same(c, *cached);
  // load_or_measure returns the cache without measuring (the sample's numbers prove it).
  auto loaded = load_or_measure_ceilings(false, dir.string());
  ASSERT_TRUE(loaded.is_ok());
  EXPECT_DOUBLE_EQ(loaded->peak_gflops["scalar"][0], 10.5);
  std::ofstream(path) << "{ corrupt";
  EXPECT_FALSE(load_cached_ceilings(dir.string()).is_ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace peregrine
