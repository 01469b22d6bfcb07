// Chrome trace-event JSON (the "JSON Object Format"), which Perfetto and
// chrome://tracing load: {"traceEvents": [...], "displayTimeUnit": "ms", ...}.
// Each profiled node is one complete event (ph "X") with ts/dur in microseconds on
// the thread that ran it; process and thread names are metadata events (ph "M").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "peregrine/status.h"

namespace peregrine::profiler {

// One argument of an event: its key and its value already encoded as JSON
// (use json_string / json_number of core/json_text.h to make one).
using TraceArg = std::pair<std::string, std::string>;

struct TraceEvent {
  std::string name;      // node name (any bytes; escaped on output)
  std::string category;  // "node", "run", ...
  double ts_us = 0;      // start, µs since the trace's origin
  double dur_us = 0;
  int64_t pid = 0;
  int64_t tid = 0;  // the OS thread id of the thread that ran it
  std::vector<TraceArg> args;
};

struct Trace {
  int64_t pid = 0;
  std::string process_name;                              // e.g. "peregrine profile model.onnx"
  std::vector<std::pair<int64_t, std::string>> threads;  // tid -> name, for metadata events
  std::vector<TraceEvent> events;
  std::vector<TraceArg> metadata;  // top-level "metadata" object
};

std::string trace_to_json(const Trace& trace);

// The calling thread's OS id (what Perfetto shows as the thread).
int64_t current_thread_id();
int64_t current_process_id();

}  // namespace peregrine::profiler
