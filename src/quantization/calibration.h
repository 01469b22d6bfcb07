// Calibration for post-training static quantization: run the float model over sample inputs and
// record, per activation tensor, the range its 8-bit grid should cover.
//
//   minmax      the smallest and largest value seen over all samples;
//   percentile  the values at the p-th and (100 - p)-th percentiles of all samples (a histogram
//               of 2048 bins over the min-max range), so rare outliers do not stretch the grid;
//   entropy     the threshold T of |x| whose 128-level quantization of the |x| histogram keeps
//               the distribution closest in KL divergence (the method TensorRT made common);
//               the range is [0, T] for tensors that are never negative, else [-T, T].
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "peregrine/status.h"
#include "peregrine/tensor.h"

namespace peregrine::quantization {

enum class CalibrationMethod { kMinMax, kPercentile, kEntropy };

Expected<CalibrationMethod> parse_calibration_method(const std::string& text);

struct Range {
  float min = 0;
  float max = 0;
};

struct CalibrationOptions {
  CalibrationMethod method = CalibrationMethod::kMinMax;
  double percentile = 99.999;  // for kPercentile
  int num_threads = 1;
};

// Runs `model` (consumed: its outputs are extended with the tensors to observe) once per sample,
// two passes for the histogram methods. `tensors`: float32 values of the top-level graph (graph
// inputs included). Every sample holds every graph input.
Expected<std::map<std::string, Range>> calibrate(ir::Model&& model,
                                                 const std::vector<std::string>& tensors,
                                                 const std::vector<std::map<std::string, Tensor>>& samples,
                                                 const CalibrationOptions& options);

// The range a histogram method picks from the values' histogram: `bins` counts over
// [lo, hi] in equal bins (exposed for tests).
Range percentile_range(const std::vector<double>& bins, float lo, float hi, double percentile);
Range entropy_range(const std::vector<double>& abs_bins, float abs_max, bool never_negative);

}  // namespace peregrine::quantization
