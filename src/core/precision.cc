#include "peregrine/precision.h"

namespace peregrine {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kFloat32:
      return "fp32";
    case Precision::kBFloat16:
      return "bf16";
  }
  return "?";
}

Expected<Precision> parse_precision(const std::string& text) {
  if (text == "fp32") return Precision::kFloat32;
  if (text == "bf16") return Precision::kBFloat16;
  if (text == "fp16" || text == "int8")
    return unsupported("precision '" + text + "' is not available yet (fp32 or bf16)");
  return invalid_input("precision '" + text + "': expected fp32 or bf16");
}

}  // namespace peregrine
