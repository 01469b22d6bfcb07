// Helpers for the CPU backend tests: output buffers followed by a PROT_NONE guard page, so a
// kernel writing one element past the end faults; random fills; naive reference loops.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_features.h"

namespace peregrine::cpu::testing {

// The dispatch levels this CPU runs, lowest first, up to `highest` (a family with no table above
// a level passes it): kernels are tested at each.
inline std::vector<Isa> isa_levels(Isa highest = Isa::kAvx512) {
  std::vector<Isa> levels;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512})
    if (isa <= highest && isa_supported(isa)) levels.push_back(isa);
  return levels;
}

// `count` floats ending exactly at a page boundary, followed by an inaccessible page.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t count) : count_(count) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t bytes = count * sizeof(float);
    data_pages_ = (bytes + page - 1) / page;
    map_bytes_ = (data_pages_ + 1) * page;
    base_ = static_cast<char*>(
        mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    mprotect(base_ + data_pages_ * page, page, PROT_NONE);
    data_ = reinterpret_cast<float*>(base_ + data_pages_ * page - bytes);
  }
  ~GuardedBuffer() { munmap(base_, map_bytes_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  float* data() { return data_; }
  size_t size() const { return count_; }

 private:
  size_t count_, data_pages_ = 0, map_bytes_ = 0;
  char* base_ = nullptr;
  float* data_ = nullptr;
};

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// An environment variable set (or, value nullptr, unset) for one scope, restored after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

// PEREGRINE_CONV_ALGO set for one scope (read when a kernel is prepared).
class ScopedConvAlgo : public ScopedEnv {
 public:
  explicit ScopedConvAlgo(const char* value) : ScopedEnv("PEREGRINE_CONV_ALGO", value) {}
};

}  // namespace peregrine::cpu::testing
