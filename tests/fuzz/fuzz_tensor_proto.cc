// libFuzzer target: the TensorProto decoder (dtypes, dims, typed and raw data, external-data
// entries, which are refused without a model folder) on a protobuf parsed from raw bytes.
#include <cstddef>
#include <cstdint>

#include "importer/onnx/onnx_importer.h"
#include "onnx/onnx-ml.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  onnx::TensorProto proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  (void)peregrine::tensor_from_proto(proto, "");
  return 0;
}
