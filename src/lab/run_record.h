// One recorded bench or profile run, as stored in the experiment store.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace peregrine {

struct NodeMetrics {
  std::string node;      // node name
  std::string op_type;
  double time_ms = 0;    // median over the profiled runs
  double flops = 0;
  double bytes = 0;
  double time_iqr_ms = 0;  // interquartile range of the node's time; 0 when not measured
};

struct RunRecord {
  int64_t id = 0;                 // assigned by the store
  std::string kind;               // "bench" or "profile"
  std::string timestamp;          // ISO 8601 UTC
  std::string model_path;
  std::string model_sha256;
  std::string input_shapes;       // "data=1x3x224x224;mask=1x128"
  std::string options_json;       // threads, iterations, opt level...
  std::string engine_commit;      // git commit the binary was built from
  std::string build_flags;
  std::string machine_fingerprint;
  std::string machine_json;       // ceilings at record time
  std::map<std::string, double> metrics;  // "latency_median_ms", "latency_p90_ms", ...
  std::vector<double> latencies_ms;       // every measured iteration (for spread)
  std::vector<NodeMetrics> nodes;         // per-node metrics (profile runs)
};

}  // namespace peregrine
