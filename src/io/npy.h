// NumPy .npy files: format versions 1.0, 2.0 and 3.0, C order, little-endian.
// Object arrays, Fortran order and big-endian data are rejected with an error.
#pragma once

#include <string>

#include "peregrine/tensor.h"

namespace peregrine {

Expected<Tensor> read_npy(const std::string& path);
Expected<Tensor> parse_npy(const std::string& bytes, const std::string& display_name);
// Writes version 1.0 (2.0 if the header needs it). Refuses to write strings.
Status write_npy(const std::string& path, const Tensor& tensor);
std::string serialize_npy(const Tensor& tensor);

}  // namespace peregrine
