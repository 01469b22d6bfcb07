// Which engine build produced a measurement: recorded with every run so that a
// comparison can tell "the code changed" from "the build flags changed".
#pragma once

namespace peregrine {

// Short git commit of the source tree at configure time, or "unknown" outside git.
const char* engine_commit();
// Build type, compiler and C++ flags, e.g. "Release, GNU 12.2.0, -O3 -DNDEBUG".
const char* engine_build_flags();

}  // namespace peregrine
