// libFuzzer target: the ONNX loader on raw bytes (protobuf parse, import, the graph verifier).
// Every input must end in a model or an error Status: a crash, a sanitizer report, an uncaught
// exception or a hang is a finding. External data is refused (there is no model folder).
#include <cstddef>
#include <cstdint>
#include <string>

#include "importer/onnx/onnx_importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  (void)peregrine::parse_onnx_model(bytes, "", "fuzz.onnx");
  return 0;
}
