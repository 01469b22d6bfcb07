// The public profiling record: one node's time in a run that asked for timings
// (Session::run_values with `timings`).
#pragma once

#include <cstddef>
#include <string>

namespace peregrine {

struct NodeTiming {
  size_t node = 0;         // the node's index in Session::node_kernels() (the optimized graph)
  double start_us = 0;     // from the run's start
  double duration_us = 0;  // the kernel's wall time
  std::string kernel;      // the kernel that ran it; "reference (fallback of K)" when K handed
                           // the node to the reference kernel
};

}  // namespace peregrine
