// Profiling a loaded session: a warm-up run, then `iterations` runs with per-node timing
// interleaved with as many without (alternating which goes first, so drift favours neither),
// and per top-level node the median time, the op cost model's FLOPs and bytes at the node's
// static types and the roofline against the machine's roofs. The CLI's `profile` parses flags,
// writes the files and prints.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "peregrine/runtime_value.h"
#include "peregrine/status.h"
#include "profiler/report.h"
#include "profiler/roofline.h"
#include "profiler/trace.h"

namespace peregrine {
class Session;
}

namespace peregrine::profiler {

// The peak of each compute precision a kernel may run at, and the memory roof they share.
struct PrecisionRoofs {
  Roofs fp32, bf16, int8;  // a zero bf16 / int8 peak: nodes of that precision use fp32's
};

struct RunSpan {
  double start_us = 0, dur_us = 0;  // since the first profiled run's start
};

struct SessionProfile {
  ProfileReport report;  // nodes, totals, bottlenecks, latencies (model / machine fields unset)
  std::vector<double> timed_ms;                        // each profiled run's latency
  std::vector<std::vector<double>> node_samples_us;    // by graph node index
  std::vector<RunSpan> run_spans;                      // the profiled runs
  std::vector<std::pair<size_t, RunSpan>> node_spans;  // (graph node index, span)
  int64_t pid = 0, tid = 0;                            // where the runs ran
  // How much slower a run is with per-node timing on, percent of the untimed median.
  double overhead_percent = 0;
};

Expected<SessionProfile> profile_session(Session& session,
                                         const std::map<std::string, RuntimeValue>& inputs,
                                         int iterations, const PrecisionRoofs& roofs,
                                         size_t bottleneck_count);

// The profiled runs and their nodes as trace events (one thread, "executor").
Trace session_trace(const SessionProfile& profile, const std::string& process_name,
                    std::vector<TraceArg> metadata);

}  // namespace peregrine::profiler
