// The compute precision a session runs its GEMM-class nodes at. float32 is the default and
// nothing changes it silently: bf16 is an explicit choice (SessionOptions::precision,
// `--precision bf16`), assigned per node by passes/assign_precision.h.
#pragma once

#include <string>

#include "peregrine/status.h"

namespace peregrine {

enum class Precision {
  kFloat32,   // "fp32"
  kBFloat16,  // "bf16": operands rounded to bfloat16, products summed in float32
};

const char* precision_name(Precision p);
// "fp32" / "bf16"; "fp16" and "int8" are named as not available yet; anything else an error.
Expected<Precision> parse_precision(const std::string& text);

}  // namespace peregrine
