// libtriton_peregrine.so: Peregrine as a Triton Inference Server backend. A model folder holds
// model.onnx (or the config's default_model_filename) under its version and a config.pbtxt
// naming `backend: "peregrine"`; inputs, outputs and batching are completed from the model.
// Each model instance runs its own session; the instances of a model share packed weights.
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/json_value.h"
#include "peregrine/session.h"
#include "serving/triton_model_config.h"
#include "triton/execute.h"
#include "triton/triton_util.h"

namespace peregrine::triton {
namespace {

struct BackendState {
  int64_t default_max_batch_size = serving::kDefaultMaxBatchSize;
};

// A message's JSON, parsed; the message stays its owner's.
Expected<Json> message_json(TRITONSERVER_Message* message, const std::string& what) {
  const char* text = nullptr;
  size_t size = 0;
  PG_TRITON_RETURN_IF_ERROR(TRITONSERVER_MessageSerializeToJson(message, &text, &size), what);
  return parse_json(std::string(text, size));
}

Expected<Json> read_config(TRITONBACKEND_Model* model) {
  TRITONSERVER_Message* message = nullptr;
  PG_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelConfig(model, 1, &message), "model config");
  auto config = message_json(message, "model config");
  TRITONSERVER_MessageDelete(message);
  return config;
}

Status write_config(TRITONBACKEND_Model* model, const Json& config) {
  std::string text = to_json_text(config);
  TRITONSERVER_Message* message = nullptr;
  PG_TRITON_RETURN_IF_ERROR(
      TRITONSERVER_MessageNewFromSerializedJson(&message, text.data(), text.size()),
      "completed model config");
  Status s = from_triton_error(TRITONBACKEND_ModelSetConfig(model, 1, message),
                               "setting the completed model config");
  TRITONSERVER_MessageDelete(message);
  return s;
}

Expected<std::string> model_file(TRITONBACKEND_Model* model, const serving::TritonModelConfig& c) {
  TRITONBACKEND_ArtifactType type;
  const char* location = nullptr;
  PG_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelRepository(model, &type, &location),
                            "model repository");
  if (type != TRITONBACKEND_ARTIFACT_FILESYSTEM)
    return unsupported("the peregrine backend reads models from a file system repository only");
  uint64_t version = 0;
  PG_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelVersion(model, &version), "model version");
  std::string file =
      c.default_model_filename.empty() ? serving::kDefaultModelFilename : c.default_model_filename;
  if (file.find('/') != std::string::npos || file == "..")
    return invalid_model("model config: default_model_filename '" + file +
                         "' must be a file name in the version folder");
  std::filesystem::path path = std::filesystem::path(location) / std::to_string(version) / file;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return invalid_model("model file " + path.string() + " does not exist");
  return path.string();
}

// Loads the model once, completes and checks the config, and keeps that first session for the
// first instance.
Expected<std::unique_ptr<ModelState>> make_model_state(TRITONBACKEND_Model* model,
                                                       const BackendState& backend) {
  auto state = std::make_unique<ModelState>();
  PG_ASSIGN_OR_RETURN(Json config_json, read_config(model));
  PG_ASSIGN_OR_RETURN(serving::TritonModelConfig config,
                      serving::parse_triton_model_config(config_json));
  PG_ASSIGN_OR_RETURN(state->model_path, model_file(model, config));
  PG_ASSIGN_OR_RETURN(state->options, serving::session_options_from_parameters(config.parameters));
  state->options.kernel_cache = make_kernel_cache();
  // Load errors name the file already.
  auto session = Session::load(state->model_path, state->options);
  if (!session.is_ok()) return session.status();
  const Session& s = **session;

  bool auto_complete = false;
  PG_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelAutoCompleteConfig(model, &auto_complete),
                            "model config");
  if (auto_complete) {
    PG_ASSIGN_OR_RETURN(bool changed,
                        serving::complete_triton_model_config(&config_json, s.inputs(), s.outputs(),
                                                              backend.default_max_batch_size));
    if (changed) {
      // Triton may add fields of its own: the config to hold is the one it gives back.
      PG_RETURN_IF_ERROR(write_config(model, config_json));
      PG_ASSIGN_OR_RETURN(config_json, read_config(model));
      PG_ASSIGN_OR_RETURN(config, serving::parse_triton_model_config(config_json));
    }
  }
  PG_RETURN_IF_ERROR(serving::check_triton_model_config(config, s.inputs(), s.outputs()));
  state->config = std::move(config);
  state->inputs = s.inputs();
  state->outputs = s.outputs();
  state->static_io = state->config.max_batch_size == 0;
  for (const auto* list : {&state->inputs, &state->outputs})
    for (const IoInfo& io : *list) {
      bool is_static = io.is_tensor && dtype_to_triton(io.dtype) != TRITONSERVER_TYPE_INVALID;
      for (int64_t d : io.shape) is_static = is_static && d >= 0;
      state->static_io = state->static_io && is_static;
    }
  state->first_session = std::move(*session);
  return state;
}

Expected<std::unique_ptr<InstanceState>> make_instance_state(TRITONBACKEND_ModelInstance* instance,
                                                             ModelState* model) {
  TRITONSERVER_InstanceGroupKind kind;
  PG_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceKind(instance, &kind), "instance kind");
  if (kind != TRITONSERVER_INSTANCEGROUPKIND_CPU)
    return unsupported("the peregrine backend runs instances of kind KIND_CPU only");
  auto state = std::make_unique<InstanceState>();
  state->model = model;
  {
    std::lock_guard<std::mutex> lock(model->mutex);
    state->session = std::move(model->first_session);
  }
  if (!state->session) {
    auto session = Session::load(model->model_path, model->options);
    if (!session.is_ok()) return session.status();
    state->session = std::move(*session);
  }
  return state;
}

// Runs `body`, turning anything it throws into an internal error rather than letting it cross
// into the server.
template <typename F>
TRITONSERVER_Error* guarded(const char* what, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                                 (std::string(what) + ": " + e.what()).c_str());
  } catch (...) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                                 (std::string(what) + ": unknown exception").c_str());
  }
}

// The backend's own settings, from `--backend-config=peregrine,KEY=VALUE`.
Status read_backend_config(TRITONBACKEND_Backend* backend, BackendState* state) {
  TRITONSERVER_Message* message = nullptr;
  PG_TRITON_RETURN_IF_ERROR(TRITONBACKEND_BackendConfig(backend, &message), "backend config");
  PG_ASSIGN_OR_RETURN(Json config, message_json(message, "backend config"));
  const Json* cmdline = config.get("cmdline");
  if (!cmdline) return Status::ok();
  if (const Json* v = cmdline->get("default-max-batch-size")) {
    if (v->type != Json::Type::kString)
      return invalid_input("backend config: bad default-max-batch-size");
    PG_ASSIGN_OR_RETURN(state->default_max_batch_size,
                        serving::parse_config_int(
                            v->string, "backend config: default-max-batch-size", 0, INT64_MAX));
  }
  return Status::ok();
}

}  // namespace
}  // namespace peregrine::triton

using peregrine::triton::guarded;
using peregrine::triton::to_triton_error;

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  return guarded("peregrine backend", [&]() -> TRITONSERVER_Error* {
    uint32_t major = 0, minor = 0;
    if (TRITONSERVER_Error* e = TRITONBACKEND_ApiVersion(&major, &minor)) return e;
    if (major != TRITONBACKEND_API_VERSION_MAJOR || minor < TRITONBACKEND_API_VERSION_MINOR) {
      std::string message = "the peregrine backend needs Triton's backend API " +
                            std::to_string(TRITONBACKEND_API_VERSION_MAJOR) + "." +
                            std::to_string(TRITONBACKEND_API_VERSION_MINOR) +
                            " or a later minor version; this server has " + std::to_string(major) +
                            "." + std::to_string(minor);
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, message.c_str());
    }
    auto state = std::make_unique<peregrine::triton::BackendState>();
    if (TRITONSERVER_Error* e = to_triton_error(read_backend_config(backend, state.get())))
      return e;
    if (TRITONSERVER_Error* e = TRITONBACKEND_BackendSetState(backend, state.get())) return e;
    static_cast<void>(state.release());  // Triton holds it until Finalize
    return nullptr;
  });
}

TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend) {
  void* state = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_BackendState(backend, &state)) return e;
  delete static_cast<peregrine::triton::BackendState*>(state);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  return guarded("peregrine model", [&]() -> TRITONSERVER_Error* {
    TRITONBACKEND_Backend* backend = nullptr;
    if (TRITONSERVER_Error* e = TRITONBACKEND_ModelBackend(model, &backend)) return e;
    void* backend_state = nullptr;
    if (TRITONSERVER_Error* e = TRITONBACKEND_BackendState(backend, &backend_state)) return e;
    auto state = peregrine::triton::make_model_state(
        model, *static_cast<peregrine::triton::BackendState*>(backend_state));
    if (!state.is_ok()) return to_triton_error(state.status());
    peregrine::triton::log(TRITONSERVER_LOG_INFO,
                           "peregrine: loaded " + (*state)->model_path + " (threads " +
                               std::to_string((*state)->options.num_threads) + ", precision " +
                               peregrine::precision_name((*state)->options.precision) +
                               ", max_batch_size " +
                               std::to_string((*state)->config.max_batch_size) + ")");
    if (TRITONSERVER_Error* e = TRITONBACKEND_ModelSetState(model, state->get())) return e;
    static_cast<void>(state->release());  // Triton holds it until Finalize
    return nullptr;
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  void* state = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelState(model, &state)) return e;
  delete static_cast<peregrine::triton::ModelState*>(state);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  return guarded("peregrine model instance", [&]() -> TRITONSERVER_Error* {
    TRITONBACKEND_Model* model = nullptr;
    if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceModel(instance, &model)) return e;
    void* model_state = nullptr;
    if (TRITONSERVER_Error* e = TRITONBACKEND_ModelState(model, &model_state)) return e;
    auto state = peregrine::triton::make_instance_state(
        instance, static_cast<peregrine::triton::ModelState*>(model_state));
    if (!state.is_ok()) return to_triton_error(state.status());
    if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceSetState(instance, state->get()))
      return e;
    static_cast<void>(state->release());  // Triton holds it until Finalize
    return nullptr;
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  void* state = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceState(instance, &state)) return e;
  delete static_cast<peregrine::triton::InstanceState*>(state);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                       TRITONBACKEND_Request** requests,
                                                       const uint32_t request_count) {
  void* state = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceState(instance, &state)) return e;
  // Every request gets its response (an error one where it failed) and is released inside;
  // what is left to throw is reported without touching the requests again.
  return guarded("peregrine execute", [&]() -> TRITONSERVER_Error* {
    peregrine::triton::execute(instance, *static_cast<peregrine::triton::InstanceState*>(state),
                               requests, request_count);
    return nullptr;
  });
}

}  // extern "C"
