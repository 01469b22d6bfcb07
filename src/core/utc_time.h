// Wall-clock time as text.
#pragma once

#include <string>

namespace peregrine {

// Now in UTC, ISO 8601 to the second: "2026-12-07T18:40:00Z".
std::string utc_now_iso8601();

}  // namespace peregrine
