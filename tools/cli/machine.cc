// peregrine machine: this machine's ceilings (peak FP32 FLOP/s per ISA level and thread
// count, memory and cache bandwidth), measured once and cached per CPU.
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "cli_common.h"
#include "profiler/machine.h"

namespace peregrine::cli {

namespace {

std::string human_bytes(double b) {
  char buf[32];
  if (b >= 1 << 30) std::snprintf(buf, sizeof buf, "%.0f GiB", b / (1 << 30));
  else if (b >= 1 << 20) std::snprintf(buf, sizeof buf, "%.0f MiB", b / (1 << 20));
  else std::snprintf(buf, sizeof buf, "%.0f KiB", b / 1024);
  return buf;
}

void print_table(const MachineCeilings& c, const std::string& cache_path) {
  std::printf("cpu:          %s (%d logical cores)\n", c.cpu_model.c_str(), c.logical_cores);
  std::printf("fingerprint:  %s\n", c.fingerprint.c_str());
  std::error_code ec;
  std::printf("measured:     %s (%s%s)\n\n", c.measured_at.c_str(),
              std::filesystem::exists(cache_path, ec) ? "cached in " : "not cached",
              std::filesystem::exists(cache_path, ec) ? cache_path.c_str() : "");

  std::printf("%-8s", "threads");
  for (const auto& isa : c.isa_levels) std::printf(" %10s", isa.c_str());
  std::printf("  |");
  const char* kinds[] = {"read", "copy", "triad"};
  for (const char* k : kinds) std::printf(" %9s", k);
  std::printf("\n%-8s", "");
  for (size_t i = 0; i < c.isa_levels.size(); ++i) std::printf(" %10s", "GFLOP/s");
  std::printf("  |");
  for (size_t i = 0; i < 3; ++i) std::printf(" %9s", "GB/s");
  std::printf("\n");
  for (int t = 1; t <= c.logical_cores; ++t) {
    std::printf("%-8d", t);
    for (const auto& isa : c.isa_levels) {
      auto it = c.peak_gflops.find(isa);
      if (it != c.peak_gflops.end() && t <= static_cast<int>(it->second.size()))
        std::printf(" %10.1f", it->second[t - 1]);
      else
        std::printf(" %10s", "-");
    }
    std::printf("  |");
    for (const char* k : kinds) {
      auto it = c.bandwidth_gbps.find(k);
      if (it != c.bandwidth_gbps.end() && t <= static_cast<int>(it->second.size()))
        std::printf(" %9.1f", it->second[t - 1]);
      else
        std::printf(" %9s", "-");
    }
    std::printf("\n");
  }
  if (c.dram_buffer_bytes > 0)
    std::printf("(bandwidth over a %s working set; STREAM counting: bytes read + written)\n",
                human_bytes(c.dram_buffer_bytes).c_str());
  if (c.peak_gflops.count(kInt8Level))
    std::printf("(%s: 8-bit integer dot products, in GOP/s: the roof of the int8 kernels)\n",
                kInt8Level);
  if (!c.cache_read_gbps.empty()) {
    std::printf("\ncache read, 1 thread:");
    for (const auto& [level, gbps] : c.cache_read_gbps) {
      auto size = c.cache_bytes.find(level);
      std::printf("  %s %.1f GB/s", level.c_str(), gbps);
      if (size != c.cache_bytes.end()) std::printf(" (%s)", human_bytes(size->second).c_str());
    }
    std::printf("\n");
  }
  std::printf("\nroofs (best ISA %s): 1 thread %.1f GFLOP/s, %.1f GB/s; %d threads %.1f GFLOP/s, "
              "%.1f GB/s\n",
              c.best_isa().c_str(), c.peak_gflops_at(1), c.bandwidth_gbps_at(1), c.logical_cores,
              c.peak_gflops_at(c.logical_cores), c.bandwidth_gbps_at(c.logical_cores));
}

}  // namespace

int cmd_machine(int argc, char** argv) {
  Args args("machine", "[options]");
  args.toggle("force", "measure again even if this machine's ceilings are cached");
  args.toggle("json", "print the ceilings as one JSON object");
  args.flag("cache-dir", "where the ceilings are cached (default: ~/.peregrine)");
  Status st = args.parse(argc, argv);
  if (!st.is_ok()) return print_error(st);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (!args.positional().empty())
    return print_error(invalid_input("peregrine machine: takes no positional arguments"));
  std::string cache_dir = args.get("cache-dir");
  bool force = args.is_set("force");
  if (force || !load_cached_ceilings(cache_dir).is_ok()) {
    std::fprintf(stderr, "measuring this machine's ceilings (a few seconds)...\n");
    // Other work on the machine lowers every roof, and the result is cached: say so.
    double load = 0;
    unsigned cores = std::thread::hardware_concurrency();
    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
      if (std::fscanf(f, "%lf", &load) != 1) load = 0;
      std::fclose(f);
    }
    if (cores && load > 0.5 * cores)
      std::fprintf(stderr,
                   "note: load average %.2f on %u cores: other work lowers the measured roofs; "
                   "re-run with --force when the machine is quiet\n",
                   load, cores);
  }
  auto ceilings = load_or_measure_ceilings(force, cache_dir);
  if (!ceilings.is_ok()) return print_error(ceilings.status());
  if (args.is_set("json")) {
    std::fputs(ceilings_to_json(*ceilings).c_str(), stdout);
  } else {
    print_table(*ceilings, ceilings_cache_path(cache_dir, ceilings->fingerprint));
  }
  return 0;
}

}  // namespace peregrine::cli
