#include "profiler/trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <sstream>

#include "core/json_text.h"

namespace peregrine::profiler {

std::string trace_to_json(const Trace& trace) {
  std::ostringstream o;
  o << "{\"traceEvents\": [\n";
  bool first = true;
  auto sep = [&]() -> std::ostringstream& {
    o << (first ? "  " : ",\n  ");
    first = false;
    return o;
  };
  sep() << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << trace.pid
        << ", \"tid\": 0, \"args\": {\"name\": " << json_string(trace.process_name) << "}}";
  for (const auto& [tid, name] : trace.threads)
    sep() << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << trace.pid
          << ", \"tid\": " << tid << ", \"args\": {\"name\": " << json_string(name) << "}}";
  for (const TraceEvent& e : trace.events) {
    sep() << "{\"name\": " << json_string(e.name) << ", \"cat\": " << json_string(e.category)
          << ", \"ph\": \"X\", \"ts\": " << json_number(e.ts_us)
          << ", \"dur\": " << json_number(e.dur_us) << ", \"pid\": " << e.pid
          << ", \"tid\": " << e.tid << ", \"args\": {";
    for (size_t k = 0; k < e.args.size(); ++k)
      o << (k ? ", " : "") << json_string(e.args[k].first) << ": " << e.args[k].second;
    o << "}}";
  }
  o << "\n], \"displayTimeUnit\": \"ms\", \"metadata\": {";
  for (size_t k = 0; k < trace.metadata.size(); ++k)
    o << (k ? ", " : "") << json_string(trace.metadata[k].first) << ": "
      << trace.metadata[k].second;
  o << "}}\n";
  return o.str();
}

int64_t current_thread_id() { return static_cast<int64_t>(::syscall(SYS_gettid)); }
int64_t current_process_id() { return static_cast<int64_t>(::getpid()); }

}  // namespace peregrine::profiler
