#include "serving/triton_model_config.h"

#include <charconv>
#include <cmath>
#include <set>

namespace peregrine::serving {

namespace {

struct TypeName {
  DType dtype;
  const char* name;
};

// Triton's data types with a Peregrine dtype (TYPE_STRING has none: strings are not batched
// through this backend).
constexpr TypeName kTypeNames[] = {
    {DType::kBool, "TYPE_BOOL"},     {DType::kUInt8, "TYPE_UINT8"},
    {DType::kUInt16, "TYPE_UINT16"}, {DType::kUInt32, "TYPE_UINT32"},
    {DType::kUInt64, "TYPE_UINT64"}, {DType::kInt8, "TYPE_INT8"},
    {DType::kInt16, "TYPE_INT16"},   {DType::kInt32, "TYPE_INT32"},
    {DType::kInt64, "TYPE_INT64"},   {DType::kFloat16, "TYPE_FP16"},
    {DType::kFloat32, "TYPE_FP32"},  {DType::kFloat64, "TYPE_FP64"},
    {DType::kBFloat16, "TYPE_BF16"},
};

// An int64 the config holds as a JSON number or, as protobuf's JSON mapping writes int64, a
// string of digits.
Expected<int64_t> read_int(const Json& v, const std::string& what) {
  if (v.type == Json::Type::kNumber) {
    if (v.number != std::floor(v.number) || std::fabs(v.number) > 9.0e15)
      return invalid_model(what + " is not an integer");
    return static_cast<int64_t>(v.number);
  }
  if (v.type == Json::Type::kString) {
    int64_t x = 0;
    const char* end = v.string.data() + v.string.size();
    auto r = std::from_chars(v.string.data(), end, x);
    if (r.ec == std::errc() && r.ptr == end && !v.string.empty()) return x;
  }
  return invalid_model(what + " is not an integer");
}

Expected<std::vector<TritonTensorConfig>> read_tensors(const Json& config, const char* key) {
  std::vector<TritonTensorConfig> out;
  const Json* list = config.get(key);
  if (!list) return out;
  if (!list->is_array())
    return invalid_model(std::string("model config: '") + key + "' is not a list");
  for (const Json& entry : list->array) {
    TritonTensorConfig t;
    const Json* name = entry.get("name");
    if (!name || name->type != Json::Type::kString || name->string.empty())
      return invalid_model(std::string("model config: an entry of '") + key + "' has no name");
    t.name = name->string;
    std::string what = std::string("model config: ") + key + " '" + t.name + "'";
    const Json* type = entry.get("data_type");
    if (!type || type->type != Json::Type::kString)
      return invalid_model(what + " has no data_type");
    PG_ASSIGN_OR_RETURN(t.dtype, dtype_from_triton_config_type(type->string, what));
    if (const Json* dims = entry.get("dims")) {
      if (!dims->is_array()) return invalid_model(what + ": dims is not a list");
      for (const Json& d : dims->array) {
        PG_ASSIGN_OR_RETURN(int64_t v, read_int(d, what + ": a dim"));
        if (v < -1) return invalid_model(what + ": dim " + std::to_string(v) + " is below -1");
        t.dims.push_back(v);
      }
    }
    if (const Json* reshape = entry.get("reshape"); reshape && reshape->get("shape"))
      return unsupported(what + ": 'reshape' is not supported by the peregrine backend");
    out.push_back(std::move(t));
  }
  return out;
}

Json tensor_entry(const IoInfo& io, bool batched) {
  Json e = Json::make_object();
  e.set("name", Json::make_string(io.name));
  e.set("data_type", Json::make_string(std::string(triton_config_type(io.dtype))));
  Json dims = Json::make_array();
  for (size_t i = batched ? 1 : 0; i < io.shape.size(); ++i)
    dims.array.push_back(Json::make_number(static_cast<double>(io.shape[i])));
  e.set("dims", std::move(dims));
  return e;
}

bool has_free_first_dim(const IoInfo& io) {
  return io.is_tensor && !io.shape.empty() && io.shape[0] < 0;
}

bool listed(const Json& config, const char* key) {
  const Json* list = config.get(key);
  return list && list->is_array() && !list->array.empty();
}

Status check_tensor(const TritonTensorConfig& t, const IoInfo& io, bool batched, const char* kind) {
  std::string what = std::string("model config: ") + kind + " '" + t.name + "'";
  if (!io.is_tensor) return unsupported(what + " is a " + io.type + ", not a tensor");
  if (t.dtype != io.dtype)
    return invalid_model(what + " has data_type " + std::string(triton_config_type(t.dtype)) +
                         " but the model's is " + std::string(dtype_name(io.dtype)));
  Shape model_dims = io.shape;
  if (batched) {
    if (model_dims.empty() || model_dims[0] >= 0)
      return invalid_model(what +
                           ": max_batch_size > 0 needs a free first dim, but the model's "
                           "shape is " +
                           dims_text(io.shape));
    model_dims.erase(model_dims.begin());
  }
  if (t.dims.size() != model_dims.size())
    return invalid_model(what + " has dims " + dims_text(t.dims) + " but the model's are " +
                         dims_text(model_dims) + (batched ? " (past the batch dim)" : ""));
  for (size_t i = 0; i < t.dims.size(); ++i) {
    if (model_dims[i] >= 0 && t.dims[i] != model_dims[i])
      return invalid_model(what + " has dims " + dims_text(t.dims) + " but the model's are " +
                           dims_text(model_dims) + (batched ? " (past the batch dim)" : ""));
  }
  return Status::ok();
}

}  // namespace

std::string dims_text(const Shape& dims) {
  std::string t = "[";
  for (size_t i = 0; i < dims.size(); ++i) t += (i ? "," : "") + std::to_string(dims[i]);
  return t + "]";
}

std::string_view triton_config_type(DType dtype) {
  for (const TypeName& t : kTypeNames)
    if (t.dtype == dtype) return t.name;
  return "";
}

Expected<DType> dtype_from_triton_config_type(std::string_view name, const std::string& tensor) {
  for (const TypeName& t : kTypeNames)
    if (name == t.name) return t.dtype;
  return unsupported(tensor + ": data_type " + std::string(name) +
                     " is not supported by the peregrine backend");
}

Expected<TritonModelConfig> parse_triton_model_config(const Json& config) {
  if (!config.is_object()) return invalid_model("model config: not a JSON object");
  TritonModelConfig c;
  if (const Json* name = config.get("name"); name && name->type == Json::Type::kString)
    c.name = name->string;
  if (const Json* mbs = config.get("max_batch_size")) {
    PG_ASSIGN_OR_RETURN(c.max_batch_size, read_int(*mbs, "model config: max_batch_size"));
    if (c.max_batch_size < 0) return invalid_model("model config: max_batch_size is negative");
  }
  PG_ASSIGN_OR_RETURN(c.inputs, read_tensors(config, "input"));
  PG_ASSIGN_OR_RETURN(c.outputs, read_tensors(config, "output"));
  if (const Json* params = config.get("parameters")) {
    if (!params->is_object()) return invalid_model("model config: 'parameters' is not a map");
    for (size_t i = 0; i < params->keys.size(); ++i) {
      const Json* value = params->values[i].get("string_value");
      if (!value || value->type != Json::Type::kString)
        return invalid_model("model config: parameter '" + params->keys[i] +
                             "' has no string_value");
      c.parameters[params->keys[i]] = value->string;
    }
  }
  if (const Json* f = config.get("default_model_filename"); f && f->type == Json::Type::kString)
    c.default_model_filename = f->string;
  return c;
}

Expected<bool> complete_triton_model_config(Json* config, const std::vector<IoInfo>& inputs,
                                            const std::vector<IoInfo>& outputs,
                                            int64_t default_max_batch_size) {
  if (!config->is_object()) return invalid_model("model config: not a JSON object");
  bool changed = false;
  int64_t max_batch_size = 0;
  if (const Json* mbs = config->get("max_batch_size")) {
    PG_ASSIGN_OR_RETURN(max_batch_size, read_int(*mbs, "model config: max_batch_size"));
  }
  bool batchable = !inputs.empty() && !outputs.empty();
  for (const auto* list : {&inputs, &outputs})
    for (const IoInfo& io : *list) batchable = batchable && has_free_first_dim(io);
  // Only a config that lists no tensors gets batching added: listed dims were written for the
  // batching the config already states.
  if (max_batch_size == 0 && batchable && default_max_batch_size > 0 && !listed(*config, "input") &&
      !listed(*config, "output")) {
    max_batch_size = default_max_batch_size;
    config->set("max_batch_size", Json::make_number(static_cast<double>(max_batch_size)));
    if (!config->get("dynamic_batching") && !config->get("sequence_batching"))
      config->set("dynamic_batching", Json::make_object());
    changed = true;
  }
  for (const auto& [key, list] : {std::pair{"input", &inputs}, std::pair{"output", &outputs}}) {
    if (listed(*config, key)) continue;
    Json entries = Json::make_array();
    for (const IoInfo& io : *list) {
      if (!io.is_tensor || triton_config_type(io.dtype).empty())
        return unsupported(std::string("model ") + key + " '" + io.name + "' of type " + io.type +
                           " has no Triton data type the peregrine backend serves");
      entries.array.push_back(tensor_entry(io, max_batch_size > 0));
    }
    config->set(key, std::move(entries));
    changed = true;
  }
  return changed;
}

Status check_triton_model_config(const TritonModelConfig& config, const std::vector<IoInfo>& inputs,
                                 const std::vector<IoInfo>& outputs) {
  bool batched = config.max_batch_size > 0;
  auto find = [](const std::vector<IoInfo>& list, const std::string& name) -> const IoInfo* {
    for (const IoInfo& io : list)
      if (io.name == name) return &io;
    return nullptr;
  };
  std::set<std::string> configured;
  for (const TritonTensorConfig& t : config.inputs) {
    const IoInfo* io = find(inputs, t.name);
    if (!io)
      return invalid_model("model config: input '" + t.name + "' is not an input of the model");
    PG_RETURN_IF_ERROR(check_tensor(t, *io, batched, "input"));
    configured.insert(t.name);
  }
  for (const IoInfo& io : inputs)
    if (!configured.count(io.name))
      return invalid_model("model config: the model's input '" + io.name + "' is not configured");
  for (const TritonTensorConfig& t : config.outputs) {
    const IoInfo* io = find(outputs, t.name);
    if (!io)
      return invalid_model("model config: output '" + t.name + "' is not an output of the model");
    PG_RETURN_IF_ERROR(check_tensor(t, *io, batched, "output"));
  }
  return Status::ok();
}

Expected<int64_t> parse_config_int(const std::string& text, const std::string& what, int64_t lo,
                                   int64_t hi) {
  int64_t x = 0;
  const char* end = text.data() + text.size();
  auto r = std::from_chars(text.data(), end, x);
  if (r.ec != std::errc() || r.ptr != end || text.empty() || x < lo || x > hi)
    return invalid_model(what + " = '" + text + "': expected an integer in [" + std::to_string(lo) +
                         ", " + std::to_string(hi) + "]");
  return x;
}

Expected<SessionOptions> session_options_from_parameters(
    const std::map<std::string, std::string>& parameters) {
  SessionOptions options;
  for (const auto& [key, value] : parameters) {
    const std::string what = "model config: parameter " + key;
    if (key == "threads") {
      PG_ASSIGN_OR_RETURN(int64_t t, parse_config_int(value, what, 1, 1024));
      options.num_threads = static_cast<int>(t);
    } else if (key == "opt_level") {
      PG_ASSIGN_OR_RETURN(int64_t level, parse_config_int(value, what, 0, 3));
      options.opt_level = static_cast<int>(level);
    } else if (key == "memory_limit") {
      PG_ASSIGN_OR_RETURN(options.memory_limit_bytes, parse_config_int(value, what, -1, INT64_MAX));
    } else if (key == "precision") {
      auto p = parse_precision(value);
      if (!p.is_ok()) return p.status().with_context("model config: parameter precision");
      options.precision = *p;
    } else {
      return invalid_model("model config: unknown parameter '" + key +
                           "' (the peregrine backend takes threads, precision, opt_level, "
                           "memory_limit)");
    }
  }
  return options;
}

Expected<BatchLayout> plan_batch(const std::string& input, const std::vector<Shape>& shapes) {
  BatchLayout layout;
  for (size_t r = 0; r < shapes.size(); ++r) {
    const Shape& s = shapes[r];
    if (s.empty())
      return invalid_input("input '" + input + "' of request " + std::to_string(r) +
                           " has no batch dim");
    if (s.size() != shapes[0].size() || !std::equal(s.begin() + 1, s.end(), shapes[0].begin() + 1))
      return invalid_input("input '" + input + "' of request " + std::to_string(r) + " has shape " +
                           dims_text(s) + ", which cannot join request 0's " +
                           dims_text(shapes[0]) + " in a batch");
    if (s[0] < 0) return invalid_input("input '" + input + "' has a negative batch dim");
    layout.row_offset.push_back(layout.total_rows);
    layout.rows.push_back(s[0]);
    layout.total_rows += s[0];
  }
  return layout;
}

}  // namespace peregrine::serving
