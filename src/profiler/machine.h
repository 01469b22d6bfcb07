// This machine's ceilings: peak FP32 FLOP/s per ISA level and thread count, and
// memory bandwidth. Measured once, cached per CPU model and flags, and used as
// the roofs of every roofline.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace peregrine {

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

  // The roofs a run with `threads` threads sees: best ISA level's peak and triad bandwidth.
  double peak_gflops_at(int threads) const;
  double bandwidth_gbps_at(int threads) const;
  std::string best_isa() const;
};

// Cached ceilings if present for this machine, else measures (seconds) and caches.
// `force` re-measures. The cache lives in `cache_dir` (default ~/.peregrine).
Expected<MachineCeilings> load_or_measure_ceilings(bool force = false, const std::string& cache_dir = "");
Expected<MachineCeilings> measure_ceilings();
std::string ceilings_to_json(const MachineCeilings& c);
Expected<MachineCeilings> ceilings_from_json(const std::string& json);

}  // namespace peregrine
