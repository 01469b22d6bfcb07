// The result of `peregrine profile` — per node, per op type, bottlenecks — and its
// rendering as one self-contained HTML file (inline CSS, SVG and JS; nothing fetched):
// a log-log roofline with one dot per node, a breakdown by op type, the per-node table.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "profiler/roofline.h"

namespace peregrine::profiler {

struct NodeProfile {
  size_t index = 0;          // position among the graph's top-level nodes
  std::string name;          // as in the model: any bytes
  std::string op_type;       // "Conv", "com.microsoft.FusedConv", ...
  std::string kernel;        // the kernel that ran it
  std::string input_shapes;  // "float32[1,3,224,224], float32[64,3,7,7]"
  std::string output_shapes;
  double median_us = 0;  // median over the profiled runs
  double min_us = 0;
  bool cost_known = true;  // false when some static type was unknown: FLOPs/bytes are partial
  RooflinePoint roof;      // from the cost model's FLOPs and bytes and median_us
  std::string reason;      // bottleneck_reason(roof, roofs)
};

struct OpTypeTotal {
  std::string op_type;
  int count = 0;
  double time_us = 0;  // sum of the nodes' medians
  double flops = 0;
  double bytes = 0;
  double percent_of_nodes = 0;  // share of the sum over all nodes
};

struct ProfileReport {
  std::string model_path;
  std::string cpu_model;
  std::string isa;  // ISA level of the peak roof
  int threads = 1;
  int iterations = 0;
  Roofs roofs;
  double latency_median_ms = 0;          // whole runs, with per-node timing on
  double latency_untimed_median_ms = 0;  // whole runs, timing off (0 if not measured)
  std::vector<NodeProfile> nodes;        // graph order
  std::vector<OpTypeTotal> op_totals;    // by time, largest first
  std::vector<size_t> bottlenecks;       // indices into `nodes`, worst first
};

// Sum of the nodes' medians, µs.
double total_node_time_us(const std::vector<NodeProfile>& nodes);
// Per op type, sorted by time (largest first; ties by name).
std::vector<OpTypeTotal> totals_by_op_type(const std::vector<NodeProfile>& nodes);
// The `limit` nodes that take the most time (indices into `nodes`), skipping nodes with none.
std::vector<size_t> top_bottlenecks(const std::vector<NodeProfile>& nodes, size_t limit);

// &, <, >, ", ' as entities; bytes that are not valid UTF-8 become U+FFFD.
std::string html_escape(const std::string& s);
std::string render_html_report(const ProfileReport& report);

}  // namespace peregrine::profiler
