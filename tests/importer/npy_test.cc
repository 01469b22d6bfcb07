#include "io/npy.h"

#include <gtest/gtest.h>

namespace peregrine {
namespace {

TEST(Npy, RoundTripFloat) {
  Tensor t = Tensor::from_vector<float>({1.5f, -2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  auto back = parse_npy(serialize_npy(t), "mem");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->shape(), (Shape{2, 3}));
  EXPECT_EQ(back->data<float>()[1], -2.f);
}

TEST(Npy, RejectsObjectArrays) {
  std::string header = "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }";
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size());
  bytes += '\0';
  bytes += header;
  auto r = parse_npy(bytes, "obj.npy");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("object"), std::string::npos);
}

}  // namespace
}  // namespace peregrine

namespace peregrine {
namespace {

// Builds a .npy of format `major` by hand (numpy writes 2.0/3.0 only for huge headers).
std::string npy_bytes(int major, const std::string& header, const std::string& data) {
  std::string out = std::string("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  uint32_t len = static_cast<uint32_t>(header.size());
  if (major == 1) {
    out += static_cast<char>(len & 0xff);
    out += static_cast<char>(len >> 8);
  } else {
    out.append(reinterpret_cast<const char*>(&len), 4);
  }
  return out + header + data;
}

TEST(Npy, ReadsVersions2And3) {
  int32_t values[3] = {7, -8, 9};
  std::string data(reinterpret_cast<const char*>(values), 12);
  std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }\n";
  for (int major : {2, 3}) {
    auto t = parse_npy(npy_bytes(major, header, data), "v.npy");
    ASSERT_TRUE(t.is_ok()) << t.status().message();
    EXPECT_EQ(t->dtype(), DType::kInt32);
    EXPECT_EQ(t->data<int32_t>()[1], -8);
  }
}

TEST(Npy, RejectsBigEndianFortranAndShortData) {
  std::string be = "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }\n";
  EXPECT_FALSE(parse_npy(npy_bytes(1, be, std::string(4, '\0')), "b.npy").is_ok());
  std::string fo = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n";
  EXPECT_FALSE(parse_npy(npy_bytes(1, fo, std::string(16, '\0')), "f.npy").is_ok());
  std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }\n";
  auto short_data = parse_npy(npy_bytes(1, ok, std::string(12, '\0')), "s.npy");
  ASSERT_FALSE(short_data.is_ok());
  EXPECT_NE(short_data.status().message().find("needs 16"), std::string::npos);
}

// Found by fuzz_npy: a header that claims a shape of terabytes over a few bytes of data is
// refused by the length check, before anything that size is allocated.
TEST(Npy, HugeShapeOverShortDataIsRefusedBeforeAllocating) {
  std::string huge =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000, 1000), }\n";
  auto t = parse_npy(npy_bytes(1, huge, std::string(8, '\0')), "huge.npy");
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("data has 8 bytes"), std::string::npos)
      << t.status().message();
}

TEST(Npy, ScalarRoundTrip) {
  Tensor t = Tensor::scalar<double>(2.5);
  auto back = parse_npy(serialize_npy(t), "scalar");
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->rank(), 0);
  EXPECT_EQ(back->data<double>()[0], 2.5);
}

}  // namespace
}  // namespace peregrine
