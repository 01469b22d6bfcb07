// What the Triton backend keeps per model and per instance, and how an instance runs a batch of
// requests.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "peregrine/session.h"
#include "serving/triton_model_config.h"
#include "triton/core/tritonbackend.h"

namespace peregrine::triton {

struct ModelState {
  serving::TritonModelConfig config;  // completed and checked against the model
  std::string model_path;
  SessionOptions options;      // from the config's parameters, with a shared kernel cache
  std::vector<IoInfo> inputs;  // the model's graph inputs, in graph order
  std::vector<IoInfo> outputs;  // the model's graph outputs, in graph order
  // Every input and output has a static shape (and a Triton type): unbatched requests then run
  // with Session::run_into, writing straight into the response's buffers.
  bool static_io = false;
  std::mutex mutex;            // guards first_session
  std::unique_ptr<Session> first_session;  // loaded to complete the config; the first instance's
};

struct InstanceState {
  ModelState* model = nullptr;
  std::unique_ptr<Session> session;
};

// Runs `requests`: with max_batch_size > 0 joined along dim 0 into one run, else one run each.
// Every request gets a response (its outputs, or the error that stopped it), its statistics
// and its release; nothing is thrown.
void execute(TRITONBACKEND_ModelInstance* instance, InstanceState& state,
             TRITONBACKEND_Request** requests, uint32_t request_count);

}  // namespace peregrine::triton
