#include "core/file_io.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace peregrine {

Status write_file_atomically(const std::string& path,
                             std::initializer_list<std::string_view> pieces) {
  namespace fs = std::filesystem;
  const std::string temp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) return invalid_input("cannot write '" + path + "'");
    for (std::string_view piece : pieces)
      out.write(piece.data(), static_cast<std::streamsize>(piece.size()));
    out.flush();
    if (!out) {
      out.close();
      std::error_code ignored;
      fs::remove(temp, ignored);
      return invalid_input("cannot write '" + path + "' (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    return invalid_input("cannot write '" + path + "': " + ec.message());
  }
  return Status::ok();
}

}  // namespace peregrine
