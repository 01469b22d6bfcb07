// The default-domain opsets this build understands: what the importer accepts and what the op
// schemas and kernels are written against (the newest is that of the pinned onnx).
#pragma once

namespace peregrine {

inline constexpr int kMaxOnnxOpset = 28;
inline constexpr int kMinOnnxOpset = 1;

}  // namespace peregrine
