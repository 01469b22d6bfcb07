#include <gtest/gtest.h>

#include "io/npy.h"

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
