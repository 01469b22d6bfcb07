// The backends a session can run on: one explicit list (no static self-registration), each
// entry a name, what it is, and the backends a plan then tries in priority order (the first
// that claims a node runs it; the reference backend, which claims every op it knows, last).
// A new backend (CUDA) is one more entry here, its list {cuda, cpu, reference}.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/status_error.h"

namespace peregrine {

struct BackendChoice {
  const char* name;         // what --backend and SessionOptions::backend take
  const char* description;  // for --help texts
  // The backends in priority order, or why this choice cannot run here.
  Expected<std::vector<const Backend*>> (*candidates)();
};

// Every choice, the default ("cpu") first.
std::span<const BackendChoice> backend_choices();

// The candidates of the choice `name`; "" takes PEREGRINE_BACKEND, else the default. An unknown
// name is an invalid input that lists the known ones.
Expected<std::vector<const Backend*>> backends_for(std::string name);

// "cpu (...) or reference (...)": the choices for a help text.
std::string backend_choices_text();

}  // namespace peregrine
