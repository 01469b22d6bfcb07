// JSON text: string literals (always valid UTF-8) and numbers, for the JSON the CLI, the
// profiler and the lab write by hand.
#pragma once

#include <string>

namespace peregrine {

// JSON string literal with quotes; bytes that are not valid UTF-8 become U+FFFD so the text
// always parses.
std::string json_string(const std::string& s);
// `s` with every byte that is not part of valid UTF-8 replaced by U+FFFD.
std::string to_valid_utf8(const std::string& s);
// JSON number; NaN and infinities (not JSON) become null. Whole numbers below 2^53 exactly,
// others to 10 significant digits.
std::string json_number(double v);

}  // namespace peregrine
