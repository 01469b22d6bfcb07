#include "backends/cpu/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>

namespace peregrine::cpu {

namespace {

// XCR0: which register states the OS saves on context switch.
uint64_t read_xcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return f;
  const bool amd = ebx == 0x68747541 && edx == 0x69746e65 && ecx == 0x444d4163;  // "AuthenticAMD"
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const unsigned base_family = (eax >> 8) & 0xf;
  const unsigned family = base_family == 0xf ? base_family + ((eax >> 20) & 0xff) : base_family;
  f.avx512_split = amd && family == 0x19;
  const bool osxsave = ecx & (1u << 27), avx = ecx & (1u << 28), fma = ecx & (1u << 12);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = read_xcr0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;    // SSE + AVX
  const bool zmm_state = (xcr0 & 0xe6) == 0xe6;  // + opmask, ZMM_Hi256, Hi16_ZMM
  if (!ymm_state) return f;
  f.fma = fma;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  f.avx2 = (ebx & (1u << 5)) && fma;
  if (zmm_state) {
    f.avx512f = ebx & (1u << 16);
    f.avx512dq = ebx & (1u << 17);
    f.avx512bw = ebx & (1u << 30);
    f.avx512vl = ebx & (1u << 31);
    f.avx512_vnni = ecx & (1u << 11);
    f.avx512_vbmi = ecx & (1u << 1);
  }
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  f.avx_vnni = eax & (1u << 4);
  if (zmm_state) f.avx512_bf16 = eax & (1u << 5);
  return f;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

Expected<Isa> parse_isa(const std::string& name) {
  if (name == "scalar") return Isa::kScalar;
  if (name == "avx2") return Isa::kAvx2;
  if (name == "avx512") return Isa::kAvx512;
  return invalid_input("PEREGRINE_ISA='" + name + "': expected scalar, avx2 or avx512");
}

Isa CpuFeatures::best_isa() const {
  if (avx512f && avx512bw && avx512dq && avx512vl && avx2) return Isa::kAvx512;
  if (avx2 && fma) return Isa::kAvx2;
  return Isa::kScalar;
}

std::string CpuFeatures::to_string() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512dq, "avx512dq");
  add(avx512vl, "avx512vl");
  add(avx512_vnni, "avx512_vnni");
  add(avx512_vbmi, "avx512_vbmi");
  add(avx512_bf16, "avx512_bf16");
  add(avx_vnni, "avx_vnni");
  return s.empty() ? "none" : s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

bool isa_supported(Isa isa) {
  return static_cast<int>(isa) <= static_cast<int>(cpu_features().best_isa());
}

const Expected<Isa>& selected_isa() {
  static const Expected<Isa> isa = []() -> Expected<Isa> {
    const Isa best = cpu_features().best_isa();
    const char* env = std::getenv("PEREGRINE_ISA");
    if (env == nullptr || *env == '\0') return best;
    PG_ASSIGN_OR_RETURN(Isa forced, parse_isa(env));
    if (!isa_supported(forced))
      return unsupported(std::string("PEREGRINE_ISA=") + env + ": this CPU supports at most " +
                         isa_name(best) + " (" + cpu_features().to_string() + ")");
    return forced;
  }();
  return isa;
}

}  // namespace peregrine::cpu
