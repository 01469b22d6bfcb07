// This machine's ceilings: peak FP32 FLOP/s per ISA level and thread count, and
// memory bandwidth. Measured once, cached per CPU model and flags, and used as
// the roofs of every roofline.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "peregrine/status.h"

namespace peregrine {

// The peak_gflops keys of the bf16 and int8 dot products (not ISA levels of float32 kernels).
inline constexpr const char* kBf16Level = "avx512_bf16";
inline constexpr const char* kInt8Level = "avx512_vnni";

struct MachineCeilings {
  std::string cpu_model;    // from /proc/cpuinfo
  std::string fingerprint;  // hash of cpu model + ISA flags + logical cores: the cache key
  int logical_cores = 1;
  std::vector<std::string> isa_levels;  // measured levels, e.g. {"scalar", "avx2", "avx512"}
  // isa -> GFLOP/s at 1..N threads (index 0 = 1 thread).
  std::map<std::string, std::vector<double>> peak_gflops;
  // Bandwidth in GB/s at 1..N threads (index 0 = 1 thread): "read", "copy", "triad".
  std::map<std::string, std::vector<double>> bandwidth_gbps;
  // Cache-level read bandwidth (GB/s, 1 thread) where measured: "L1", "L2", "L3".
  std::map<std::string, double> cache_read_gbps;
  // Cache sizes the cache-level buffers were sized from ("L1", "L2", "L3" -> bytes) and
  // the size of the DRAM working set; informational.
  std::map<std::string, double> cache_bytes;
  double dram_buffer_bytes = 0;
  std::string measured_at;  // ISO 8601 UTC

  // The roofs a run with `threads` threads sees: best ISA level's peak and triad bandwidth.
  // `threads` is clamped to 1..logical_cores; 0 when nothing was measured.
  double peak_gflops_at(int threads) const;
  // The bf16 dot-product peak (peak_gflops["avx512_bf16"]), the roof of nodes running at
  // bf16; 0 when not measured (no AVX512_BF16, or ceilings cached before it was measured).
  double bf16_peak_gflops_at(int threads) const;
  // The int8 dot-product peak (peak_gflops["avx512_vnni"], integer operations per second), the
  // roof of nodes on the integer kernels; 0 when not measured.
  double int8_peak_gflops_at(int threads) const;
  double bandwidth_gbps_at(int threads) const;
  // The level with the highest 1-thread peak (the widest one on a tie); "" when none.
  std::string best_isa() const;
};

// What the CPU says about itself (cheap: reads /proc and /sys, measures nothing).
struct CpuInfo {
  std::string model;                      // "Intel(R) Xeon(R) ..." or "unknown"
  std::vector<std::string> flags;         // sorted ISA flags from /proc/cpuinfo
  int logical_cores = 1;
  std::vector<std::string> isa_levels;    // what this binary can run here, narrowest first
  size_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;  // 0 when unknown
};
CpuInfo detect_cpu();
// FNV-1a of model, flags (order-insensitive) and core count, as 16 hex digits.
std::string machine_fingerprint(const std::string& cpu_model, std::vector<std::string> flags,
                                int logical_cores);

// Knobs of one measurement; the defaults take a few seconds on a 2..16-core machine.
struct MeasureOptions {
  double seconds_per_point = 0.02;  // FLOP/s time per (ISA, thread count)
  size_t dram_bytes = 0;            // 0: max(256 MiB, 4 x L3), capped at 1/4 of RAM
  int max_threads = 0;              // 0: all logical cores
  bool cache_levels = true;
};

// Cached ceilings if present for this machine, else measures (seconds) and caches.
// `force` re-measures. The cache lives in `cache_dir` (default ~/.peregrine).
Expected<MachineCeilings> load_or_measure_ceilings(bool force = false, const std::string& cache_dir = "");
// Only the cache: an error when this machine has not been measured yet.
Expected<MachineCeilings> load_cached_ceilings(const std::string& cache_dir = "");
Expected<MachineCeilings> measure_ceilings();
Expected<MachineCeilings> measure_ceilings(const MeasureOptions& options);
std::string ceilings_to_json(const MachineCeilings& c);
Expected<MachineCeilings> ceilings_from_json(const std::string& json);
// "<cache_dir or ~/.peregrine>/machine-<fingerprint>.json".
std::string ceilings_cache_path(const std::string& cache_dir, const std::string& fingerprint);

}  // namespace peregrine
