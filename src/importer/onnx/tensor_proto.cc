// TensorProto <-> Tensor, with every length checked against the declared dims and
// external data confined to the model's folder.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/checked_math.h"
#include "importer/onnx/onnx_importer.h"
#include "onnx/onnx-ml.pb.h"

namespace peregrine {
namespace {

std::string tensor_label(const onnx::TensorProto& p) {
  return "tensor '" + p.name() + "'";
}

// Unpacks elements of `bits` bits (the low bits of each byte first), sign-extending the
// signed integer types.
void unpack_subbyte(const uint8_t* packed, int64_t n, DType dtype, uint8_t* out) {
  const int bits = dtype_packed_bits(dtype), per_byte = 8 / bits;
  const bool sign_extend = dtype == DType::kInt4 || dtype == DType::kInt2;
  const uint8_t mask = static_cast<uint8_t>((1 << bits) - 1),
                sign = static_cast<uint8_t>(1 << (bits - 1));
  for (int64_t i = 0; i < n; ++i) {
    uint8_t v = (packed[i / per_byte] >> ((i % per_byte) * bits)) & mask;
    if (sign_extend && (v & sign)) v |= static_cast<uint8_t>(~mask);
    out[i] = v;
  }
}

int64_t packed_bytes(DType dtype, int64_t n) {
  const int per_byte = 8 / dtype_packed_bits(dtype);
  return n / per_byte + (n % per_byte ? 1 : 0);
}

// Reads `length` bytes at `offset` of `location` inside model_dir, refusing any
// path that could leave the folder (absolute, '..', symlinks, hard links).
Expected<std::string> read_external(const onnx::TensorProto& p, const std::string& model_dir,
                                    int64_t expected_bytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : p.external_data()) {
    char* end = nullptr;
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      errno = 0;
      long long v = std::strtoll(kv.value().c_str(), &end, 10);
      if (errno || end == kv.value().c_str() || *end || v < 0)
        return invalid_model(tensor_label(p) + ": external data " + kv.key() + " '" + kv.value() +
                             "' is not a non-negative integer");
      (kv.key() == "offset" ? offset : length) = v;
    }
  }
  if (model_dir.empty())
    return invalid_model(tensor_label(p) + ": external data is not allowed here (no model folder)");
  if (location.empty()) return invalid_model(tensor_label(p) + ": external data has no location");
  std::filesystem::path loc(location);
  if (loc.is_absolute() || location.find('\\') != std::string::npos || location[0] == '~')
    return invalid_model(tensor_label(p) + ": external data location '" + location +
                         "' must be a relative path inside the model's folder");
  for (const auto& part : loc)
    if (part == "..")
      return invalid_model(tensor_label(p) + ": external data location '" + location +
                           "' must not contain '..'");
  std::error_code ec;
  auto dir = std::filesystem::canonical(model_dir, ec);
  if (ec) return invalid_model("cannot resolve model folder '" + model_dir + "'");
  std::filesystem::path full = dir / loc;
  struct stat st;
  if (lstat(full.c_str(), &st) != 0)
    return invalid_model(tensor_label(p) + ": external data file '" + location + "' not found");
  if (S_ISLNK(st.st_mode))
    return invalid_model(tensor_label(p) + ": external data file '" + location + "' is a symlink");
  if (!S_ISREG(st.st_mode))
    return invalid_model(tensor_label(p) + ": external data '" + location + "' is not a regular file");
  if (st.st_nlink != 1)
    return invalid_model(tensor_label(p) + ": external data file '" + location +
                         "' has several hard links");
  auto canon = std::filesystem::canonical(full, ec);
  if (ec) return invalid_model(tensor_label(p) + ": cannot resolve external data '" + location + "'");
  auto rel = canon.lexically_relative(dir);
  if (rel.empty() || *rel.begin() == "..")
    return invalid_model(tensor_label(p) + ": external data '" + location + "' is outside the model's folder");
  int64_t file_size = st.st_size;
  if (length < 0) length = file_size - std::min(offset, file_size);
  auto end = checked_add(offset, length);
  if (!end || *end > file_size)
    return invalid_model(tensor_label(p) + ": external data offset " + std::to_string(offset) +
                         " + length " + std::to_string(length) + " exceeds file '" + location +
                         "' of " + std::to_string(file_size) + " bytes");
  if (length != expected_bytes)
    return invalid_model(tensor_label(p) + ": external data length " + std::to_string(length) +
                         " does not match dims (" + std::to_string(expected_bytes) + " bytes)");
  std::ifstream f(canon, std::ios::binary);
  std::string data(static_cast<size_t>(length), '\0');
  f.seekg(offset);
  f.read(data.data(), length);
  if (!f) return invalid_model(tensor_label(p) + ": could not read external data '" + location + "'");
  return data;
}

template <typename Field>
Status check_count(const onnx::TensorProto& p, const Field& field, int64_t expected,
                   const char* field_name) {
  if (static_cast<int64_t>(field.size()) != expected)
    return invalid_model(tensor_label(p) + ": " + field_name + " has " +
                         std::to_string(field.size()) + " values, dims say " +
                         std::to_string(expected));
  return Status::ok();
}

// The typed field holding a tensor of `dtype` and the count it must have for n elements.
Status check_typed_count(const onnx::TensorProto& p, DType dtype, int64_t n) {
  switch (dtype) {
    case DType::kFloat32:
      return check_count(p, p.float_data(), n, "float_data");
    case DType::kComplex64:
      return check_count(p, p.float_data(), 2 * n, "float_data");
    case DType::kFloat64:
      return check_count(p, p.double_data(), n, "double_data");
    case DType::kComplex128:
      return check_count(p, p.double_data(), 2 * n, "double_data");
    case DType::kInt64:
      return check_count(p, p.int64_data(), n, "int64_data");
    case DType::kUInt32:
    case DType::kUInt64:
      return check_count(p, p.uint64_data(), n, "uint64_data");
    case DType::kInt4:
    case DType::kUInt4:
    case DType::kFloat4E2M1:
    case DType::kInt2:
    case DType::kUInt2:
      return check_count(p, p.int32_data(), packed_bytes(dtype, n), "int32_data");
    case DType::kString:
      return check_count(p, p.string_data(), n, "string_data");
    default:  // int8/16/32, uint8/16, bool, float16, bfloat16, float8: one int32 each
      return check_count(p, p.int32_data(), n, "int32_data");
  }
}

}  // namespace

Expected<Tensor> tensor_from_proto(const onnx::TensorProto& p, const std::string& model_dir) {
  if (!dtype_is_valid(p.data_type()))
    return invalid_model(tensor_label(p) + ": data_type " + std::to_string(p.data_type()) +
                         " is not a valid ONNX element type");
  DType dtype = static_cast<DType>(p.data_type());
  if (p.has_segment()) return unsupported(tensor_label(p) + ": segmented tensors are not supported");
  Shape shape(p.dims().begin(), p.dims().end());
  for (int64_t d : shape)
    if (d < 0) return invalid_model(tensor_label(p) + ": negative dim " + std::to_string(d));
  const std::optional<int64_t> count = checked_product(shape);
  const std::optional<int64_t> bytes =
      count ? checked_mul(*count, static_cast<int64_t>(std::max<size_t>(dtype_size(dtype), 1)))
            : std::nullopt;
  if (!bytes)
    return invalid_model(tensor_label(p) + ": shape " + shape_to_string(shape) + " overflows");
  const int64_t n = *count;
  const bool sub_byte = dtype_packed_bits(dtype) != 0;
  const int64_t stored_bytes = sub_byte ? packed_bytes(dtype, n) : *bytes;
  const bool external = p.data_location() == onnx::TensorProto::EXTERNAL;
  if (dtype == DType::kString && external)
    return unsupported(tensor_label(p) + ": external string data is not supported");

  // The data the proto holds is checked against the dims before the tensor is allocated: the
  // dims alone may claim any size.
  std::string ext;
  const std::string* raw = nullptr;
  if (dtype != DType::kString && external) {
    PG_ASSIGN_OR_RETURN(ext, read_external(p, model_dir, stored_bytes));
    raw = &ext;
  } else if (dtype != DType::kString && p.has_raw_data()) {
    raw = &p.raw_data();
  }
  if (raw) {
    if (static_cast<int64_t>(raw->size()) != stored_bytes)
      return invalid_model(tensor_label(p) + ": raw_data has " + std::to_string(raw->size()) +
                           " bytes, dims " + shape_to_string(shape) + " of " +
                           std::string(dtype_name(dtype)) + " need " +
                           std::to_string(stored_bytes));
  } else {
    PG_RETURN_IF_ERROR(check_typed_count(p, dtype, n));
  }
  auto made = Tensor::make(dtype, shape);
  if (!made.is_ok()) return made.status().with_context(tensor_label(p));
  Tensor t = std::move(made).value();

  if (dtype == DType::kString) {
    for (int64_t i = 0; i < n; ++i) t.strings()[i] = p.string_data(static_cast<int>(i));
    return t;
  }
  if (raw) {
    if (sub_byte) {
      unpack_subbyte(reinterpret_cast<const uint8_t*>(raw->data()), n, dtype, t.data<uint8_t>());
    } else if (stored_bytes) {
      std::memcpy(t.raw(), raw->data(), static_cast<size_t>(stored_bytes));
    }
    return t;
  }
  // Typed fields (their counts checked above).
  switch (dtype) {
    case DType::kFloat32:
    case DType::kComplex64:
      std::copy(p.float_data().begin(), p.float_data().end(), t.data<float>());
      break;
    case DType::kFloat64:
    case DType::kComplex128:
      std::copy(p.double_data().begin(), p.double_data().end(), t.data<double>());
      break;
    case DType::kInt64:
      std::copy(p.int64_data().begin(), p.int64_data().end(), t.data<int64_t>());
      break;
    case DType::kUInt32:
      for (int64_t i = 0; i < n; ++i) t.data<uint32_t>()[i] = static_cast<uint32_t>(p.uint64_data(i));
      break;
    case DType::kUInt64:
      std::copy(p.uint64_data().begin(), p.uint64_data().end(), t.data<uint64_t>());
      break;
    case DType::kInt4:
    case DType::kUInt4:
    case DType::kFloat4E2M1:
    case DType::kInt2:
    case DType::kUInt2: {
      std::vector<uint8_t> packed(p.int32_data().begin(), p.int32_data().end());
      unpack_subbyte(packed.data(), n, dtype, t.data<uint8_t>());
      break;
    }
    default: {
      size_t sz = dtype_size(dtype);
      for (int64_t i = 0; i < n; ++i) {
        int32_t v = p.int32_data(static_cast<int>(i));
        std::memcpy(static_cast<uint8_t*>(t.raw()) + i * sz, &v, sz);  // little-endian low bytes
      }
      break;
    }
  }
  return t;
}

void tensor_to_proto(const Tensor& t, onnx::TensorProto* p) {
  p->set_data_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.shape()) p->add_dims(d);
  if (t.dtype() == DType::kString) {
    for (const auto& s : t.strings()) p->add_string_data(s);
    return;
  }
  if (const int bits = dtype_packed_bits(t.dtype())) {
    const int per_byte = 8 / bits, mask = (1 << bits) - 1;
    std::string packed(static_cast<size_t>(packed_bytes(t.dtype(), t.numel())), '\0');
    const uint8_t* d = t.data<uint8_t>();
    for (int64_t i = 0; i < t.numel(); ++i)
      packed[i / per_byte] =
          static_cast<char>(packed[i / per_byte] | ((d[i] & mask) << ((i % per_byte) * bits)));
    p->set_raw_data(packed);
    return;
  }
  p->set_raw_data(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
}

ir::ValueType type_from_proto(const onnx::TypeProto& proto) {
  ir::ValueType v;
  if (proto.has_tensor_type()) {
    const auto& tt = proto.tensor_type();
    v.kind = ir::ValueType::Kind::kTensor;
    v.dtype = dtype_is_valid(tt.elem_type()) ? static_cast<DType>(tt.elem_type()) : DType::kUndefined;
    if (tt.has_shape()) {
      v.has_shape = true;
      for (const auto& d : tt.shape().dim()) {
        v.dims.push_back(d.has_dim_value() && d.dim_value() >= 0 ? d.dim_value() : -1);
        v.dim_names.push_back(d.has_dim_param() ? d.dim_param() : "");
      }
    }
  } else if (proto.has_sequence_type()) {
    v.kind = ir::ValueType::Kind::kSequence;
    v.elem = std::make_shared<ir::ValueType>(type_from_proto(proto.sequence_type().elem_type()));
  } else if (proto.has_optional_type()) {
    v.kind = ir::ValueType::Kind::kOptional;
    v.elem = std::make_shared<ir::ValueType>(type_from_proto(proto.optional_type().elem_type()));
  }
  return v;
}

}  // namespace peregrine
