// Kernels that measure the machine's ceilings, one namespace per ISA level. Each
// namespace lives in its own source file compiled with that ISA's flags (see
// CMakeLists.txt), and machine.cc calls a level only after a CPUID check.
//
// The ISA files must stay free of inline or template code from shared headers (no
// <vector>, <string>, <algorithm>...): the linker keeps one copy of such code, and if it
// picked the -mavx512f copy every caller would crash on a machine without AVX-512.
// Intrinsics are static always-inline functions, so they are safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace peregrine {

// Baseline x86-64 (or whatever the build targets): scalar mul+add chains, compiled without
// auto-vectorization, so the roof matches scalar code. FLOPs per iteration of the loop.
namespace scalar {
inline constexpr int64_t kFlopsPerIteration = 12 * 2;  // 12 chains, a mul and an add each
float fma_loop(int64_t iterations);
}  // namespace scalar

// Bandwidth kernels at the build's baseline ISA (used where no wider level exists).
// `bytes` / element counts must be multiples of 256 bytes; pointers 64-byte aligned.
namespace baseline {
uint64_t read(const void* data, size_t bytes);
void copy(float* dst, const float* src, size_t count);
void triad(float* a, const float* b, const float* c, float scale, size_t count);
}  // namespace baseline

#if defined(__x86_64__) || defined(_M_X64)
#define PEREGRINE_X86_KERNELS 1
namespace avx2 {
inline constexpr int64_t kFlopsPerIteration = 12 * 8 * 2;  // 12 ymm chains of 8-lane FMAs
float fma_loop(int64_t iterations);
uint64_t read(const void* data, size_t bytes);
void copy(float* dst, const float* src, size_t count);
void triad(float* a, const float* b, const float* c, float scale, size_t count);
}  // namespace avx2

namespace avx512 {
inline constexpr int64_t kFlopsPerIteration = 16 * 16 * 2;  // 16 zmm chains of 16-lane FMAs
float fma_loop(int64_t iterations);
uint64_t read(const void* data, size_t bytes);
void copy(float* dst, const float* src, size_t count);
void triad(float* a, const float* b, const float* c, float scale, size_t count);
}  // namespace avx512

// The bf16 dot product (vdpbf16ps): each lane adds two products, 4 FLOPs per lane.
namespace avx512bf16 {
inline constexpr int64_t kFlopsPerIteration = 16 * 16 * 4;  // 16 zmm chains of 16 lanes
float dot_loop(int64_t iterations);
}  // namespace avx512bf16

// The int8 dot product (vpdpbusd): each int32 lane adds four uint8 x int8 products, counted as
// 8 integer operations (a multiply and an add each), the unit the integer kernels' costs use.
namespace avx512vnni {
inline constexpr int64_t kFlopsPerIteration = 16 * 16 * 8;  // 16 zmm chains of 16 lanes
float dot_loop(int64_t iterations);
}  // namespace avx512vnni
#endif

}  // namespace peregrine
