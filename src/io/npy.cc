#include "io/npy.h"

#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <regex>

#include "core/checked_math.h"
#include "core/file_io.h"

namespace peregrine {

namespace {

struct DescrEntry {
  const char* descr;
  DType dtype;
};
// Little-endian ('<') or byte-order-free ('|') descriptors only.
const DescrEntry kDescrs[] = {
    {"<f4", DType::kFloat32}, {"<f8", DType::kFloat64}, {"<f2", DType::kFloat16},
    {"|i1", DType::kInt8},    {"<i2", DType::kInt16},   {"<i4", DType::kInt32},
    {"<i8", DType::kInt64},   {"|u1", DType::kUInt8},   {"<u2", DType::kUInt16},
    {"<u4", DType::kUInt32},  {"<u8", DType::kUInt64},  {"|b1", DType::kBool},
    {"<c8", DType::kComplex64}, {"<c16", DType::kComplex128},
};

const char* descr_of(DType t) {
  for (const auto& e : kDescrs)
    if (e.dtype == t) return e.descr;
  return nullptr;
}

}  // namespace

Expected<Tensor> parse_npy(const std::string& bytes, const std::string& name) {
  auto bad = [&](const std::string& why) { return invalid_input("'" + name + "': " + why); };
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0)
    return bad("not a .npy file (bad magic)");
  int major = static_cast<uint8_t>(bytes[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return bad("truncated header");
    uint32_t len;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    header_start = 12;
  } else {
    return bad("unsupported .npy format version " + std::to_string(major));
  }
  if (header_start + header_len > bytes.size()) return bad("truncated header");
  std::string header = bytes.substr(header_start, header_len);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr'\\s*:\\s*'([^']*)'"))) return bad("header has no 'descr'");
  std::string descr = m[1];
  if (descr == "|O" || descr == "O" || descr.find('O') != std::string::npos)
    return bad("object arrays are not supported");
  if (!descr.empty() && descr[0] == '>') return bad("big-endian data ('" + descr + "') is not supported");
  if (descr == "=f4") descr = "<f4";
  DType dtype = DType::kUndefined;
  for (const auto& e : kDescrs) {
    std::string d = e.descr;
    if (descr == d || (d[0] == '|' && descr == "<" + d.substr(1)) ||
        (d[0] == '|' && descr == d.substr(1)))
      dtype = e.dtype;
  }
  if (dtype == DType::kUndefined) return bad("unsupported dtype '" + descr + "'");
  if (!std::regex_search(header, m, std::regex("'fortran_order'\\s*:\\s*(True|False)")))
    return bad("header has no 'fortran_order'");
  if (m[1] == "True") return bad("Fortran-order arrays are not supported (use C order)");
  if (!std::regex_search(header, m, std::regex("'shape'\\s*:\\s*\\(([^)]*)\\)")))
    return bad("header has no 'shape'");
  Shape shape;
  std::string dims = m[1];
  std::regex num("(-?\\d+)");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), num); it != std::sregex_iterator(); ++it) {
    std::string s = (*it)[1];
    if (s.size() > 18) return bad("dim '" + s + "' is too large");
    int64_t d = std::stoll(s);
    if (d < 0) return bad("negative dim in shape");
    shape.push_back(d);
  }
  // The data's length is checked against the shape before anything is allocated: the header
  // may claim any size.
  const std::optional<int64_t> count = checked_product(shape);
  const std::optional<int64_t> need =
      count ? checked_mul(*count, static_cast<int64_t>(dtype_size(dtype))) : std::nullopt;
  if (!need) return bad("shape " + shape_to_string(shape) + " overflows");
  const size_t data_start = header_start + header_len;
  if (static_cast<int64_t>(bytes.size() - data_start) != *need)
    return bad("data has " + std::to_string(bytes.size() - data_start) + " bytes, shape " +
               shape_to_string(shape) + " needs " + std::to_string(*need));
  auto made = Tensor::make(dtype, shape);
  if (!made.is_ok()) return bad(made.status().message());
  Tensor t = std::move(made).value();
  if (t.nbytes()) std::memcpy(t.raw(), bytes.data() + data_start, t.nbytes());
  return t;
}

Expected<Tensor> read_npy(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return invalid_input("cannot open '" + path + "'");
  std::ifstream f(path, std::ios::binary);
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  f.read(bytes.data(), st.st_size);
  if (!f) return invalid_input("cannot read '" + path + "'");
  return parse_npy(bytes, path);
}

namespace {

// The magic, version, header length and header of a .npy file for `t` (data follows).
std::string npy_header(const Tensor& t) {
  std::string shape;
  for (size_t i = 0; i < t.shape().size(); ++i) shape += std::to_string(t.shape()[i]) + ", ";
  if (t.shape().size() > 1) shape.resize(shape.size() - 2);
  else if (t.shape().size() == 1) shape.resize(shape.size() - 1);
  std::string header = "{'descr': '" + std::string(descr_of(t.dtype())) +
                       "', 'fortran_order': False, 'shape': (" + shape + "), }";
  // Pad with spaces so the data starts 64-byte aligned; newline terminates.
  size_t prefix = 10;
  bool v2 = header.size() + 1 + prefix > 65535;
  if (v2) prefix = 12;
  size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  uint32_t len = static_cast<uint32_t>(header.size());
  if (v2) {
    out.append(reinterpret_cast<const char*>(&len), 4);
  } else {
    out += static_cast<char>(len & 0xff);
    out += static_cast<char>(len >> 8);
  }
  out += header;
  return out;
}

}  // namespace

std::string serialize_npy(const Tensor& t) {
  std::string out = npy_header(t);
  out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

Status write_npy(const std::string& path, const Tensor& t) {
  if (!descr_of(t.dtype()))
    return unsupported("cannot write " + std::string(dtype_name(t.dtype())) + " tensors to .npy");
  // Header, then the tensor's bytes straight from its buffer (no second copy of a large output
  // in memory).
  const std::string header = npy_header(t);
  return write_file_atomically(
      path, {header, std::string_view(static_cast<const char*>(t.raw()), t.nbytes())});
}

}  // namespace peregrine
