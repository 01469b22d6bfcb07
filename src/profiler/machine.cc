// peregrine machine: measures this machine's ceilings (peak FLOP/s per ISA level and
// thread count, memory and cache bandwidth) and caches them as JSON per CPU.
#include "profiler/machine.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "backends/cpu/cpu_features.h"
#include "core/file_io.h"
#include "core/json_text.h"
#include "core/json_value.h"
#include "core/utc_time.h"
#include "profiler/machine_kernels.h"

namespace peregrine {

// ---------------------------------------------------------------------------------------
// Accessors

namespace {

double at_threads(const std::vector<double>& v, int threads) {
  if (v.empty()) return 0;
  size_t i = static_cast<size_t>(std::clamp(threads, 1, static_cast<int>(v.size())) - 1);
  return v[i];
}

int isa_width_rank(const std::string& isa) {
  if (isa == "avx512") return 3;
  if (isa == "avx2") return 2;
  if (isa == "scalar") return 1;
  return 0;
}

}  // namespace

std::string MachineCeilings::best_isa() const {
  std::string best;
  double best_peak = -1;
  for (const auto& [isa, values] : peak_gflops) {
    if (values.empty() || isa == kBf16Level || isa == kInt8Level) continue;  // float32 only
    double p = values[0];
    if (p > best_peak || (p == best_peak && isa_width_rank(isa) > isa_width_rank(best))) {
      best = isa;
      best_peak = p;
    }
  }
  return best;
}

double MachineCeilings::peak_gflops_at(int threads) const {
  auto it = peak_gflops.find(best_isa());
  return it == peak_gflops.end() ? 0 : at_threads(it->second, threads);
}

double MachineCeilings::bf16_peak_gflops_at(int threads) const {
  auto it = peak_gflops.find(kBf16Level);
  return it == peak_gflops.end() ? 0 : at_threads(it->second, threads);
}

double MachineCeilings::int8_peak_gflops_at(int threads) const {
  auto it = peak_gflops.find(kInt8Level);
  return it == peak_gflops.end() ? 0 : at_threads(it->second, threads);
}

double MachineCeilings::bandwidth_gbps_at(int threads) const {
  auto it = bandwidth_gbps.find("triad");
  return it == bandwidth_gbps.end() ? 0 : at_threads(it->second, threads);
}

// ---------------------------------------------------------------------------------------
// CPU detection and fingerprint

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string read_small_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return "";
  std::ostringstream o;
  o << f.rdbuf();
  return o.str();
}

// "48K", "1024K", "32M" (sysfs cache sizes) -> bytes.
size_t parse_cache_size(const std::string& text) {
  std::string t = trim(text);
  if (t.empty()) return 0;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str() || v <= 0) return 0;
  switch (*end) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

// Data/unified caches of cpu0 by level; L3 also counts how many instances the machine
// has (one per CCX on AMD) so the DRAM buffer can exceed all of them.
void detect_caches(CpuInfo* cpu, size_t* l3_total) {
  namespace fs = std::filesystem;
  *l3_total = 0;
  std::error_code ec;
  for (int idx = 0; idx < 8; ++idx) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(idx);
    if (!fs::exists(dir, ec)) break;
    std::string type = trim(read_small_file(dir + "/type"));
    int level = std::atoi(read_small_file(dir + "/level").c_str());
    size_t size = parse_cache_size(read_small_file(dir + "/size"));
    if (type == "Instruction" || size == 0) continue;
    if (level == 1) cpu->l1d_bytes = size;
    if (level == 2) cpu->l2_bytes = size;
    if (level == 3) {
      cpu->l3_bytes = size;
      // Distinct sharing groups over all CPUs = number of L3 instances.
      std::set<std::string> groups;
      for (int c = 0; c < cpu->logical_cores; ++c) {
        std::string list = trim(read_small_file("/sys/devices/system/cpu/cpu" + std::to_string(c) +
                                                "/cache/index" + std::to_string(idx) +
                                                "/shared_cpu_list"));
        if (!list.empty()) groups.insert(list);
      }
      *l3_total = size * std::max<size_t>(1, groups.size());
    }
  }
#if defined(_SC_LEVEL1_DCACHE_SIZE)
  if (cpu->l1d_bytes == 0) cpu->l1d_bytes = std::max(0L, sysconf(_SC_LEVEL1_DCACHE_SIZE));
  if (cpu->l2_bytes == 0) cpu->l2_bytes = std::max(0L, sysconf(_SC_LEVEL2_CACHE_SIZE));
  if (cpu->l3_bytes == 0) cpu->l3_bytes = std::max(0L, sysconf(_SC_LEVEL3_CACHE_SIZE));
#endif
  if (*l3_total == 0) *l3_total = cpu->l3_bytes;
}

CpuInfo detect_cpu_with_l3_total(size_t* l3_total) {
  CpuInfo cpu;
  cpu.model = "unknown";
  std::istringstream in(read_small_file("/proc/cpuinfo"));
  std::string line;
  bool have_model = false, have_flags = false;
  while (std::getline(in, line) && !(have_model && have_flags)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (!have_model && (key == "model name" || key == "Model" || key == "cpu model")) {
      cpu.model = value;
      have_model = true;
    } else if (!have_flags && (key == "flags" || key == "Features")) {
      std::istringstream words(value);
      std::string w;
      while (words >> w) cpu.flags.push_back(w);
      std::sort(cpu.flags.begin(), cpu.flags.end());
      have_flags = true;
    }
  }
  cpu.logical_cores = std::max(1u, std::thread::hardware_concurrency());
  cpu.isa_levels.push_back("scalar");
  // The levels the CPU backend can dispatch to (backends/cpu/cpu_features.h: CPUID and the OS's
  // register state), so the ceilings are measured for the kernels that will run.
  const bool avx512 = cpu::isa_supported(cpu::Isa::kAvx512);
  if (cpu::isa_supported(cpu::Isa::kAvx2)) cpu.isa_levels.push_back("avx2");
  if (avx512) cpu.isa_levels.push_back("avx512");
  if (avx512 && cpu::cpu_features().avx512_bf16) cpu.isa_levels.push_back(kBf16Level);
  if (avx512 && cpu::cpu_features().avx512_vnni) cpu.isa_levels.push_back(kInt8Level);
  detect_caches(&cpu, l3_total);
  return cpu;
}

}  // namespace

CpuInfo detect_cpu() {
  size_t l3_total = 0;
  return detect_cpu_with_l3_total(&l3_total);
}

std::string machine_fingerprint(const std::string& cpu_model, std::vector<std::string> flags,
                                int logical_cores) {
  std::sort(flags.begin(), flags.end());
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  auto mix = [&h](const std::string& s) {
    for (unsigned char ch : s) {
      h ^= ch;
      h *= 1099511628211ull;
    }
    h ^= 0xff;  // separator, so ("ab","c") and ("a","bc") differ
    h *= 1099511628211ull;
  };
  mix(cpu_model);
  for (const auto& f : flags) mix(f);
  mix(std::to_string(logical_cores));
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// ---------------------------------------------------------------------------------------
// Measurement

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs work(thread_index) on `threads` threads released together; returns the seconds from
// the first start to the last finish.
double run_parallel(int threads, const std::function<void(int)>& work) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<Clock::time_point> start(threads), end(threads);
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      start[t] = Clock::now();
      work(t);
      end[t] = Clock::now();
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  go.store(true, std::memory_order_release);
  for (auto& th : pool) th.join();
  auto first = *std::min_element(start.begin(), start.end());
  auto last = *std::max_element(end.begin(), end.end());
  return std::chrono::duration<double>(last - first).count();
}

// The result of every kernel goes here so the compiler cannot drop the work.
std::atomic<uint64_t> g_sink{0};

void sink(uint64_t v) { g_sink.fetch_add(v, std::memory_order_relaxed); }
void sink(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  sink(static_cast<uint64_t>(bits));
}

struct IsaKernels {
  std::string name;
  float (*fma_loop)(int64_t);
  int64_t flops_per_iteration;
};

struct BandwidthKernels {
  uint64_t (*read)(const void*, size_t);
  void (*copy)(float*, const float*, size_t);
  void (*triad)(float*, const float*, const float*, float, size_t);
};

std::vector<IsaKernels> available_isas(const CpuInfo& cpu) {
  std::vector<IsaKernels> out;
  for (const auto& isa : cpu.isa_levels) {
    if (isa == "scalar") out.push_back({isa, &scalar::fma_loop, scalar::kFlopsPerIteration});
#if defined(PEREGRINE_X86_KERNELS)
    if (isa == "avx2") out.push_back({isa, &avx2::fma_loop, avx2::kFlopsPerIteration});
    if (isa == "avx512") out.push_back({isa, &avx512::fma_loop, avx512::kFlopsPerIteration});
    if (isa == kBf16Level)
      out.push_back({isa, &avx512bf16::dot_loop, avx512bf16::kFlopsPerIteration});
    if (isa == kInt8Level)
      out.push_back({isa, &avx512vnni::dot_loop, avx512vnni::kFlopsPerIteration});
#endif
  }
  return out;
}

// The widest loads/stores this machine has: bandwidth is a property of the memory system,
// so measure it with loads that do not bottleneck the core.
BandwidthKernels best_bandwidth_kernels(const CpuInfo& cpu) {
  const auto& levels = cpu.isa_levels;
  (void)levels;
#if defined(PEREGRINE_X86_KERNELS)
  if (std::count(levels.begin(), levels.end(), "avx512"))
    return {&avx512::read, &avx512::copy, &avx512::triad};
  if (std::count(levels.begin(), levels.end(), "avx2"))
    return {&avx2::read, &avx2::copy, &avx2::triad};
#endif
  return {&baseline::read, &baseline::copy, &baseline::triad};
}

// GFLOP/s of `isa` at 1..max_threads threads (same work per thread; best of two).
std::vector<double> measure_peak(const IsaKernels& isa, int max_threads, double seconds_per_point) {
  // Calibrate: grow the iteration count until one thread takes >= 2 ms.
  int64_t iters = 1 << 14;
  double t = 0;
  for (;;) {
    auto t0 = Clock::now();
    sink(isa.fma_loop(iters));
    t = seconds_since(t0);
    if (t >= 2e-3 || iters > (int64_t{1} << 40)) break;
    iters *= 4;
  }
  iters = std::max<int64_t>(1, static_cast<int64_t>(iters * seconds_per_point / t));
  std::vector<double> gflops;
  for (int threads = 1; threads <= max_threads; ++threads) {
    double best = 0;
    for (int rep = 0; rep < 2; ++rep) {
      double s = run_parallel(threads, [&](int) { sink(isa.fma_loop(iters)); });
      if (s > 0) best = std::max(best, static_cast<double>(iters) * isa.flops_per_iteration * threads / s / 1e9);
    }
    gflops.push_back(best);
  }
  return gflops;
}

struct AlignedBuffer {
  explicit AlignedBuffer(size_t bytes) : bytes(bytes) {
    data = static_cast<char*>(std::aligned_alloc(4096, bytes));
  }
  ~AlignedBuffer() { std::free(data); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  char* data = nullptr;
  size_t bytes = 0;
};

// [begin, end) byte range of thread t's share of `bytes`, in 4 KiB units.
std::pair<size_t, size_t> share(size_t bytes, int threads, int t) {
  size_t pages = bytes / 4096;
  size_t begin = pages * t / threads, end = pages * (t + 1) / threads;
  return {begin * 4096, end * 4096};
}

// read / copy / triad GB/s at 1..max_threads over a buffer of `bytes` (STREAM counting:
// bytes read + bytes written, no write-allocate traffic).
std::map<std::string, std::vector<double>> measure_memory(const BandwidthKernels& k, size_t bytes,
                                                          int max_threads, int reps) {
  std::map<std::string, std::vector<double>> out;
  // Three equal arrays (for triad); read uses all of it, copy the first two.
  size_t array_bytes = bytes / 3 / 4096 * 4096;
  AlignedBuffer buf(array_bytes * 3);
  if (!buf.data) return out;
  float* a = reinterpret_cast<float*>(buf.data);
  float* b = reinterpret_cast<float*>(buf.data + array_bytes);
  float* c = reinterpret_cast<float*>(buf.data + 2 * array_bytes);
  // First touch in parallel so pages land near the threads that use them.
  run_parallel(max_threads, [&](int t) {
    auto [lo, hi] = share(buf.bytes, max_threads, t);
    std::memset(buf.data + lo, 1, hi - lo);
  });
  for (int threads = 1; threads <= max_threads; ++threads) {
    double best_read = 0, best_copy = 0, best_triad = 0;
    for (int rep = 0; rep < reps; ++rep) {
      double s = run_parallel(threads, [&](int t) {
        auto [lo, hi] = share(buf.bytes, threads, t);
        sink(k.read(buf.data + lo, hi - lo));
      });
      best_read = std::max(best_read, buf.bytes / s / 1e9);
      s = run_parallel(threads, [&](int t) {
        auto [lo, hi] = share(array_bytes, threads, t);
        k.copy(b + lo / 4, a + lo / 4, (hi - lo) / 4);
      });
      best_copy = std::max(best_copy, 2.0 * array_bytes / s / 1e9);
      s = run_parallel(threads, [&](int t) {
        auto [lo, hi] = share(array_bytes, threads, t);
        k.triad(a + lo / 4, b + lo / 4, c + lo / 4, 0.5f, (hi - lo) / 4);
      });
      best_triad = std::max(best_triad, 3.0 * array_bytes / s / 1e9);
    }
    out["read"].push_back(best_read);
    out["copy"].push_back(best_copy);
    out["triad"].push_back(best_triad);
  }
  sink(static_cast<uint64_t>(a[1] + b[2] + c[3]));
  return out;
}

// One thread re-reading a buffer of `bytes` (sized to sit in one cache level): GB/s.
double measure_cache_read(const BandwidthKernels& k, size_t bytes, double seconds) {
  bytes = std::max<size_t>(4096, bytes / 4096 * 4096);
  AlignedBuffer buf(bytes);
  if (!buf.data) return 0;
  std::memset(buf.data, 1, bytes);
  int passes_per_check = static_cast<int>(std::max<size_t>(1, (size_t{1} << 20) / bytes));
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    double moved = 0, elapsed = 0;
    do {
      for (int p = 0; p < passes_per_check; ++p) sink(k.read(buf.data, bytes));
      moved += static_cast<double>(bytes) * passes_per_check;
      elapsed = seconds_since(t0);
    } while (elapsed < seconds / 3);
    best = std::max(best, moved / elapsed / 1e9);
  }
  return best;
}

size_t physical_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
}

}  // namespace

Expected<MachineCeilings> measure_ceilings(const MeasureOptions& options) {
  size_t l3_total = 0;
  CpuInfo cpu = detect_cpu_with_l3_total(&l3_total);
  MachineCeilings c;
  c.cpu_model = cpu.model;
  c.logical_cores = cpu.logical_cores;
  c.fingerprint = machine_fingerprint(cpu.model, cpu.flags, cpu.logical_cores);
  c.measured_at = utc_now_iso8601();
  int max_threads = options.max_threads > 0 ? std::min(options.max_threads, cpu.logical_cores)
                                            : cpu.logical_cores;

  for (const auto& isa : available_isas(cpu)) {
    c.isa_levels.push_back(isa.name);
    c.peak_gflops[isa.name] = measure_peak(isa, max_threads, options.seconds_per_point);
  }

  BandwidthKernels kernels = best_bandwidth_kernels(cpu);
  size_t dram = options.dram_bytes;
  if (dram == 0) {
    // Far beyond every last-level cache, yet bounded so one pass stays short.
    dram = std::max<size_t>(size_t{256} << 20, 4 * l3_total);
    dram = std::min<size_t>(dram, size_t{2} << 30);
    size_t ram = physical_memory_bytes();
    if (ram > 0) dram = std::min(dram, ram / 4);
  }
  dram = std::max<size_t>(dram, 3 * 4096 * static_cast<size_t>(max_threads));
  int reps = dram > (size_t{512} << 20) ? 2 : 3;
  c.bandwidth_gbps = measure_memory(kernels, dram, max_threads, reps);
  if (c.bandwidth_gbps.empty())
    return internal_error("cannot allocate " + std::to_string(dram >> 20) +
                          " MiB for the bandwidth test");
  const size_t dram_array_bytes = dram / 3 / 4096 * 4096;  // three arrays of whole pages
  c.dram_buffer_bytes = static_cast<double>(dram_array_bytes * 3);

  if (options.cache_levels) {
    // Half of each level, so the buffer fits alongside whatever else is there.
    const std::pair<const char*, size_t> levels[] = {
        {"L1", cpu.l1d_bytes}, {"L2", cpu.l2_bytes}, {"L3", cpu.l3_bytes}};
    for (const auto& [name, size] : levels) {
      if (size == 0) continue;
      c.cache_bytes[name] = static_cast<double>(size);
      c.cache_read_gbps[name] = measure_cache_read(kernels, size / 2, options.seconds_per_point * 3);
    }
  }
  // Values <= 0 would make every roofline meaningless; fail loudly instead.
  for (const auto& [isa, v] : c.peak_gflops)
    for (double x : v)
      if (!(x > 0)) return internal_error("peak FLOP/s measurement for " + isa + " gave " + std::to_string(x));
  return c;
}

Expected<MachineCeilings> measure_ceilings() { return measure_ceilings(MeasureOptions{}); }

// ---------------------------------------------------------------------------------------
// JSON

namespace {

constexpr int kSchemaVersion = 1;

// Shortest text that reads back as the same double; non-finite values become 0.
std::string json_double(double v) {
  if (!std::isfinite(v)) return "0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string json_array(const std::vector<double>& v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + json_double(v[i]);
  return o + "]";
}

Status read_number_array(const Json& v, const std::string& what, std::vector<double>* out) {
  if (v.type != Json::Type::kArray) return invalid_input(what + " is not an array");
  for (const auto& x : v.array) {
    if (x.type != Json::Type::kNumber) return invalid_input(what + " holds a non-number");
    out->push_back(x.number);
  }
  return Status::ok();
}

Status read_number_map(const Json* v, const std::string& what, std::map<std::string, double>* out) {
  if (!v) return Status::ok();  // optional
  if (v->type != Json::Type::kObject) return invalid_input(what + " is not an object");
  for (size_t i = 0; i < v->keys.size(); ++i) {
    const std::string& k = v->keys[i];
    const Json& x = v->values[i];
    if (x.type != Json::Type::kNumber) return invalid_input(what + "." + k + " is not a number");
    (*out)[k] = x.number;
  }
  return Status::ok();
}

Status read_array_map(const Json* v, const std::string& what,
                      std::map<std::string, std::vector<double>>* out) {
  if (!v || v->type != Json::Type::kObject) return invalid_input(what + " is missing or not an object");
  for (size_t i = 0; i < v->keys.size(); ++i)
    PG_RETURN_IF_ERROR(
        read_number_array(v->values[i], what + "." + v->keys[i], &(*out)[v->keys[i]]));
  return Status::ok();
}

}  // namespace

std::string ceilings_to_json(const MachineCeilings& c) {
  std::ostringstream o;
  o << "{\n  \"schema_version\": " << kSchemaVersion << ",\n";
  o << "  \"cpu_model\": " << json_string(c.cpu_model) << ",\n";
  o << "  \"fingerprint\": " << json_string(c.fingerprint) << ",\n";
  o << "  \"logical_cores\": " << c.logical_cores << ",\n";
  o << "  \"measured_at\": " << json_string(c.measured_at) << ",\n";
  o << "  \"isa_levels\": [";
  for (size_t i = 0; i < c.isa_levels.size(); ++i)
    o << (i ? ", " : "") << json_string(c.isa_levels[i]);
  o << "],\n";
  auto array_map = [&o](const char* key, const std::map<std::string, std::vector<double>>& m) {
    o << "  \"" << key << "\": {";
    size_t i = 0;
    for (const auto& [k, v] : m)
      o << (i++ ? "," : "") << "\n    " << json_string(k) << ": " << json_array(v);
    o << (m.empty() ? "},\n" : "\n  },\n");
  };
  auto number_map = [&o](const char* key, const std::map<std::string, double>& m) {
    o << "  \"" << key << "\": {";
    size_t i = 0;
    for (const auto& [k, v] : m) o << (i++ ? ", " : "") << json_string(k) << ": " << json_double(v);
    o << "},\n";
  };
  array_map("peak_gflops", c.peak_gflops);
  array_map("bandwidth_gbps", c.bandwidth_gbps);
  number_map("cache_read_gbps", c.cache_read_gbps);
  number_map("cache_bytes", c.cache_bytes);
  o << "  \"dram_buffer_bytes\": " << json_double(c.dram_buffer_bytes) << ",\n";
  // Convenience for readers that want one number per roof (what rooflines use).
  o << "  \"best_isa\": " << json_string(c.best_isa()) << ",\n";
  o << "  \"peak_gflops_all_threads\": " << json_double(c.peak_gflops_at(c.logical_cores)) << ",\n";
  o << "  \"bandwidth_gbps_all_threads\": " << json_double(c.bandwidth_gbps_at(c.logical_cores)) << "\n";
  o << "}\n";
  return o.str();
}

Expected<MachineCeilings> ceilings_from_json(const std::string& json) {
  PG_ASSIGN_OR_RETURN(Json root, parse_json(json));
  if (root.type != Json::Type::kObject) return invalid_input("machine ceilings: not a JSON object");
  const Json* version = root.get("schema_version");
  if (!version || version->type != Json::Type::kNumber || version->number != kSchemaVersion)
    return invalid_input("machine ceilings: schema_version is not " + std::to_string(kSchemaVersion));
  MachineCeilings c;
  auto string_field = [&](const char* key, std::string* out, bool required) -> Status {
    const Json* v = root.get(key);
    if (!v) return required ? invalid_input(std::string("machine ceilings: missing ") + key) : Status::ok();
    if (v->type != Json::Type::kString) return invalid_input(std::string("machine ceilings: ") + key + " is not a string");
    *out = v->string;
    return Status::ok();
  };
  PG_RETURN_IF_ERROR(string_field("cpu_model", &c.cpu_model, true));
  PG_RETURN_IF_ERROR(string_field("fingerprint", &c.fingerprint, true));
  PG_RETURN_IF_ERROR(string_field("measured_at", &c.measured_at, false));
  const Json* cores = root.get("logical_cores");
  if (!cores || cores->type != Json::Type::kNumber || cores->number < 1)
    return invalid_input("machine ceilings: logical_cores missing or not a positive number");
  c.logical_cores = static_cast<int>(cores->number);
  const Json* isas = root.get("isa_levels");
  if (!isas || isas->type != Json::Type::kArray) return invalid_input("machine ceilings: isa_levels missing");
  for (const auto& x : isas->array) {
    if (x.type != Json::Type::kString) return invalid_input("machine ceilings: isa_levels holds a non-string");
    c.isa_levels.push_back(x.string);
  }
  Status st = read_array_map(root.get("peak_gflops"), "peak_gflops", &c.peak_gflops);
  if (st.is_ok()) st = read_array_map(root.get("bandwidth_gbps"), "bandwidth_gbps", &c.bandwidth_gbps);
  if (st.is_ok()) st = read_number_map(root.get("cache_read_gbps"), "cache_read_gbps", &c.cache_read_gbps);
  if (st.is_ok()) st = read_number_map(root.get("cache_bytes"), "cache_bytes", &c.cache_bytes);
  if (!st.is_ok()) return st.with_context("machine ceilings");
  if (const Json* d = root.get("dram_buffer_bytes"); d && d->type == Json::Type::kNumber)
    c.dram_buffer_bytes = d->number;
  return c;
}

// ---------------------------------------------------------------------------------------
// Cache

namespace {

std::string default_cache_dir() {
  const char* home = std::getenv("HOME");
  std::string h = home && *home ? home : "";
  if (h.empty()) {
    if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir) h = pw->pw_dir;
  }
  return h.empty() ? ".peregrine" : h + "/.peregrine";
}

std::string current_fingerprint() {
  CpuInfo cpu = detect_cpu();
  return machine_fingerprint(cpu.model, cpu.flags, cpu.logical_cores);
}

}  // namespace

std::string ceilings_cache_path(const std::string& cache_dir, const std::string& fingerprint) {
  std::string dir = cache_dir.empty() ? default_cache_dir() : cache_dir;
  return dir + "/machine-" + fingerprint + ".json";
}

Expected<MachineCeilings> load_cached_ceilings(const std::string& cache_dir) {
  std::string fp = current_fingerprint();
  std::string path = ceilings_cache_path(cache_dir, fp);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return invalid_input("this machine has not been measured yet (no " + path +
                         "); run 'peregrine machine'");
  std::string text = read_small_file(path);
  PG_ASSIGN_OR_RETURN(MachineCeilings c, ceilings_from_json(text));
  if (c.fingerprint != fp)
    return invalid_input("'" + path + "' belongs to another machine (fingerprint " + c.fingerprint + ")");
  return c;
}

Expected<MachineCeilings> load_or_measure_ceilings(bool force, const std::string& cache_dir) {
  std::string path = ceilings_cache_path(cache_dir, current_fingerprint());
  if (!force) {
    auto cached = load_cached_ceilings(cache_dir);
    // A cache from a build that measured fewer levels (before the bf16 dot product had a
    // roof) is measured again.
    if (cached.is_ok() && cached->isa_levels != detect_cpu().isa_levels)
      cached = invalid_input("it lacks levels this build measures");
    if (cached.is_ok()) return cached;
    std::error_code ec;
    if (std::filesystem::exists(path, ec))
      std::fprintf(stderr, "note: ignoring the cached ceilings (%s); measuring again\n",
                   cached.status().message().c_str());
  }
  PG_ASSIGN_OR_RETURN(MachineCeilings c, measure_ceilings());
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  Status w = ec ? internal_error("cannot create '" + std::filesystem::path(path).parent_path().string() + "'")
                : write_file_atomically(path, ceilings_to_json(c));
  // Not caching only costs a re-measure next time; the numbers are still good.
  if (!w.is_ok()) std::fprintf(stderr, "warning: ceilings not cached: %s\n", w.message().c_str());
  return c;
}

}  // namespace peregrine
