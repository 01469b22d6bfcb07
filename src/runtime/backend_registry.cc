#include "runtime/backend_registry.h"

#include <cstdlib>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_features.h"
#include "backends/reference/reference_backend.h"

namespace peregrine {

namespace {

Expected<std::vector<const Backend*>> cpu_candidates() {
  PG_RETURN_IF_ERROR(cpu::selected_isa().status());  // an invalid PEREGRINE_ISA
  return std::vector<const Backend*>{&cpu_backend(), &reference_backend()};
}

Expected<std::vector<const Backend*>> reference_candidates() {
  return std::vector<const Backend*>{&reference_backend()};
}

const BackendChoice kChoices[] = {
    {"cpu", "optimized kernels, reference for the rest; default", cpu_candidates},
    {"reference", "the reference kernels only, float32", reference_candidates},
};

}  // namespace

std::span<const BackendChoice> backend_choices() { return kChoices; }

Expected<std::vector<const Backend*>> backends_for(std::string name) {
  if (name.empty()) {
    const char* env = std::getenv("PEREGRINE_BACKEND");
    name = env && *env ? env : kChoices[0].name;
  }
  std::string known;
  for (const BackendChoice& c : kChoices) {
    if (name == c.name) return c.candidates();
    known += std::string(known.empty() ? "" : " or ") + c.name;
  }
  return invalid_input("backend '" + name + "': expected " + known);
}

std::string backend_choices_text() {
  std::string text;
  for (const BackendChoice& c : kChoices)
    text += std::string(text.empty() ? "" : " or ") + c.name + " (" + c.description + ")";
  return text;
}

}  // namespace peregrine
