// Exceptions at the edge of Status: a Status thrown where a signature leaves no room to return
// one (Tensor::zeros, kernels' output()), and the Status for whatever exception reached an API
// boundary (GraphExecutor's node loop, Session, the CLI), which catch everything: no exception
// leaves the library.
#pragma once

#include <exception>
#include <string>

#include "peregrine/status.h"

namespace peregrine {

class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return status_.message().c_str(); }

 private:
  Status status_;
};

// Throws StatusError(status); out of line, so inline accessors stay small.
[[noreturn]] void throw_status_error(Status status);
// Throws the bad-model error of a node that omits required input `index` (`node`: its
// describe()).
[[noreturn]] void throw_missing_input(const std::string& node, size_t index);

// The Status for the exception being handled (call inside a catch block), prefixed with
// `context`: a StatusError's own Status; running out of memory is the model asking for more
// than there is (a bad model, exit 2); anything else is a bug of ours (internal, exit 1).
Status status_from_current_exception(const std::string& context);

}  // namespace peregrine
