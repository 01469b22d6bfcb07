// What the layers above the runtime (calibration, the profiler, the CLI, the Python module, tests)
// see of a session beyond the public API in include/peregrine/session.h: the optimized model it
// runs, and a session made from a model already imported (and perhaps edited: calibration adds
// outputs). Not part of the public API: ir::Model is internal.
#pragma once

#include <memory>

#include "ir/graph.h"
#include "peregrine/session.h"

namespace peregrine {

// load() without the file: passes, plan and kernels from an imported model.
Expected<std::unique_ptr<Session>> session_from_model(ir::Model&& model,
                                                      const SessionOptions& options);
// The model after the session's passes (the graph its executor runs).
const ir::Model& session_model(const Session& session);

}  // namespace peregrine
