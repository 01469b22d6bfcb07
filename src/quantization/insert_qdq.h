// Post-training static quantization's rewrite: a float model into the standard QDQ form that
// ONNX Runtime's quantize_static writes, which ONNX Runtime, OpenVINO and Peregrine's QDQ passes
// (docs/DESIGN.md, "Quantized (QDQ) models") all run on int8 kernels.
//
// Quantized: Conv (2-D, constant weights and bias), MatMul and Gemm with a constant 2-D weight
// (Gemm: transA = 0, alpha = beta = 1, a bias of one value per output column), and Add of two
// activations of one shape (residual connections). Each such node's activation inputs and its
// output (or the output of the Relu that alone reads it) get a QuantizeLinear / DequantizeLinear
// pair: uint8, asymmetric, the scale and zero point from the calibrated range (widened to hold
// 0). Weights become int8 initializers, symmetric (zero point 0, range +-127), per output channel
// unless per_channel is off, read through a DequantizeLinear; a bias becomes int32 at scale
// x_scale * w_scale. A tensor is quantized once and every reader sees the dequantized values.
// Needs default-domain opset 13 or newer (per-axis DequantizeLinear).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "peregrine/status.h"
#include "quantization/calibration.h"

namespace peregrine::quantization {

struct QuantizeOptions {
  bool per_channel = true;
  std::vector<std::string> exclude;  // node names or op types left in float32
};

struct QuantizationPlan {
  std::vector<size_t> nodes;             // indices into graph.nodes of the nodes to quantize
  std::vector<std::string> activations;  // tensors to calibrate and quantize, in graph order
  std::vector<std::string> skipped;      // "node 'x' (Conv): why it stays float32"
};

// Chooses the nodes and tensors (the graph's types must be inferred).
Expected<QuantizationPlan> plan_quantization(const ir::Graph& graph, const QuantizeOptions& options);

// Rewrites `graph` (the same graph the plan was made on) with the calibrated ranges; nodes are
// re-sorted after.
Status insert_qdq(ir::Graph& graph, const QuantizationPlan& plan,
                  const std::map<std::string, Range>& ranges, const QuantizeOptions& options);

}  // namespace peregrine::quantization
