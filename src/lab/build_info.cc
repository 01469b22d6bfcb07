// The values come from CMake as compile definitions of this file only, so a new
// commit recompiles this one file and nothing else.
#include "lab/build_info.h"

#ifndef PEREGRINE_GIT_COMMIT
#define PEREGRINE_GIT_COMMIT "unknown"
#endif
#ifndef PEREGRINE_BUILD_FLAGS
#define PEREGRINE_BUILD_FLAGS "unknown"
#endif

namespace peregrine {

const char* engine_commit() { return PEREGRINE_GIT_COMMIT; }
const char* engine_build_flags() { return PEREGRINE_BUILD_FLAGS; }

}  // namespace peregrine
