// CPU feature detection (CPUID + XGETBV) and the ISA level the CPU backend dispatches to.
//
// The level is chosen once per process: the best level the CPU (and OS) supports, or the
// level named by PEREGRINE_ISA=scalar|avx2|avx512, which must not exceed what the CPU has.
#pragma once

#include <string>

#include "peregrine/status.h"

namespace peregrine::cpu {

// Dispatch levels, ordered: a higher level implies every lower one.
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

const char* isa_name(Isa isa);
Expected<Isa> parse_isa(const std::string& name);

struct CpuFeatures {
  bool avx2 = false;  // AVX2 and FMA3, with OS support for ymm state
  bool fma = false;
  bool avx512f = false;  // AVX-512 F/BW/DQ/VL are required together for kAvx512
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool avx512_vbmi = false;  // vpermb / vpermi2b: byte permutes
  bool avx_vnni = false;
  // 512-bit operations issue as two 256-bit halves (AMD family 19h, Zen 4), so a 512-bit
  // shuffle costs two: kernels whose wider variant is shuffle-bound keep the narrower one.
  bool avx512_split = false;
  // Highest level this CPU can run.
  Isa best_isa() const;
  std::string to_string() const;  // "avx2 fma avx512f ..."
};

// Detected once, at first use.
const CpuFeatures& cpu_features();

// The level kernels dispatch to: PEREGRINE_ISA if set (validated), else best_isa().
// An invalid or unsupported PEREGRINE_ISA is an error value, returned on every call.
const Expected<Isa>& selected_isa();

// True when the CPU can run kernels of level `isa`.
bool isa_supported(Isa isa);

}  // namespace peregrine::cpu
