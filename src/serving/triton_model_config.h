// A Triton Inference Server model configuration as Peregrine's Triton backend reads it: the
// JSON form of config.pbtxt parsed and checked against the ONNX model, completed from the model
// where it leaves inputs, outputs or batching out, and turned into session options. Pure logic,
// no Triton headers: tools/triton/ calls it with the JSON the server hands the backend.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/json_value.h"
#include "peregrine/dtype.h"
#include "peregrine/session.h"
#include "peregrine/status.h"
#include "peregrine/tensor.h"

namespace peregrine::serving {

// Dims as config.pbtxt and Triton's messages write them: "[3,224,224]".
std::string dims_text(const Shape& dims);

// The config's type names ("TYPE_FP32"); "" for dtypes Triton has no name for.
std::string_view triton_config_type(DType dtype);
// The inverse; TYPE_STRING and unknown names are errors naming the tensor.
Expected<DType> dtype_from_triton_config_type(std::string_view name, const std::string& tensor);

struct TritonTensorConfig {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape dims;  // without the batch dim when max_batch_size > 0; -1 for a free dim
};

struct TritonModelConfig {
  std::string name;
  int64_t max_batch_size = 0;  // 0: the model is not batched by Triton
  std::vector<TritonTensorConfig> inputs, outputs;
  std::map<std::string, std::string> parameters;  // each parameter's string_value
  std::string default_model_filename;             // "" -> model.onnx
};

// The model's ONNX file name in its version folder.
inline constexpr const char* kDefaultModelFilename = "model.onnx";
// max_batch_size a completed config gets when the model's inputs and outputs all have a free
// first dim and the config gives none (the backend's default-max-batch-size overrides it).
inline constexpr int64_t kDefaultMaxBatchSize = 8;

Expected<TritonModelConfig> parse_triton_model_config(const Json& config);

// Fills in what the config leaves out and the model determines: inputs and outputs (names,
// types, dims), and, when the config has max_batch_size 0 and every input and output has a free
// first dim, max_batch_size = `default_max_batch_size` with dynamic batching. Entries the config
// has are kept as written (check_triton_model_config judges them). Returns whether it changed
// anything.
Expected<bool> complete_triton_model_config(Json* config, const std::vector<IoInfo>& inputs,
                                            const std::vector<IoInfo>& outputs,
                                            int64_t default_max_batch_size);

// The config against the model: every configured input and output exists with the model's
// dtype and dims (a fixed dim equal, the batch dim free when max_batch_size > 0), and every
// model input is configured. Errors name the tensor and what disagrees.
Status check_triton_model_config(const TritonModelConfig& config, const std::vector<IoInfo>& inputs,
                                 const std::vector<IoInfo>& outputs);

// `text` as an integer in [lo, hi]; the error is "WHAT = 'TEXT': expected an integer in [lo, hi]".
Expected<int64_t> parse_config_int(const std::string& text, const std::string& what, int64_t lo,
                                   int64_t hi);

// Session options from the config's parameters: threads, precision (fp32 | bf16), opt_level,
// memory_limit (bytes). Any other key is an error naming it, so a typo never goes unnoticed.
Expected<SessionOptions> session_options_from_parameters(
    const std::map<std::string, std::string>& parameters);

// Where each request's rows sit in a batch joined along dim 0.
struct BatchLayout {
  int64_t total_rows = 0;
  std::vector<int64_t> row_offset;  // per request
  std::vector<int64_t> rows;        // per request
};

// Requests' shapes of one input, request by request: all of one rank >= 1 and equal past dim 0.
// Errors name the input and the request (by position) that disagrees with the first.
Expected<BatchLayout> plan_batch(const std::string& input, const std::vector<Shape>& shapes);

}  // namespace peregrine::serving
