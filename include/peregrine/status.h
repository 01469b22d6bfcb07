// Errors as values. Every failure that user input can cause is a Status with a
// code (which decides the process exit code) and a message naming what broke.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace peregrine {

enum class StatusCode {
  kOk = 0,
  kInvalidModel,  // the model file breaks a rule (exit code 2)
  kInvalidInput,  // a user-supplied input or flag is wrong (exit code 2)
  kUnsupported,   // valid ONNX that Peregrine does not implement (exit code 2)
  kInternal,      // a bug in Peregrine (exit code 1)
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes context ("node 'conv_1' (Conv): ") so errors read outermost-first.
  Status with_context(const std::string& context) const {
    if (is_ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

  // 0 ok, 2 bad model / bad input / unsupported, 1 internal error.
  int exit_code() const {
    switch (code_) {
      case StatusCode::kOk:
        return 0;
      case StatusCode::kInternal:
        return 1;
      default:
        return 2;
    }
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_model(std::string m) {
  return Status(StatusCode::kInvalidModel, std::move(m));
}
inline Status invalid_input(std::string m) {
  return Status(StatusCode::kInvalidInput, std::move(m));
}
inline Status unsupported(std::string m) { return Status(StatusCode::kUnsupported, std::move(m)); }
inline Status internal_error(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Expected(Status status) : status_(std::move(status)) {}  // NOLINT
  bool is_ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace peregrine

#define PG_CONCAT_INNER(a, b) a##b
#define PG_CONCAT(a, b) PG_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when it is not ok.
#define PG_RETURN_IF_ERROR(expr)                \
  do {                                          \
    ::peregrine::Status pg_status_ = (expr);    \
    if (!pg_status_.is_ok()) return pg_status_; \
  } while (0)

// Declares `lhs` from an Expected, or returns its Status.
#define PG_ASSIGN_OR_RETURN(lhs, expr)                 \
  auto PG_CONCAT(pg_expected_, __LINE__) = (expr);     \
  if (!PG_CONCAT(pg_expected_, __LINE__).is_ok())      \
    return PG_CONCAT(pg_expected_, __LINE__).status(); \
  lhs = std::move(PG_CONCAT(pg_expected_, __LINE__)).value()

// Returns an error Status built from the message when the condition is false.
#define PG_CHECK_ARG(cond, status_fn, msg) \
  do {                                     \
    if (!(cond)) return status_fn(msg);    \
  } while (0)
