// Cast between float32 and float16 / bfloat16 on the CPU backend: the conversion maps at every
// ISA level against peregrine/float_types.h's rounding (ties, overflow, subnormals, NaN, odd
// lengths, no write past the end), and the Cast kernel against the reference kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/ukernels/f16_convert_ukernels.h"
#include "cpu_one_node_graph.h"
#include "peregrine/float_types.h"

namespace peregrine {
namespace {

std::vector<float> awkward_floats() {
  std::vector<float> x = {0.0f,
                          -0.0f,
                          1.0f,
                          -2.5f,
                          65504.0f,
                          65520.0f,
                          1e6f,
                          -1e6f,
                          6.1e-5f,
                          5.96e-8f,
                          2.98e-8f,
                          1e-10f,
                          1.00048828125f,  // a tie
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()};
  for (float v : cpu::testing::random_floats(45, 9, -70000.0f, 70000.0f)) x.push_back(v);
  for (float v : cpu::testing::random_floats(20, 10, -1e-4f, 1e-4f)) x.push_back(v);
  return x;
}

TEST(CpuF16Convert, EveryIsaMatchesTheReferenceRounding) {
  std::vector<std::pair<cpu::F16ToF32Fn, cpu::F32ToF16Fn>> levels = {
      {cpu::scalar::f16_to_f32, cpu::scalar::f32_to_f16}};
  if (cpu::isa_supported(cpu::Isa::kAvx512))
    levels.push_back({cpu::avx512::f16_to_f32, cpu::avx512::f32_to_f16});
  std::vector<float> x = awkward_floats();
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  for (auto [widen, narrow] : levels)
    for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, x.size()}) {
      std::vector<uint16_t> h(n + 1, 0xABCD);
      narrow(x.data(), h.data(), n);
      EXPECT_EQ(h[n], 0xABCD) << "wrote past the end";
      for (size_t i = 0; i < n; ++i) {
        if (std::isnan(x[i])) {
          EXPECT_TRUE(std::isnan(Float16::to_float(h[i])));
          continue;
        }
        EXPECT_EQ(h[i], Float16::from_float(x[i])) << "x=" << x[i];
      }
      std::vector<float> back(n + 1, -7.0f);
      widen(h.data(), back.data(), n);
      EXPECT_EQ(back[n], -7.0f);
      for (size_t i = 0; i < n; ++i) {
        const float want = Float16::to_float(h[i]);
        if (std::isnan(want))
          EXPECT_TRUE(std::isnan(back[i]));
        else
          EXPECT_EQ(back[i], want);
      }
    }
}

Tensor narrow_tensor(const std::vector<float>& x, DType t) {
  Tensor out = Tensor::zeros(t, {static_cast<int64_t>(x.size())});
  for (size_t i = 0; i < x.size(); ++i)
    out.data<uint16_t>()[i] =
        t == DType::kFloat16 ? Float16::from_float(x[i]) : BFloat16::from_float(x[i]);
  return out;
}

TEST(CpuCast, MatchesReferenceBothWays) {
  std::vector<float> x = awkward_floats();
  for (float v : cpu::testing::random_floats(40000, 3, -3.0f, 3.0f)) x.push_back(v);  // threaded
  Tensor f32 = Tensor::from_vector<float>(x, {static_cast<int64_t>(x.size())});
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    for (bool widen : {true, false}) {
      Tensor in = widen ? narrow_tensor(x, t) : f32;
      const DType to = widen ? DType::kFloat32 : t;
      cpu::testing::OneNodeGraph g("Cast", {{"X", in}}, {false},
                                   {passes::int_attr("to", static_cast<int64_t>(to))});
      Tensor want = g.run(reference_backend(), 1, nullptr);
      for (int threads : {1, 2}) {
        std::string kernel;
        Tensor got = g.run(cpu_backend(), threads, &kernel);
        EXPECT_EQ(kernel.rfind("cpu/cast-", 0), 0u) << kernel;
        ASSERT_EQ(got.dtype(), to);
        ASSERT_EQ(got.nbytes(), want.nbytes());
        EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0) << "threads " << threads;
      }
    }
  }
}

}  // namespace
}  // namespace peregrine
