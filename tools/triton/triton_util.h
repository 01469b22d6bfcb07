// Shared pieces of the Triton backend: Status <-> TRITONSERVER_Error, data types, logging.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "peregrine/dtype.h"
#include "peregrine/status.h"
#include "triton/core/tritonbackend.h"
#include "triton/core/tritonserver.h"

namespace peregrine::triton {

// A Status as Triton's error: bad models, inputs and unsupported ops are the caller's
// (INVALID_ARG / UNSUPPORTED), internal errors ours. nullptr for ok.
inline TRITONSERVER_Error* to_triton_error(const Status& s) {
  if (s.is_ok()) return nullptr;
  TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL;
  switch (s.code()) {
    case StatusCode::kInvalidModel:
    case StatusCode::kInvalidInput:
      code = TRITONSERVER_ERROR_INVALID_ARG;
      break;
    case StatusCode::kUnsupported:
      code = TRITONSERVER_ERROR_UNSUPPORTED;
      break;
    default:
      break;
  }
  return TRITONSERVER_ErrorNew(code, s.message().c_str());
}

// A Triton error as a Status (taking ownership of `error`), `context` first.
inline Status from_triton_error(TRITONSERVER_Error* error, const std::string& context) {
  if (!error) return Status::ok();
  std::string message = context + ": " + TRITONSERVER_ErrorMessage(error);
  TRITONSERVER_ErrorDelete(error);
  return internal_error(message);
}

#define PG_TRITON_RETURN_IF_ERROR(call, context)                   \
  do {                                                             \
    ::peregrine::Status pg_triton_status_ =                        \
        ::peregrine::triton::from_triton_error((call), (context)); \
    if (!pg_triton_status_.is_ok()) return pg_triton_status_;      \
  } while (0)

inline DType dtype_from_triton(TRITONSERVER_DataType t) {
  switch (t) {
    case TRITONSERVER_TYPE_BOOL:
      return DType::kBool;
    case TRITONSERVER_TYPE_UINT8:
      return DType::kUInt8;
    case TRITONSERVER_TYPE_UINT16:
      return DType::kUInt16;
    case TRITONSERVER_TYPE_UINT32:
      return DType::kUInt32;
    case TRITONSERVER_TYPE_UINT64:
      return DType::kUInt64;
    case TRITONSERVER_TYPE_INT8:
      return DType::kInt8;
    case TRITONSERVER_TYPE_INT16:
      return DType::kInt16;
    case TRITONSERVER_TYPE_INT32:
      return DType::kInt32;
    case TRITONSERVER_TYPE_INT64:
      return DType::kInt64;
    case TRITONSERVER_TYPE_FP16:
      return DType::kFloat16;
    case TRITONSERVER_TYPE_FP32:
      return DType::kFloat32;
    case TRITONSERVER_TYPE_FP64:
      return DType::kFloat64;
    case TRITONSERVER_TYPE_BF16:
      return DType::kBFloat16;
    default:
      return DType::kUndefined;
  }
}

inline TRITONSERVER_DataType dtype_to_triton(DType t) {
  for (int v = TRITONSERVER_TYPE_BOOL; v <= TRITONSERVER_TYPE_BF16; ++v) {
    auto candidate = static_cast<TRITONSERVER_DataType>(v);
    if (dtype_from_triton(candidate) == t) return candidate;
  }
  return TRITONSERVER_TYPE_INVALID;
}

inline void log(TRITONSERVER_LogLevel level, const std::string& message) {
  if (TRITONSERVER_Error* e = TRITONSERVER_LogMessage(level, "peregrine", 0, message.c_str()))
    TRITONSERVER_ErrorDelete(e);
}

// Nanoseconds on the steady clock, the time base Triton's statistics take.
inline uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace peregrine::triton
