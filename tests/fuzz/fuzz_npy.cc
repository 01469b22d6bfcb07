// libFuzzer target: the .npy reader on raw bytes (header dict, dtype, shape, data length).
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  (void)peregrine::parse_npy(bytes, "fuzz.npy");
  return 0;
}
