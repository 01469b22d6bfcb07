#include "core/status_error.h"

#include <new>

namespace peregrine {

void throw_status_error(Status status) { throw StatusError(std::move(status)); }

void throw_missing_input(const std::string& node, size_t index) {
  throw StatusError(
      invalid_model(node + ": input " + std::to_string(index) + " is required but missing"));
}

Status status_from_current_exception(const std::string& context) {
  try {
    throw;
  } catch (const StatusError& e) {
    return e.status().with_context(context);
  } catch (const std::bad_alloc&) {
    return invalid_model(context + ": out of memory (the model needs more than this machine has)");
  } catch (const std::exception& e) {
    return internal_error(context + ": unexpected exception: " + e.what());
  } catch (...) {
    return internal_error(context + ": unexpected exception");
  }
}

}  // namespace peregrine
