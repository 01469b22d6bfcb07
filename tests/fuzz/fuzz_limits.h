// What every fuzz target runs under: the memory budget a session gets and the largest inputs
// the pipeline target builds, so a run that fits them and still allocates past libFuzzer's
// -rss_limit_mb is a finding, not a model that asked for too much.
#pragma once

#include <cstdint>

namespace peregrine::fuzz {

inline constexpr int64_t kSessionMemoryLimitBytes = int64_t{256} << 20;
inline constexpr int64_t kMaxInputElements = int64_t{1} << 20;

}  // namespace peregrine::fuzz
