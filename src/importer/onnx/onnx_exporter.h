// IR -> ONNX protobuf: writes a (possibly optimized) model as a valid ONNX file.
// Fused ops keep their `peregrine` domain and the domain is imported; every value
// with a known type gets a value_info entry. Initializers are stored inline
// (the 2 GiB protobuf limit applies; external data is not written yet).
#pragma once

#include <string>

#include "ir/graph.h"
#include "peregrine/status.h"

namespace peregrine {

Expected<std::string> serialize_onnx_model(const ir::Model& model);

// Writes to a temporary file next to `path` and renames it into place, so a failed
// write never leaves a half-written model. Refuses to replace an existing file
// unless `overwrite`.
Status save_onnx_model(const ir::Model& model, const std::string& path, bool overwrite);

}  // namespace peregrine
