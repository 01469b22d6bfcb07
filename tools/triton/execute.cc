#include "triton/execute.h"

#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/checked_math.h"
#include "serving/triton_model_config.h"
#include "triton/triton_util.h"

namespace peregrine::triton {
namespace {

// One request's value of one input, in the buffers Triton holds it in (host memory).
struct RequestInput {
  Shape shape;
  std::vector<std::pair<const char*, uint64_t>> buffers;
  uint64_t byte_size = 0;
};

Expected<RequestInput> read_input(TRITONBACKEND_Request* request, const IoInfo& io) {
  TRITONBACKEND_Input* input = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_RequestInput(request, io.name.c_str(), &input)) {
    TRITONSERVER_ErrorDelete(e);
    return invalid_input("the request has no input '" + io.name + "'");
  }
  const char* name = nullptr;
  TRITONSERVER_DataType datatype;
  const int64_t* dims = nullptr;
  uint32_t rank = 0, buffer_count = 0;
  RequestInput in;
  PG_TRITON_RETURN_IF_ERROR(TRITONBACKEND_InputProperties(input, &name, &datatype, &dims, &rank,
                                                          &in.byte_size, &buffer_count),
                            "input '" + io.name + "'");
  in.shape.assign(dims, dims + rank);
  if (dtype_from_triton(datatype) != io.dtype)
    return invalid_input("input '" + io.name + "' has data type " +
                         TRITONSERVER_DataTypeString(datatype) + " but the model takes " +
                         std::string(dtype_name(io.dtype)));
  const std::optional<int64_t> numel = checked_product(in.shape);
  if (!numel)
    return invalid_input("input '" + io.name + "' has shape " + serving::dims_text(in.shape));
  const uint64_t needed = static_cast<uint64_t>(*numel) * dtype_size(io.dtype);
  if (needed != in.byte_size)
    return invalid_input("input '" + io.name + "' holds " + std::to_string(in.byte_size) +
                         " bytes where shape " + serving::dims_text(in.shape) + " needs " +
                         std::to_string(needed));
  for (uint32_t b = 0; b < buffer_count; ++b) {
    const void* data = nullptr;
    uint64_t size = 0;
    TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
    int64_t memory_id = 0;
    PG_TRITON_RETURN_IF_ERROR(
        TRITONBACKEND_InputBuffer(input, b, &data, &size, &memory_type, &memory_id),
        "input '" + io.name + "'");
    if (memory_type == TRITONSERVER_MEMORY_GPU)
      return unsupported("input '" + io.name +
                         "' is in GPU memory; the peregrine backend reads "
                         "host memory only");
    in.buffers.emplace_back(static_cast<const char*>(data), size);
  }
  return in;
}

// The requests' values of one input joined along dim 0 into `total_rows` rows (a batch the
// caller planned), or, with total_rows < 0, the one request's value: a view of Triton's buffer
// where it is a single one, else a copy.
Expected<Tensor> join_input(const IoInfo& io, const std::vector<RequestInput>& parts,
                            int64_t total_rows) {
  if (parts.size() == 1 && parts[0].buffers.size() == 1)
    return Tensor::view(io.dtype, parts[0].shape, const_cast<char*>(parts[0].buffers[0].first));
  Shape shape = parts[0].shape;
  if (total_rows >= 0) shape[0] = total_rows;
  PG_ASSIGN_OR_RETURN(Tensor joined, Tensor::make(io.dtype, shape));
  char* out = static_cast<char*>(joined.raw());
  for (const RequestInput& p : parts)
    for (const auto& [data, size] : p.buffers) {
      std::memcpy(out, data, size);
      out += size;
    }
  return joined;
}

// The names of the outputs a request asks for.
Expected<std::vector<std::string>> requested_outputs(TRITONBACKEND_Request* request) {
  uint32_t count = 0;
  PG_TRITON_RETURN_IF_ERROR(TRITONBACKEND_RequestOutputCount(request, &count), "outputs");
  std::vector<std::string> names;
  names.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    PG_TRITON_RETURN_IF_ERROR(TRITONBACKEND_RequestOutputName(request, i, &name), "outputs");
    names.emplace_back(name);
  }
  return names;
}

// Adds output `name` of `dtype` and `shape` to the response; Triton's host buffer of `bytes`
// for its data.
Expected<void*> add_response_output(TRITONBACKEND_Response* response, const std::string& name,
                                    DType dtype, const Shape& shape, size_t bytes) {
  const TRITONSERVER_DataType type = dtype_to_triton(dtype);
  if (type == TRITONSERVER_TYPE_INVALID)
    return unsupported("output '" + name + "' of type " + std::string(dtype_name(dtype)) +
                       " has no Triton data type");
  TRITONBACKEND_Output* output = nullptr;
  PG_TRITON_RETURN_IF_ERROR(
      TRITONBACKEND_ResponseOutput(response, &output, name.c_str(), type, shape.data(),
                                   static_cast<uint32_t>(shape.size())),
      "output '" + name + "'");
  void* buffer = nullptr;
  TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
  int64_t memory_id = 0;
  PG_TRITON_RETURN_IF_ERROR(
      TRITONBACKEND_OutputBuffer(output, &buffer, bytes, &memory_type, &memory_id),
      "output '" + name + "'");
  if (memory_type == TRITONSERVER_MEMORY_GPU)
    return unsupported("output '" + name + "': Triton gave a GPU buffer");
  return buffer;
}

// Sends one request's response: the outputs it asked for, rows [row, row + rows) of each
// (the whole tensor when not batched), or the error that stopped them. `*sent`: whether a
// response went out.
Status send_outputs(TRITONBACKEND_Request* request, const std::map<std::string, Tensor>& outputs,
                    bool batched, int64_t row, int64_t rows, int64_t total_rows, bool* sent) {
  TRITONBACKEND_Response* response = nullptr;
  PG_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ResponseNew(&response, request), "response");
  auto fill = [&]() -> Status {
    PG_ASSIGN_OR_RETURN(std::vector<std::string> names, requested_outputs(request));
    for (const std::string& name : names) {
      auto it = outputs.find(name);
      if (it == outputs.end()) return invalid_input("the model has no output '" + name + "'");
      const Tensor& t = it->second;
      Shape shape = t.shape();
      size_t offset = 0, bytes = t.nbytes();
      if (batched) {
        if (shape.empty() || shape[0] != total_rows)
          return internal_error("output '" + name + "' has shape " + serving::dims_text(shape) +
                                " for a batch of " + std::to_string(total_rows) + " rows");
        size_t row_bytes = total_rows ? t.nbytes() / static_cast<size_t>(total_rows) : 0;
        shape[0] = rows;
        offset = row_bytes * static_cast<size_t>(row);
        bytes = row_bytes * static_cast<size_t>(rows);
      }
      PG_ASSIGN_OR_RETURN(void* buffer,
                          add_response_output(response, name, t.dtype(), shape, bytes));
      if (bytes) std::memcpy(buffer, static_cast<const char*>(t.raw()) + offset, bytes);
    }
    return Status::ok();
  };
  Status s = fill();
  *sent = true;
  TRITONSERVER_Error* send = TRITONBACKEND_ResponseSend(
      response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, to_triton_error(s));
  if (send) return from_triton_error(send, "sending the response");
  return s;
}

void send_error(TRITONBACKEND_Request* request, const Status& error) {
  TRITONBACKEND_Response* response = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ResponseNew(&response, request)) {
    log(TRITONSERVER_LOG_ERROR, std::string("peregrine: no response for a failed request: ") +
                                    TRITONSERVER_ErrorMessage(e) + " (" + error.message() + ")");
    TRITONSERVER_ErrorDelete(e);
    return;
  }
  TRITONSERVER_Error* e = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                                                     to_triton_error(error));
  if (e) TRITONSERVER_ErrorDelete(e);
}

void report_and_release(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request* request,
                        bool success, uint64_t exec_start, uint64_t compute_start,
                        uint64_t compute_end) {
  uint64_t exec_end = now_ns();
  if (!compute_start) compute_start = compute_end = exec_end;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceReportStatistics(
          instance, request, success, exec_start, compute_start, compute_end, exec_end))
    TRITONSERVER_ErrorDelete(e);
  if (TRITONSERVER_Error* e =
          TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL))
    TRITONSERVER_ErrorDelete(e);
}

// Triton's statistics of one execution of `batch_size` rows (after a run that happened).
void report_batch(TRITONBACKEND_ModelInstance* instance, int64_t batch_size, uint64_t exec_start,
                  uint64_t compute_start, uint64_t compute_end) {
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceReportBatchStatistics(
          instance, static_cast<uint64_t>(batch_size), exec_start, compute_start, compute_end,
          now_ns()))
    TRITONSERVER_ErrorDelete(e);
}

// One run over `batch` (requests joined along dim 0 when `batched`): responses sent, statistics
// reported, requests released.
void run_batch(TRITONBACKEND_ModelInstance* instance, InstanceState& state,
               const std::vector<TRITONBACKEND_Request*>& batch, bool batched) {
  uint64_t exec_start = now_ns(), compute_start = 0, compute_end = 0;
  std::vector<Status> results(batch.size());
  std::vector<char> sent(batch.size(), 0);
  std::vector<int64_t> rows(batch.size(), 1), offsets(batch.size(), 0);
  auto fail_all = [&](const Status& s) {
    for (Status& r : results) r = s;
  };
  try {
    std::map<std::string, Tensor> inputs;
    Status status;
    for (const IoInfo& io : state.model->inputs) {
      std::vector<RequestInput> parts;
      for (TRITONBACKEND_Request* request : batch) {
        auto in = read_input(request, io);
        if (!in.is_ok()) {
          status = in.status();
          break;
        }
        parts.push_back(std::move(*in));
      }
      if (!status.is_ok()) break;
      int64_t total_rows = -1;
      if (batched) {
        std::vector<Shape> shapes;
        shapes.reserve(parts.size());
        for (const RequestInput& p : parts) shapes.push_back(p.shape);
        auto layout = serving::plan_batch(io.name, shapes);
        if (!layout.is_ok()) {
          status = layout.status();
          break;
        }
        rows = layout->rows;
        offsets = layout->row_offset;
        total_rows = layout->total_rows;
      }
      auto joined = join_input(io, parts, total_rows);
      if (!joined.is_ok()) {
        status = joined.status();
        break;
      }
      inputs.emplace(io.name, std::move(*joined));
    }
    if (status.is_ok()) {
      compute_start = now_ns();
      auto outputs = state.session->run(inputs);
      compute_end = now_ns();
      if (!outputs.is_ok()) {
        fail_all(outputs.status());
      } else {
        int64_t total_rows = offsets.back() + rows.back();
        for (size_t r = 0; r < batch.size(); ++r) {
          bool request_sent = false;
          results[r] = send_outputs(batch[r], *outputs, batched, offsets[r], rows[r], total_rows,
                                    &request_sent);
          sent[r] = request_sent;
        }
      }
    } else {
      fail_all(status);
    }
  } catch (const std::exception& e) {
    fail_all(internal_error(std::string("peregrine backend: ") + e.what()));
  } catch (...) {
    fail_all(internal_error("peregrine backend: unknown exception"));
  }
  // Requests whose response has not gone out get their error now.
  for (size_t r = 0; r < batch.size(); ++r) {
    if (!sent[r]) send_error(batch[r], results[r]);
    report_and_release(instance, batch[r], results[r].is_ok(), exec_start, compute_start,
                       compute_end);
  }
  if (compute_end != 0) {
    int64_t batch_size = 0;
    for (int64_t r : rows) batch_size += r;
    report_batch(instance, batch_size, exec_start, compute_start, compute_end);
  }
}

// An unbatched request of a model with static shapes: the response's output buffers are made
// first and the session writes into them (outputs the request does not ask for go to scratch
// tensors). Responds, reports and releases like run_batch.
void run_static_request(TRITONBACKEND_ModelInstance* instance, InstanceState& state,
                        TRITONBACKEND_Request* request) {
  uint64_t exec_start = now_ns(), compute_start = 0, compute_end = 0;
  TRITONBACKEND_Response* response = nullptr;
  Status status = from_triton_error(TRITONBACKEND_ResponseNew(&response, request), "response");
  try {
    std::vector<Tensor> inputs;
    for (const IoInfo& io : state.model->inputs) {
      if (!status.is_ok()) break;
      auto in = read_input(request, io);
      if (!in.is_ok()) {
        status = in.status();
        break;
      }
      auto joined = join_input(io, {std::move(*in)}, -1);
      if (!joined.is_ok()) {
        status = joined.status();
        break;
      }
      inputs.push_back(std::move(*joined));
    }
    std::set<std::string> requested;
    if (status.is_ok()) {
      auto names = requested_outputs(request);
      if (names.is_ok()) requested.insert(names->begin(), names->end());
      if (!names.is_ok()) status = names.status();
    }
    std::vector<Tensor> outputs;
    for (const IoInfo& io : state.model->outputs) {
      if (!status.is_ok()) break;
      if (!requested.erase(io.name)) {
        auto scratch = Tensor::make(io.dtype, io.shape);
        if (!scratch.is_ok()) status = scratch.status();
        if (scratch.is_ok()) outputs.push_back(std::move(*scratch));
        continue;
      }
      // Static shapes: the session checked the element count when the model loaded.
      const size_t bytes = static_cast<size_t>(*checked_product(io.shape)) * dtype_size(io.dtype);
      auto buffer = add_response_output(response, io.name, io.dtype, io.shape, bytes);
      if (!buffer.is_ok()) status = buffer.status();
      if (buffer.is_ok()) outputs.push_back(Tensor::view(io.dtype, io.shape, *buffer));
    }
    if (status.is_ok() && !requested.empty())
      status = invalid_input("the model has no output '" + *requested.begin() + "'");
    if (status.is_ok()) {
      compute_start = now_ns();
      status = state.session->run_into(inputs, outputs);
      compute_end = now_ns();
    }
  } catch (const std::exception& e) {
    status = internal_error(std::string("peregrine backend: ") + e.what());
  } catch (...) {
    status = internal_error("peregrine backend: unknown exception");
  }
  if (response) {
    TRITONSERVER_Error* e = TRITONBACKEND_ResponseSend(
        response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, to_triton_error(status));
    if (e) TRITONSERVER_ErrorDelete(e);
  } else {
    send_error(request, status);
  }
  report_and_release(instance, request, status.is_ok(), exec_start, compute_start, compute_end);
  if (compute_end != 0) report_batch(instance, 1, exec_start, compute_start, compute_end);
}

}  // namespace

void execute(TRITONBACKEND_ModelInstance* instance, InstanceState& state,
             TRITONBACKEND_Request** requests, uint32_t request_count) {
  std::vector<TRITONBACKEND_Request*> all(requests, requests + request_count);
  if (state.model->config.max_batch_size > 0) {
    run_batch(instance, state, all, /*batched=*/true);
    return;
  }
  for (TRITONBACKEND_Request* request : all) {
    if (state.model->static_io) {
      run_static_request(instance, state, request);
    } else {
      run_batch(instance, state, {request}, false);
    }
  }
}

}  // namespace peregrine::triton
