// Roofline arithmetic: given the work (FLOPs), traffic (bytes) and measured time of
// one node and the machine's roofs, how fast could it go, how close is it, and what
// limits it. Pure functions, no I/O: the CLI, the trace and the report share them.
//
//   bound(I)   = min(peak, I * bandwidth)            attainable FLOP/s at intensity I
//   ridge      = peak / bandwidth                    the intensity where the roofs meet
//   t_min      = max(flops / peak, bytes / bandwidth) the fastest the roofs allow
//   % of bound = t_min / t_measured                  == achieved / bound(I) when flops > 0
//
// Using t_min for the percentage keeps it meaningful for zero-FLOP nodes (Reshape,
// Concat, Transpose: % of bandwidth) and zero-byte nodes (% of peak).
#pragma once

#include <string>

namespace peregrine::profiler {

// The two roofs a run sees (already chosen for its thread count and ISA).
struct Roofs {
  double peak_gflops = 0;     // GFLOP/s
  double bandwidth_gbps = 0;  // GB/s (1e9 bytes per second)
};

enum class BoundClass {
  kCompute,   // intensity >= ridge: the compute roof binds
  kMemory,    // intensity < ridge: the bandwidth roof binds
  kOverhead,  // too little work for either roof to matter; see kOverhead* below
};

// Overhead-bound, precisely: a node is overhead-bound when
//   (a) its measured time is under kOverheadTimeSeconds (5 µs) — at that scale kernel
//       dispatch, shape checks and allocation (roughly a microsecond or more each) are a
//       large share of what was measured, whatever the op does; or
//   (b) the roofs would let its work finish in under kOverheadWorkSeconds (1 µs)
//       (t_min < 1 µs) — however long it took, the time is not spent on FLOPs or bytes
//       (e.g. a Shape or a Reshape of a small tensor); or
//   (c) it has neither FLOPs nor bytes in the cost model.
// A big node that is merely slow (say 2% of peak) is NOT overhead-bound: its work is
// real, and it is classed by the roof that binds at its intensity.
inline constexpr double kOverheadTimeSeconds = 5e-6;
inline constexpr double kOverheadWorkSeconds = 1e-6;

struct RooflinePoint {
  double flops = 0;
  double bytes = 0;
  double seconds = 0;          // measured
  double intensity = 0;        // FLOP/byte; +inf when bytes == 0 < flops, 0 when flops == 0
  double achieved_gflops = 0;  // 0 when seconds <= 0
  double achieved_gbps = 0;
  double bound_gflops = 0;      // min(peak, intensity * bandwidth)
  double min_seconds = 0;       // t_min, the fastest the roofs allow
  double percent_of_bound = 0;  // 100 * t_min / seconds (0 when seconds <= 0)
  BoundClass bound_class = BoundClass::kOverhead;
};

// Intensity at which the bandwidth slope meets the compute roof (FLOP/byte); 0 without roofs.
double ridge_intensity(const Roofs& roofs);
// min(peak, intensity * bandwidth), in GFLOP/s.
double attainable_gflops(double intensity, const Roofs& roofs);
// Everything above for one node. Negative inputs are treated as 0.
RooflinePoint analyze(double flops, double bytes, double seconds, const Roofs& roofs);

// Does a kernel (by its name) compute with the int8 dot product (vpdpbusd / vpdpwssd), so that
// the int8 roof is its ceiling? Those kernels say "avx512vnni" in their names.
inline bool is_int8_kernel(const std::string& kernel_name) {
  return kernel_name.find("avx512vnni") != std::string::npos;
}

// "compute-bound", "memory-bound", "overhead-bound".
const char* bound_class_name(BoundClass c);
// One line saying what limits the node and what would help, e.g.
// "memory-bound (0.25 FLOP/B < ridge 9.8) at 71% of 20.0 GB/s: only less traffic helps".
std::string bottleneck_reason(const RooflinePoint& p, const Roofs& roofs);

}  // namespace peregrine::profiler
