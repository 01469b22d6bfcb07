#include "profiler/roofline.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace peregrine::profiler {

namespace {

// Below this share of its roof a node is limited by its implementation, not by the roof.
// Below this share of its roof a node is called inefficient; at or above kNearRoofPercent it is
// near the roof (a tuned kernel reaches 80-90%), in between it has headroom left.
constexpr double kLowEfficiencyPercent = 50;
constexpr double kNearRoofPercent = 80;

std::string format(const char* fmt, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, a, b, c, d);
  return buf;
}

// "1.2 µs", "340 µs", "12.5 ms".
std::string human_seconds(double s) {
  if (s < 1e-3) return format("%.1f us", s * 1e6);
  if (s < 1) return format("%.2f ms", s * 1e3);
  return format("%.2f s", s);
}

std::string human_count(double v, const char* unit) {
  char buf[64];
  if (v >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2f G%s", v / 1e9, unit);
  else if (v >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2f M%s", v / 1e6, unit);
  else if (v >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1f K%s", v / 1e3, unit);
  else
    std::snprintf(buf, sizeof buf, "%.0f %s", v, unit);
  return buf;
}

}  // namespace

double ridge_intensity(const Roofs& roofs) {
  if (roofs.peak_gflops <= 0 || roofs.bandwidth_gbps <= 0) return 0;
  return roofs.peak_gflops / roofs.bandwidth_gbps;
}

double attainable_gflops(double intensity, const Roofs& roofs) {
  if (intensity <= 0) return 0;
  return std::min(roofs.peak_gflops, intensity * roofs.bandwidth_gbps);
}

RooflinePoint analyze(double flops, double bytes, double seconds, const Roofs& roofs) {
  RooflinePoint p;
  p.flops = std::max(flops, 0.0);
  p.bytes = std::max(bytes, 0.0);
  p.seconds = std::max(seconds, 0.0);
  if (p.flops > 0)
    p.intensity = p.bytes > 0 ? p.flops / p.bytes : std::numeric_limits<double>::infinity();
  if (p.seconds > 0) {
    p.achieved_gflops = p.flops / p.seconds / 1e9;
    p.achieved_gbps = p.bytes / p.seconds / 1e9;
  }
  p.bound_gflops = attainable_gflops(p.intensity, roofs);
  const double compute_s = roofs.peak_gflops > 0 ? p.flops / (roofs.peak_gflops * 1e9) : 0;
  const double memory_s = roofs.bandwidth_gbps > 0 ? p.bytes / (roofs.bandwidth_gbps * 1e9) : 0;
  p.min_seconds = std::max(compute_s, memory_s);
  if (p.seconds > 0) p.percent_of_bound = 100.0 * p.min_seconds / p.seconds;

  const bool no_work = p.flops == 0 && p.bytes == 0;
  if (no_work || p.seconds < kOverheadTimeSeconds || p.min_seconds < kOverheadWorkSeconds)
    p.bound_class = BoundClass::kOverhead;
  else if (p.intensity >= ridge_intensity(roofs))
    p.bound_class = BoundClass::kCompute;
  else
    p.bound_class = BoundClass::kMemory;
  return p;
}

const char* bound_class_name(BoundClass c) {
  switch (c) {
    case BoundClass::kCompute:
      return "compute-bound";
    case BoundClass::kMemory:
      return "memory-bound";
    case BoundClass::kOverhead:
      return "overhead-bound";
  }
  return "?";
}

std::string bottleneck_reason(const RooflinePoint& p, const Roofs& roofs) {
  const double ridge = ridge_intensity(roofs);
  const bool low = p.percent_of_bound < kLowEfficiencyPercent;
  const bool near = p.percent_of_bound >= kNearRoofPercent;
  switch (p.bound_class) {
    case BoundClass::kOverhead:
      return "overhead-bound: " + human_seconds(p.seconds) + " for " +
             human_count(p.flops, "FLOP") + " and " + human_count(p.bytes, "B") +
             " (the roofs allow " + human_seconds(p.min_seconds) +
             "): fixed per-node cost dominates; fuse it or remove it";
    case BoundClass::kCompute: {
      std::string head =
          p.bytes > 0 ? format("compute-bound (%.3g FLOP/B >= ridge %.3g)", p.intensity, ridge)
                      : std::string("compute-bound (no memory traffic)");
      head += format(" at %.1f%% of %.1f GFLOP/s", p.percent_of_bound, roofs.peak_gflops);
      if (low) return head + ": the kernel leaves compute unused (vectorize, block for cache, thread)";
      if (!near) return head + ": headroom left (packing, edge tiles, epilogue, cache blocking)";
      return head + ": near the roof; only fewer FLOPs (another algorithm, lower precision) help";
    }
    case BoundClass::kMemory: {
      std::string head = p.flops > 0
                             ? format("memory-bound (%.3g FLOP/B < ridge %.3g)", p.intensity, ridge)
                             : std::string("memory-bound (data movement only)");
      head += format(" at %.1f%% of %.1f GB/s", p.percent_of_bound, roofs.bandwidth_gbps);
      if (low) return head + ": access pattern or per-element cost limits it, not bandwidth";
      if (!near) return head + ": headroom left (prefetching, wider vectors, fewer passes)";
      return head + ": near the roof; only less traffic (fusion, in-place, smaller types) helps";
    }
  }
  return "";
}

}  // namespace peregrine::profiler
