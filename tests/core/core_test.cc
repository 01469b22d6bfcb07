// Core types: narrow floats, checked arithmetic, tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>

#include "core/checked_math.h"
#include "core/narrow_float.h"
#include "core/utc_time.h"
#include "peregrine/tensor.h"

namespace peregrine {
namespace {

TEST(UtcTime, Iso8601ToTheSecond) {
  const std::string now = utc_now_iso8601();
  EXPECT_TRUE(std::regex_match(
      now, std::regex(R"(20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]Z)")))
      << now;
}

TEST(Float16, ExactValuesRoundTrip) {
  for (float f : {0.f, 1.f, -2.f, 0.5f, 65504.f, -65504.f, 6.103515625e-05f})
    EXPECT_EQ(static_cast<float>(Float16(f)), f) << f;
}

TEST(Float16, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and the next half (1 + 2^-10): ties go to even (1).
  EXPECT_EQ(static_cast<float>(Float16(1.f + std::ldexp(1.f, -11))), 1.f);
  // 1 + 3*2^-11 is halfway between 1+2^-10 and 1+2^-9: ties go to even (1+2^-9).
  EXPECT_EQ(static_cast<float>(Float16(1.f + 3 * std::ldexp(1.f, -11))), 1.f + std::ldexp(1.f, -9));
}

TEST(Float16, OverflowSubnormalAndNan) {
  EXPECT_TRUE(std::isinf(static_cast<float>(Float16(70000.f))));
  EXPECT_EQ(static_cast<float>(Float16(std::ldexp(1.f, -24))),
            std::ldexp(1.f, -24));  // smallest subnormal
  EXPECT_EQ(static_cast<float>(Float16(std::ldexp(1.f, -26))), 0.f);
  EXPECT_TRUE(std::isnan(static_cast<float>(Float16(std::nanf("")))));
  EXPECT_EQ(Float16(-0.f).bits, 0x8000);
}

TEST(BFloat16, RoundTripAndRounding) {
  EXPECT_EQ(static_cast<float>(BFloat16(1.f)), 1.f);
  EXPECT_EQ(static_cast<float>(BFloat16(-3.5f)), -3.5f);
  EXPECT_EQ(static_cast<float>(BFloat16(1.f + std::ldexp(1.f, -8))), 1.f);  // tie to even
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(std::nanf("")))));
}

TEST(Float4E2M1, RoundsToNearestEvenCodeAndSaturates) {
  for (uint8_t c = 0; c < 16; ++c)
    EXPECT_EQ(float_to_float4e2m1(float4e2m1_to_float(c)), c == 8 ? 8 : c) << int(c);
  EXPECT_EQ(float4e2m1_to_float(float_to_float4e2m1(0.25f)), 0.0f);  // tie 0 / 0.5: even code
  EXPECT_EQ(float4e2m1_to_float(float_to_float4e2m1(0.75f)), 1.0f);  // tie 0.5 / 1
  EXPECT_EQ(float4e2m1_to_float(float_to_float4e2m1(2.5f)), 2.0f);
  EXPECT_EQ(float4e2m1_to_float(float_to_float4e2m1(5.0f)), 4.0f);
  EXPECT_EQ(float4e2m1_to_float(float_to_float4e2m1(5.1f)), 6.0f);
  EXPECT_EQ(float4e2m1_to_float(float_to_float4e2m1(-1e9f)), -6.0f);
  EXPECT_EQ(float4e2m1_to_float(float_to_float4e2m1(INFINITY)), 6.0f);
  EXPECT_EQ(float_to_float4e2m1(-0.0f), 0x8);
}

TEST(Float8E8M0, RoundingModesAndSaturation) {
  EXPECT_EQ(float8e8m0_to_float(127), 1.0f);
  EXPECT_TRUE(std::isnan(float8e8m0_to_float(0xFF)));
  EXPECT_EQ(float_to_float8e8m0(1.1f, true, E8M0Rounding::kUp), 128);
  EXPECT_EQ(float_to_float8e8m0(1.1f, true, E8M0Rounding::kDown), 127);
  EXPECT_EQ(float_to_float8e8m0(1.1f, true, E8M0Rounding::kNearest), 127);
  EXPECT_EQ(float_to_float8e8m0(1.5f, true, E8M0Rounding::kNearest), 128);
  EXPECT_EQ(float_to_float8e8m0(2.0f, true, E8M0Rounding::kUp), 128);
  const float big = std::numeric_limits<float>::max();
  EXPECT_EQ(float_to_float8e8m0(big, true, E8M0Rounding::kUp), 0xFE);
  EXPECT_EQ(float_to_float8e8m0(big, false, E8M0Rounding::kUp), 0xFF);
  EXPECT_EQ(float_to_float8e8m0(NAN, true, E8M0Rounding::kUp), 0xFF);
}

TEST(SmallInt, FloatsTruncateAndIntegersWrap) {
  EXPECT_EQ(float_to_small_int(7.9, 4, true), 7);
  EXPECT_EQ(float_to_small_int(-8.9, 4, true), -8);
  EXPECT_EQ(float_to_small_int(-9.0, 4, true), 0);  // out of range: 0
  EXPECT_EQ(float_to_small_int(3.5, 2, false), 3);
  EXPECT_EQ(float_to_small_int(-1.0, 2, false), 0);
  EXPECT_EQ(float_to_small_int(-2.5, 2, true), -2);
  EXPECT_EQ(float_to_small_int(NAN, 2, true), 0);
  EXPECT_EQ(wrap_small_int(9, 4, true), -7);
  EXPECT_EQ(wrap_small_int(-3, 2, true), 1);
  EXPECT_EQ(wrap_small_int(7, 2, false), 3);
}

TEST(Tensor, ReadsNarrowFloatsAsDouble) {
  Tensor f8 = Tensor::zeros(DType::kFloat8E4M3FN, {1});
  f8.data<uint8_t>()[0] = 0x38;  // 1.0
  EXPECT_EQ(f8.get_as_double(0), 1.0);
  Tensor f4 = Tensor::zeros(DType::kFloat4E2M1, {1});
  f4.data<uint8_t>()[0] = 0xF;  // -6
  EXPECT_EQ(f4.get_as_double(0), -6.0);
  Tensor i2 = Tensor::zeros(DType::kInt2, {1});
  i2.data<int8_t>()[0] = -2;
  EXPECT_EQ(i2.get_as_double(0), -2.0);
}

// Found by fuzz_pipeline (UBSan): a float Loop trip count of NaN read as int64.
TEST(Tensor, FloatsReadAsInt64AreDefinedForEveryValue) {
  Tensor t = Tensor::from_vector<float>({NAN, INFINITY, -INFINITY, 1e30f, -2.75f, 7.5f}, {6});
  EXPECT_EQ(t.get_as_int64(0), 0);
  EXPECT_EQ(t.get_as_int64(1), INT64_MAX);
  EXPECT_EQ(t.get_as_int64(2), INT64_MIN);
  EXPECT_EQ(t.get_as_int64(3), INT64_MAX);
  EXPECT_EQ(t.get_as_int64(4), -2);
  EXPECT_EQ(t.get_as_int64(5), 7);
}

TEST(CheckedMath, DetectsOverflow) {
  EXPECT_FALSE(checked_mul(int64_t{1} << 40, int64_t{1} << 40).has_value());
  EXPECT_EQ(*checked_mul(6, 7), 42);
  EXPECT_FALSE(checked_add(std::numeric_limits<int64_t>::max(), 1).has_value());
  std::vector<int64_t> dims{1 << 20, 1 << 20, 1 << 20, 1 << 20};
  EXPECT_FALSE(checked_product(dims).has_value());
  std::vector<int64_t> negative{2, -1};
  EXPECT_FALSE(checked_product(negative).has_value());
}

TEST(Tensor, MakeRejectsHugeShapes) {
  auto t = Tensor::make(DType::kFloat32, {int64_t{1} << 33, 4});
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("limit"), std::string::npos);
}

TEST(Tensor, ZeroFilledAlignedAndShared) {
  Tensor t = Tensor::zeros(DType::kFloat32, {3, 5});
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
  for (int64_t i = 0; i < 15; ++i) EXPECT_EQ(t.data<float>()[i], 0.f);
  Tensor alias = t.reshaped({15});
  alias.data<float>()[4] = 2.f;
  EXPECT_EQ(t.data<float>()[4], 2.f);  // reshaped shares the buffer
  Tensor copy = t.clone();
  copy.data<float>()[4] = 3.f;
  EXPECT_EQ(t.data<float>()[4], 2.f);  // clone does not
}

TEST(Tensor, EmptyTensorIsValid) {
  Tensor t = Tensor::zeros(DType::kInt64, {0, 7});
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.nbytes(), 0u);
  EXPECT_NE(t.raw(), nullptr);
}

}  // namespace
}  // namespace peregrine
