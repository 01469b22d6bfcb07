// Files written whole: to a temporary name in the same folder, then renamed over the target,
// so a failure (disk full, no permission) never leaves a torn file where the user expects one.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "peregrine/status.h"

namespace peregrine {

// Writes the pieces one after another to `path`; errors name `path` (invalid_input: the path
// is the user's).
Status write_file_atomically(const std::string& path,
                             std::initializer_list<std::string_view> pieces);
inline Status write_file_atomically(const std::string& path, std::string_view bytes) {
  return write_file_atomically(path, {bytes});
}

}  // namespace peregrine
