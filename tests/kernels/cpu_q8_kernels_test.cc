// Integer kernels of the CPU backend: the uint8 x int8 GEMM with requantization (B as given and
// transposed; every kernel the CPU can run, odd shapes, signed and unsigned outputs, a raised
// clamp) against a naive loop with the same rounding rule (float32 (acc + bias) * scale, round
// half to even, + zero point, clamp), exactly; the QuantizeLinear / DequantizeLinear maps at
// each ISA level against the reference formulas; the depthwise kernels against each other; the
// byte table lookup; QLinearConv, peregrine.QGemm, TableLookup and Q / DQ nodes through the CPU
// backend against the reference backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/gemm/qu8_gemm.h"
#include "backends/cpu/kernels/byte_transpose.h"
#include "backends/cpu/ukernels/q8_ukernels.h"
#include "backends/reference/reference_backend.h"
#include "cpu_one_node_graph.h"

namespace peregrine {
namespace {

using cpu::testing::int_attr;
using cpu::testing::ints_attr;
using cpu::testing::OneNodeGraph;

template <class T>
std::vector<T> random_ints(size_t n, int lo, int hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(u(rng));
  return v;
}

struct GemmCase {
  int64_t m, n, k;
  cpu::Qu8Output out;
};

void check_gemm(const cpu::Qu8GemmKernelInfo& kernel, const GemmCase& gc, int threads) {
  SCOPED_TRACE(std::string(kernel.name) + " m=" + std::to_string(gc.m) +
               " n=" + std::to_string(gc.n) + " k=" + std::to_string(gc.k) +
               " threads=" + std::to_string(threads));
  const auto w = random_ints<int8_t>(static_cast<size_t>(gc.m * gc.k), -128, 127, 1);
  const auto x = random_ints<uint8_t>(static_cast<size_t>(gc.k * gc.n), 0, 255, 2);
  const auto bias = random_ints<int32_t>(static_cast<size_t>(gc.m), -5000, 5000, 3);
  std::vector<float> scale(static_cast<size_t>(gc.m));
  for (int64_t i = 0; i < gc.m; ++i) scale[i] = 1.0f / (64.0f * static_cast<float>(gc.k) + i);
  const auto packed = cpu::Qu8PackedA::pack(kernel, w.data(), gc.k, gc.m, gc.k);
  for (int64_t i = 0; i < gc.m; ++i) {
    int32_t sum = 0;
    for (int64_t p = 0; p < gc.k; ++p) sum += w[i * gc.k + p];
    ASSERT_EQ(packed.row_sums()[i], sum);
  }
  // C with a guard column each side of every row.
  const int64_t ldc = gc.n + 2;
  std::vector<uint8_t> c(static_cast<size_t>(gc.m * ldc), 0xAB);
  cpu::qu8_gemm(gc.m, gc.n, packed, x.data(), gc.n, c.data() + 1, ldc,
                cpu::Qu8Requant{bias.data(), scale.data(), gc.out}, threads);
  for (int64_t i = 0; i < gc.m; ++i) {
    ASSERT_EQ(c[i * ldc], 0xAB);
    ASSERT_EQ(c[i * ldc + gc.n + 1], 0xAB);
    for (int64_t j = 0; j < gc.n; ++j) {
      int32_t acc = 0;
      for (int64_t p = 0; p < gc.k; ++p) acc += w[i * gc.k + p] * x[p * gc.n + j];
      const float v = static_cast<float>(acc + bias[i]) * scale[i];
      const int32_t q = std::clamp(static_cast<int32_t>(std::nearbyint(v)) + gc.out.zero_point,
                                   gc.out.lo, gc.out.hi);
      ASSERT_EQ(c[i * ldc + 1 + j], static_cast<uint8_t>(q)) << "at " << i << ", " << j;
    }
  }
  // B given transposed (row j of B^T is column j of B, padded rows): the same C.
  const int64_t ldbt = gc.k + 3;
  std::vector<uint8_t> xt(static_cast<size_t>(gc.n * ldbt), 0xCD);
  for (int64_t p = 0; p < gc.k; ++p)
    for (int64_t j = 0; j < gc.n; ++j) xt[j * ldbt + p] = x[p * gc.n + j];
  std::vector<uint8_t> ct(c.size(), 0xAB);
  cpu::qu8_gemm_bt(gc.m, gc.n, packed, xt.data(), ldbt, ct.data() + 1, ldc,
                   cpu::Qu8Requant{bias.data(), scale.data(), gc.out}, threads);
  ASSERT_EQ(ct, c);
}

// qu8_gemm_conv (B packed from the image) equals qu8_gemm on the im2col matrix, exactly, with
// every kernel this CPU runs: strides 1 and 2 across (and 2 down), "same" and other pads,
// dilations, outputs narrower than a panel, depths not a multiple of four.
TEST(CpuQu8Gemm, ConvPackedFromTheImageMatchesIm2col) {
  struct Geometry {
    int64_t c, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  };
  const cpu::Qu8Output out{.zero_point = 9, .lo = 0, .hi = 255, .is_signed = false};
  for (const cpu::Qu8GemmKernelInfo* kernel : cpu::qu8_gemm_kernels_runnable())
    for (const Geometry& q : {Geometry{3, 13, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
                              Geometry{5, 9, 8, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1},
                              Geometry{4, 12, 40, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
                              Geometry{3, 20, 19, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3},
                              Geometry{6, 15, 14, 3, 3, 2, 2, 1, 1, 1, 0, 2, 1},
                              Geometry{2, 9, 70, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0},
                              Geometry{3, 12, 12, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},
                              Geometry{2, 10, 30, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0},
                              Geometry{2, 7, 5, 3, 3, 1, 2, 2, 1, 1, 3, 0, 2},
                              Geometry{1, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}}) {
      SCOPED_TRACE(std::string(kernel->name) + " c=" + std::to_string(q.c) + " " +
                   std::to_string(q.h) + "x" + std::to_string(q.w) + " k=" + std::to_string(q.kh) +
                   "x" + std::to_string(q.kw) + " s=" + std::to_string(q.sh) + "," +
                   std::to_string(q.sw) + " d=" + std::to_string(q.dh) + "," +
                   std::to_string(q.dw));
      const int64_t oh = (q.h + q.pt + q.pb - (q.kh - 1) * q.dh - 1) / q.sh + 1;
      const int64_t ow = (q.w + q.pl + q.pr - (q.kw - 1) * q.dw - 1) / q.sw + 1;
      const int64_t m = 19, k = q.c * q.kh * q.kw, n = oh * ow;
      const uint8_t x_zero = 117;
      const auto image = random_ints<uint8_t>(static_cast<size_t>(q.c * q.h * q.w), 0, 255, 41);
      std::vector<uint8_t> cols(static_cast<size_t>(k * n));
      for (int64_t r = 0; r < k; ++r) {
        const int64_t ch = r / (q.kh * q.kw), i = r / q.kw % q.kh, j = r % q.kw;
        for (int64_t p = 0; p < n; ++p) {
          const int64_t iy = p / ow * q.sh - q.pt + i * q.dh, ix = p % ow * q.sw - q.pl + j * q.dw;
          cols[r * n + p] = iy >= 0 && iy < q.h && ix >= 0 && ix < q.w
                                ? image[(ch * q.h + iy) * q.w + ix]
                                : x_zero;
        }
      }
      const auto w = random_ints<int8_t>(static_cast<size_t>(m * k), -127, 127, 42);
      const auto packed = cpu::Qu8PackedA::pack(*kernel, w.data(), k, m, k);
      std::vector<int32_t> bias(m, -300);
      std::vector<float> scale(m, 0.0007f);
      const cpu::Qu8Requant rq{bias.data(), scale.data(), out};
      std::vector<uint8_t> want(m * n), got(m * n);
      cpu::qu8_gemm(m, n, packed, cols.data(), n, want.data(), n, rq, 1);
      const cpu::Qu8ConvImage conv{image.data(), q.c,  q.h,  q.w,  oh,   ow,   q.kh,  q.kw,
                                   q.sh,         q.sw, q.dh, q.dw, q.pt, q.pl, x_zero};
      ASSERT_TRUE(cpu::qu8_conv_packs_directly(q.sw));
      for (int threads : {1, 2}) {
        std::fill(got.begin(), got.end(), 0);
        cpu::qu8_gemm_conv(m, packed, conv, got.data(), n, rq, threads);
        ASSERT_EQ(got, want) << "threads=" << threads;
      }
    }
}

// transpose_bytes: whole 16 x 16 blocks and the edges, strides wider than the rows.
TEST(CpuByteTranspose, MatchesNaiveLoop) {
  for (int64_t rows : {1, 15, 16, 17, 33, 64})
    for (int64_t cols : {1, 7, 16, 31, 48}) {
      const int64_t src_stride = cols + 3, dst_stride = rows + 5;
      const auto src = random_ints<uint8_t>(static_cast<size_t>(rows * src_stride), 0, 255, 51);
      std::vector<uint8_t> got(static_cast<size_t>(cols * dst_stride), 0xEE);
      std::vector<uint8_t> want = got;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) want[c * dst_stride + r] = src[r * src_stride + c];
      cpu::transpose_bytes(src.data(), src_stride, got.data(), dst_stride, rows, cols);
      ASSERT_EQ(got, want) << rows << " x " << cols;
    }
}

TEST(CpuQu8Gemm, MatchesNaiveLoopExactly) {
  const cpu::Qu8Output u8{.zero_point = 3, .lo = 0, .hi = 255, .is_signed = false};
  const cpu::Qu8Output s8{.zero_point = -5, .lo = -128, .hi = 127, .is_signed = true};
  const cpu::Qu8Output relu{.zero_point = 20, .lo = 20, .hi = 255, .is_signed = false};
  for (const cpu::Qu8GemmKernelInfo* kernel : cpu::qu8_gemm_kernels_runnable())
    for (int threads : {1, 2, 3})
      for (const GemmCase& gc :
           {GemmCase{1, 1, 1, u8}, GemmCase{13, 31, 5, u8}, GemmCase{14, 32, 4, s8},
            GemmCase{15, 33, 7, relu}, GemmCase{29, 70, 130, s8}, GemmCase{3, 100, 603, u8},
            GemmCase{40, 9, 2, relu}})
        check_gemm(*kernel, gc, threads);
}

// The reference formulas: QuantizeLinear rounds x / scale half to even (NaN -> zero point),
// adds the zero point and saturates; DequantizeLinear is (x - zp) * scale in float32.
TEST(CpuQ8Maps, MatchReferenceFormulas) {
  std::vector<float> x = {0.0f,
                          2.5f,
                          3.5f,
                          -2.5f,
                          1e10f,
                          -1e10f,
                          std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity(),
                          -0.49f,
                          127.4f,
                          0.25f,
                          -0.25f,
                          0.2499f,
                          0.5f,
                          -0.5f};
  for (float v : cpu::testing::random_floats(37, 4, -300.0f, 300.0f)) x.push_back(v);
  using QFn = cpu::Q8QuantizeFn;
  using DFn = cpu::Q8DequantizeFn;
  std::vector<std::pair<QFn, DFn>> levels = {
      {cpu::q8_quantize__scalar, cpu::q8_dequantize__scalar}};
  if (cpu::isa_supported(cpu::Isa::kAvx512))
    levels.push_back({cpu::avx512::q8_quantize__avx512, cpu::avx512::q8_dequantize__avx512});
  for (auto [quantize, dequantize] : levels)
    for (bool is_signed : {false, true})
      for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, x.size()}) {
        const int32_t zp = is_signed ? -3 : 7;
        std::vector<uint8_t> q(n + 1, 0xCD);
        quantize(x.data(), n, 1.0f, zp, is_signed, q.data());
        EXPECT_EQ(q[n], 0xCD);
        const double lo = is_signed ? -128 : 0, hi = is_signed ? 127 : 255;
        for (size_t i = 0; i < n; ++i) {
          const double want =
              std::isnan(x[i]) ? zp : std::clamp(std::nearbyint(double{x[i]}) + zp, lo, hi);
          const double got = is_signed ? static_cast<int8_t>(q[i]) : q[i];
          EXPECT_EQ(got, want) << "x=" << x[i];
        }
        std::vector<float> d(n + 1, -1.0f);
        dequantize(q.data(), n, 0.25f, zp, is_signed, d.data());
        EXPECT_EQ(d[n], -1.0f);
        for (size_t i = 0; i < n; ++i) {
          const float v = is_signed ? static_cast<int8_t>(q[i]) : q[i];
          EXPECT_EQ(d[i], (v - static_cast<float>(zp)) * 0.25f);
        }
      }
  // A huge scale (calibrated on -FLT_MAX masks): quotients of ordinary values are denormal and
  // must still round as float32 division says.
  const float big = 1e36f;
  std::vector<float> y = {1e-3f,    -7.0f,    0.2e36f, 0.25e36f, 0.5e36f,
                          0.51e36f, -1.5e36f, 3e38f,   -3.4e38f, 1e-39f};
  for (auto [quantize, dequantize] : levels) {
    std::vector<uint8_t> q(y.size());
    quantize(y.data(), y.size(), big, 100, false, q.data());
    for (size_t i = 0; i < y.size(); ++i)
      EXPECT_EQ(q[i], std::clamp(std::nearbyint(y[i] / big) + 100.0f, 0.0f, 255.0f)) << y[i];
  }
}

template <class T>
Tensor int_tensor(Shape shape, int lo, int hi, uint32_t seed) {
  Tensor t = Tensor::zeros(
      sizeof(T) == 1 ? (std::is_signed_v<T> ? DType::kInt8 : DType::kUInt8) : DType::kInt32, shape);
  const auto v = random_ints<T>(static_cast<size_t>(t.numel()), lo, hi, seed);
  std::copy(v.begin(), v.end(), static_cast<T*>(t.raw()));
  return t;
}

// Same shape, 8-bit elements at most one apart in at most 2% of places: the kernel multiplies
// in float32 where the reference kernel multiplies the int32 sum in double, so a value within
// float32 rounding of a rounding boundary may land one step apart.
void expect_within_one_step(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.dtype(), want.dtype());
  int64_t off = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double d = std::fabs(got.get_as_double(i) - want.get_as_double(i));
    ASSERT_LE(d, 1.0) << "at " << i;
    off += d > 0;
  }
  EXPECT_LE(off, std::max<int64_t>(1, got.numel() / 50));
}

struct QConvCase {
  int64_t n, c, h, w, m, kh, kw, group;
  std::vector<int64_t> strides, pads, dilations;
  bool per_channel, bias, signed_out;
};

void check_qlinear_conv(const QConvCase& q) {
  SCOPED_TRACE("c=" + std::to_string(q.c) + " m=" + std::to_string(q.m) +
               " k=" + std::to_string(q.kh) + "x" + std::to_string(q.kw) +
               " group=" + std::to_string(q.group));
  std::vector<float> sw(static_cast<size_t>(q.per_channel ? q.m : 1));
  for (size_t i = 0; i < sw.size(); ++i) sw[i] = 0.002f + 0.0003f * static_cast<float>(i);
  const Shape sw_shape = q.per_channel ? Shape{q.m} : Shape{};
  std::vector<std::pair<std::string, Tensor>> inputs = {
      {"X", int_tensor<uint8_t>({q.n, q.c, q.h, q.w}, 0, 255, 1)},
      {"XS", Tensor::scalar<float>(0.02f)},
      {"XZ", Tensor::scalar<uint8_t>(119)},
      {"W", int_tensor<int8_t>({q.m, q.c / q.group, q.kh, q.kw}, -127, 127, 2)},
      {"WS", Tensor::from_vector<float>(sw, sw_shape)},
      {"WZ", q.per_channel ? Tensor::from_vector<int8_t>(std::vector<int8_t>(q.m, 0), {q.m})
                           : Tensor::scalar<int8_t>(0)},
      {"YS", Tensor::scalar<float>(0.05f)},
      {"YZ", q.signed_out ? Tensor::scalar<int8_t>(-9) : Tensor::scalar<uint8_t>(131)}};
  if (q.bias) inputs.push_back({"B", int_tensor<int32_t>({q.m}, -3000, 3000, 3)});
  std::vector<bool> constant(inputs.size(), true);
  constant[0] = false;
  std::vector<ir::Attribute> attrs = {ints_attr("strides", q.strides), ints_attr("pads", q.pads),
                                      ints_attr("dilations", q.dilations),
                                      int_attr("group", q.group)};
  OneNodeGraph g("QLinearConv", inputs, constant, attrs);
  const Tensor want = g.run(reference_backend(), 1, nullptr);
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE("threads=" + std::to_string(threads));
    std::string kernel;
    const Tensor got = g.run(cpu_backend(), threads, &kernel);
    const bool depthwise = q.group == q.c && q.m == q.c;
    EXPECT_EQ(kernel.rfind(depthwise ? "cpu/qlinear-conv-dwconv" : "cpu/qlinear-conv-qu8_gemm", 0),
              0u)
        << kernel;
    expect_within_one_step(got, want);
  }
}

TEST(CpuQLinearConv, MatchesReference) {
  // 1x1: the input is the GEMM operand; then im2col: strided, padded, dilated, odd sizes.
  check_qlinear_conv({1, 8, 7, 9, 15, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, true, true, false});
  check_qlinear_conv({2, 5, 9, 8, 16, 1, 1, 1, {2, 2}, {0, 0, 0, 0}, {1, 1}, false, true, true});
  check_qlinear_conv({1, 3, 13, 11, 17, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, false, false});
  check_qlinear_conv({1, 7, 15, 14, 29, 3, 3, 1, {2, 2}, {1, 0, 2, 1}, {1, 1}, true, true, true});
  check_qlinear_conv({1, 4, 12, 12, 6, 3, 3, 1, {1, 1}, {2, 2, 2, 2}, {2, 2}, true, true, false});
  check_qlinear_conv({1, 3, 20, 19, 8, 7, 7, 1, {2, 2}, {3, 3, 3, 3}, {1, 1}, true, true, false});
  check_qlinear_conv({1, 3, 9, 151, 5, 3, 3, 1, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, true, false});
  // Groups: grouped and depthwise.
  check_qlinear_conv({1, 8, 9, 9, 12, 3, 3, 4, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, true, false});
  // Depthwise: its own kernel; rows wider than a vector, strides 1 and 2 (and 3: scalar),
  // dilation, 5x5, uneven pads.
  check_qlinear_conv({1, 6, 10, 7, 6, 3, 3, 6, {2, 1}, {1, 1, 1, 1}, {1, 1}, true, true, true});
  check_qlinear_conv({2, 5, 9, 37, 5, 3, 3, 5, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, true, false});
  check_qlinear_conv({1, 4, 21, 35, 4, 3, 3, 4, {2, 2}, {0, 1, 1, 0}, {1, 1}, false, true, false});
  check_qlinear_conv({1, 3, 17, 19, 3, 5, 5, 3, {2, 2}, {2, 2, 2, 2}, {1, 1}, true, false, true});
  check_qlinear_conv({1, 3, 15, 20, 3, 3, 3, 3, {1, 1}, {2, 2, 2, 2}, {2, 2}, true, true, false});
  check_qlinear_conv({1, 2, 14, 23, 2, 3, 3, 2, {3, 3}, {1, 1, 1, 1}, {1, 1}, true, true, false});
  // Stride 1 down with 5x5 and 7x7 taps (two output rows at a time, an odd one left over),
  // rows wider than one 64-byte load, a 1x8 kernel (two tap groups, one row).
  check_qlinear_conv({1, 3, 11, 70, 3, 5, 5, 3, {1, 1}, {2, 2, 2, 2}, {1, 1}, true, true, false});
  check_qlinear_conv({1, 2, 9, 9, 2, 7, 7, 2, {1, 1}, {3, 3, 3, 3}, {1, 1}, true, true, true});
  check_qlinear_conv({1, 2, 5, 30, 2, 1, 8, 2, {1, 2}, {0, 3, 0, 4}, {1, 1}, true, true, false});
  // An empty batch (an empty output), and an empty image whose outputs see only padding.
  check_qlinear_conv({0, 4, 6, 5, 4, 3, 3, 4, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, true, false});
  check_qlinear_conv({1, 4, 0, 5, 4, 3, 3, 4, {1, 1}, {2, 1, 2, 1}, {1, 1}, true, true, false});
}

struct QGemmCase {
  Shape a;
  int64_t n;
  bool trans_b, per_column, bias, signed_out;
};

// peregrine.QGemm: rank-2 and rank-3 activations, both weight layouts, per-tensor and
// per-column weight scales, with and without a bias, both output types, odd sizes.
void check_qgemm(const QGemmCase& q) {
  const int64_t k = q.a.back();
  SCOPED_TRACE("k=" + std::to_string(k) + " n=" + std::to_string(q.n) +
               " transB=" + std::to_string(q.trans_b));
  std::vector<float> sw(static_cast<size_t>(q.per_column ? q.n : 1));
  for (size_t i = 0; i < sw.size(); ++i) sw[i] = 0.003f + 0.0002f * static_cast<float>(i);
  const Shape sw_shape = q.per_column ? Shape{q.n} : Shape{};
  std::vector<std::pair<std::string, Tensor>> inputs = {
      {"A", int_tensor<uint8_t>(q.a, 0, 255, 11)},
      {"AS", Tensor::scalar<float>(0.03f)},
      {"AZ", Tensor::scalar<uint8_t>(121)},
      {"B", int_tensor<int8_t>(q.trans_b ? Shape{q.n, k} : Shape{k, q.n}, -127, 127, 12)},
      {"BS", Tensor::from_vector<float>(sw, sw_shape)},
      {"BZ", q.per_column ? Tensor::from_vector<int8_t>(std::vector<int8_t>(q.n, 0), {q.n})
                          : Tensor::scalar<int8_t>(0)},
      {"C", q.bias ? int_tensor<int32_t>({q.n}, -4000, 4000, 13) : Tensor()},
      {"YS", Tensor::scalar<float>(0.4f)},
      {"YZ", q.signed_out ? Tensor::scalar<int8_t>(5) : Tensor::scalar<uint8_t>(126)}};
  std::vector<bool> constant(inputs.size(), true);
  constant[0] = false;
  if (!q.bias) inputs[6].first.clear();  // an omitted optional input
  OneNodeGraph g("QGemm", inputs, constant, {int_attr("transB", q.trans_b ? 1 : 0)}, "peregrine");
  const Tensor want = g.run(reference_backend(), 1, nullptr);
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE("threads=" + std::to_string(threads));
    std::string kernel;
    const Tensor got = g.run(cpu_backend(), threads, &kernel);
    EXPECT_EQ(kernel.rfind("cpu/qgemm-qu8_gemm", 0), 0u) << kernel;
    expect_within_one_step(got, want);
  }
}

// Found by fuzz_pipeline (UBSan): ConvInteger with a zero batch and pads of 5.5e18 has an empty
// output whose spatial dims' product overflows; the reference kernel has nothing to compute.
TEST(ReferenceConvInteger, EmptyOutputWithHugeDimsRuns) {
  std::vector<std::pair<std::string, Tensor>> inputs = {
      {"X", Tensor::zeros(DType::kUInt8, {0, 1, 3, 3})},
      {"W", Tensor::zeros(DType::kUInt8, {4, 1, 2, 2})}};
  OneNodeGraph g("ConvInteger", inputs, {false, true},
                 {ints_attr("pads", {int64_t{5495223972890017733}, 1, 1, 1})}, "", 10);
  const Tensor y = g.run(reference_backend(), 1, nullptr);
  EXPECT_EQ(y.numel(), 0);
  EXPECT_EQ(y.dim(2), int64_t{5495223972890017733} + 1 + 3 - 2 + 1);
}

TEST(CpuQGemm, MatchesReference) {
  check_qgemm({{7, 13}, 9, false, true, true, false});
  check_qgemm({{33, 64}, 35, true, false, true, true});
  check_qgemm({{2, 5, 31}, 17, false, false, false, false});
  check_qgemm({{1, 130}, 70, true, true, false, true});
  check_qgemm({{3, 41, 8}, 64, true, true, true, false});
}

// The depthwise micro-kernels on one channel: the AVX-512 row kernel on the zero-padded int16
// plane and the VNNI pair-plane kernel on pair rows made from the uint8 image, against the
// scalar kernel, exactly (the same int32 sums and float32 requantization). Odd widths, uneven
// pads, both strides across, strides and dilations down, odd and even kernel heights.
TEST(CpuQu8Dwconv, KernelsAgreeExactly) {
  struct Case {
    size_t kh, kw, sh, sw, dh, dw, h, w, pt, pl, pb, pr;
  };
  const cpu::Qu8Output out{.zero_point = 7, .lo = 0, .hi = 255, .is_signed = false};
  const int32_t x_zero = 113;
  for (const Case& c :
       {Case{3, 3, 1, 1, 1, 1, 7, 35, 1, 1, 1, 1}, Case{3, 3, 2, 2, 1, 1, 11, 34, 0, 1, 1, 0},
        Case{3, 3, 2, 2, 1, 1, 12, 33, 1, 0, 0, 1}, Case{5, 5, 2, 2, 1, 1, 13, 15, 2, 2, 2, 2},
        Case{5, 5, 1, 1, 1, 1, 4, 66, 2, 2, 2, 2}, Case{7, 7, 1, 2, 1, 1, 7, 17, 3, 3, 3, 3},
        Case{3, 3, 1, 1, 2, 2, 7, 17, 2, 2, 2, 2}, Case{2, 4, 1, 2, 1, 1, 5, 37, 0, 2, 1, 1},
        Case{1, 3, 3, 1, 1, 1, 7, 16, 0, 1, 0, 1}, Case{3, 5, 2, 1, 2, 3, 10, 31, 1, 1, 1, 1},
        Case{3, 3, 2, 2, 1, 1, 2, 70, 3, 1, 3, 1}}) {
    SCOPED_TRACE("k=" + std::to_string(c.kh) + "x" + std::to_string(c.kw) +
                 " s=" + std::to_string(c.sh) + "," + std::to_string(c.sw) +
                 " d=" + std::to_string(c.dh) + "," + std::to_string(c.dw) +
                 " w=" + std::to_string(c.w) + " pl=" + std::to_string(c.pl));
    const size_t ph = c.h + c.pt + c.pb, pw = c.w + c.pl + c.pr;
    const cpu::Qu8DwconvGeometry g{c.kh,
                                   c.kw,
                                   c.sh,
                                   c.sw,
                                   c.dh,
                                   c.dw,
                                   (ph - (c.kh - 1) * c.dh - 1) / c.sh + 1,
                                   (pw - (c.kw - 1) * c.dw - 1) / c.sw + 1,
                                   pw};
    const auto image = random_ints<uint8_t>(c.h * c.w, 0, 255, 31);
    std::vector<int16_t> plane(ph * pw, 0);
    for (size_t r = 0; r < c.h; ++r)
      for (size_t x = 0; x < c.w; ++x)
        plane[(r + c.pt) * pw + c.pl + x] = static_cast<int16_t>(image[r * c.w + x] - x_zero);
    const auto w = random_ints<int8_t>(c.kh * c.kw, -128, 127, 32);
    const int32_t bias = -1234;
    const float scale = 1.0f / (40.0f * static_cast<float>(c.kh * c.kw));
    std::vector<uint8_t> want(g.oh * g.ow), got(g.oh * g.ow + 1, 0xEE);
    cpu::qu8_dwconv2d__scalar(plane.data(), w.data(), g, bias, scale, out, want.data());
    if (cpu::isa_supported(cpu::Isa::kAvx512)) {
      cpu::avx512::qu8_dwconv2d__avx512(plane.data(), w.data(), g, bias, scale, out, got.data());
      for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "avx512 at " << i;
    }
    if (!cpu::isa_supported(cpu::Isa::kAvx512) || !cpu::cpu_features().avx512_vnni) continue;
    if (cpu::cpu_features().avx512_vbmi) {
      // The image-bytes kernel: taps as quads per row, the zero point folded into the bias.
      ASSERT_TRUE(cpu::avx512vnni_vbmi::qu8_dwconv2d_bytes_supported(g));
      std::vector<int32_t> quads;
      int32_t sum = 0;
      for (size_t i = 0; i < c.kh; ++i)
        for (size_t q = 0; q < (c.kw + 3) / 4; ++q) {
          uint32_t quad = 0;
          for (size_t b = 0; b < 4 && 4 * q + b < c.kw; ++b) {
            quad |= static_cast<uint32_t>(static_cast<uint8_t>(w[i * c.kw + 4 * q + b])) << (8 * b);
            sum += w[i * c.kw + 4 * q + b];
          }
          quads.push_back(static_cast<int32_t>(quad));
        }
      std::vector<uint8_t> zero_row(c.w + 128), index(128);
      cpu::avx512vnni_vbmi::qu8_dwconv2d_bytes_index(g, index.data());
      std::fill(got.begin(), got.end(), 0xEE);
      cpu::avx512vnni_vbmi::qu8_dwconv2d_bytes__avx512vnni_vbmi(
          image.data(), c.h, c.w, static_cast<uint8_t>(x_zero), c.pt, c.pl, zero_row.data(),
          index.data(), quads.data(), g, bias - x_zero * sum, scale, out, got.data());
      for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "bytes at " << i;
      ASSERT_EQ(got.back(), 0xEE);  // nothing written past the output
    }
    ASSERT_EQ(cpu::avx512vnni::qu8_dwconv2d_pairs_supported(g), c.sw <= 2) << "sw=" << c.sw;
    if (c.sw > 2) continue;
    const size_t kh2 = (c.kh + 1) / 2, pwp = (pw + c.sw - 1) / c.sw;
    std::vector<int32_t> wpairs;
    for (size_t i = 0; i < kh2; ++i)
      for (size_t j = 0; j < c.kw; ++j) {
        const uint32_t top = static_cast<uint16_t>(int16_t{w[2 * i * c.kw + j]});
        const uint32_t below =
            2 * i + 1 < c.kh ? static_cast<uint16_t>(int16_t{w[(2 * i + 1) * c.kw + j]}) : 0u;
        wpairs.push_back(static_cast<int32_t>(top | (below << 16)));
      }
    std::vector<int32_t> pairs(ph * c.sw * pwp, 0x7777);
    cpu::avx512vnni::qu8_pair_rows__avx512vnni(image.data(), c.h, c.w, x_zero, c.pt, c.pl, ph, g,
                                               pwp, pairs.data());
    // The pair rows the kernel reads (oy * sh + 2 i dh): every entry as the rule says.
    std::vector<bool> read(ph, false);
    for (size_t oy = 0; oy < g.oh; ++oy)
      for (size_t i = 0; i < kh2; ++i) read[oy * c.sh + 2 * i * c.dh] = true;
    for (size_t r = 0; r < ph; ++r)
      for (size_t col = 0; col < pw && read[r]; ++col) {
        const int32_t low = plane[r * pw + col];
        const int32_t high = r + c.dh < ph ? plane[(r + c.dh) * pw + col] : 0;
        const int32_t want_pair = static_cast<int32_t>((static_cast<uint32_t>(low) & 0xFFFFu) |
                                                       (static_cast<uint32_t>(high) << 16));
        ASSERT_EQ(pairs[r * c.sw * pwp + col % c.sw * pwp + col / c.sw], want_pair)
            << "pair row " << r << " column " << col;
      }
    std::fill(got.begin(), got.end(), 0xEE);
    cpu::avx512vnni::qu8_dwconv2d_pairs__avx512vnni(pairs.data(), wpairs.data(), g, pwp, bias,
                                                    scale, out, got.data());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "pairs at " << i;
    ASSERT_EQ(got.back(), 0xEE);  // nothing written past the output
  }
}

// QuantizeDequantize: the fused map at each level equals dequantize(quantize(x)) exactly, at an
// ordinary and a huge scale, both types; and the node through the CPU backend equals the
// reference kernel (QuantizeLinear then DequantizeLinear).
TEST(CpuQuantizeDequantize, EqualsTheTwoMaps) {
  std::vector<float> x = {0.0f,
                          -0.0f,
                          -0.003f,
                          0.01f,
                          -0.01f,
                          0.0125f,
                          0.025f,
                          -0.0375f,
                          1e10f,
                          -1e10f,
                          std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::infinity(),
                          3e38f,
                          1e-39f};
  for (float v : cpu::testing::random_floats(61, 9, -3.0f, 3.0f)) x.push_back(v);
  struct Level {
    cpu::Q8FakeQuantizeFn fake;
    cpu::Q8QuantizeFn quantize;
    cpu::Q8DequantizeFn dequantize;
  };
  std::vector<Level> levels = {
      {cpu::q8_fake_quantize__scalar, cpu::q8_quantize__scalar, cpu::q8_dequantize__scalar}};
  if (cpu::isa_supported(cpu::Isa::kAvx512))
    levels.push_back({cpu::avx512::q8_fake_quantize__avx512, cpu::avx512::q8_quantize__avx512,
                      cpu::avx512::q8_dequantize__avx512});
  for (const Level& level : levels)
    for (float scale : {0.025f, 1e36f})
      for (bool is_signed : {false, true}) {
        const int32_t zp = is_signed ? -5 : 131;
        std::vector<uint8_t> q(x.size());
        std::vector<float> want(x.size()), got(x.size() + 1, -9.0f);
        level.quantize(x.data(), x.size(), scale, zp, is_signed, q.data());
        level.dequantize(q.data(), x.size(), scale, zp, is_signed, want.data());
        level.fake(x.data(), x.size(), scale, zp, is_signed, got.data());
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_EQ(got[i], want[i]) << "x=" << x[i];
          ASSERT_EQ(std::signbit(got[i]), std::signbit(want[i])) << "x=" << x[i];  // no -0.0
        }
        ASSERT_EQ(got.back(), -9.0f);
      }
  for (bool is_signed : {false, true}) {
    OneNodeGraph g("QuantizeDequantize",
                   {{"X", cpu::testing::random_tensor({3, 7, 101}, 10, -4.0f, 4.0f)},
                    {"S", Tensor::scalar<float>(0.03f)},
                    {"Z", is_signed ? Tensor::scalar<int8_t>(9) : Tensor::scalar<uint8_t>(117)}},
                   {false, true, true}, {}, "peregrine");
    const Tensor want = g.run(reference_backend(), 1, nullptr);
    for (int threads : {1, 2}) {
      std::string kernel;
      const Tensor got = g.run(cpu_backend(), threads, &kernel);
      EXPECT_EQ(kernel.rfind("cpu/quantize-dequantize-", 0), 0u) << kernel;
      cpu::testing::expect_close(got, want, 0.0f);
    }
  }
}

// The byte lookup at each level the CPU runs (odd lengths, both loops' tails), and
// peregrine.TableLookup through the CPU backend, against a plain loop / the reference kernel.
TEST(CpuTableLookup, MatchesPlainLoop) {
  const auto table = random_ints<uint8_t>(256, 0, 255, 21);
  std::vector<std::pair<const char*, cpu::U8LookupFn>> kernels = {
      {"scalar", cpu::u8_lookup__scalar}};
  if (cpu::isa_supported(cpu::Isa::kAvx512) && cpu::cpu_features().avx512_vbmi)
    kernels.push_back({"avx512vbmi", cpu::avx512vbmi::u8_lookup__avx512vbmi});
  for (const auto& [name, fn] : kernels)
    for (size_t n : {0, 1, 63, 64, 65, 127, 128, 129, 300, 1000}) {
      SCOPED_TRACE(std::string(name) + " n=" + std::to_string(n));
      const auto x = random_ints<uint8_t>(n + 1, 0, 255, static_cast<uint32_t>(n));
      std::vector<uint8_t> y(n + 1, 0x5A);
      fn(x.data(), n, table.data(), y.data());
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(y[i], table[x[i]]) << "at " << i;
      ASSERT_EQ(y[n], 0x5A);  // nothing written past n
    }
  for (bool signed_in : {false, true}) {
    const Shape shape = {3, 1000, 7};
    OneNodeGraph g("TableLookup",
                   {{"X", signed_in ? int_tensor<int8_t>(shape, -128, 127, 22)
                                    : int_tensor<uint8_t>(shape, 0, 255, 22)},
                    {"T", int_tensor<int8_t>({256}, -128, 127, 23)}},
                   {false, true}, {}, "peregrine");
    const Tensor want = g.run(reference_backend(), 1, nullptr);
    for (int threads : {1, 2}) {
      std::string kernel;
      const Tensor got = g.run(cpu_backend(), threads, &kernel);
      EXPECT_EQ(kernel.rfind("cpu/table-lookup-", 0), 0u) << kernel;
      ASSERT_EQ(got.dtype(), DType::kInt8);
      for (int64_t i = 0; i < want.numel(); ++i)
        ASSERT_EQ(got.get_as_double(i), want.get_as_double(i)) << "at " << i;
    }
  }
}

TEST(CpuQuantizeNodes, MatchReference) {
  // Per tensor and per axis (axis 1 and the last axis), both 8-bit types, odd sizes.
  for (bool is_signed : {false, true})
    for (int64_t axis : {-1, 1}) {
      SCOPED_TRACE("signed=" + std::to_string(is_signed) + " axis=" + std::to_string(axis));
      const Shape shape = {2, 5, 3, 7};
      const int64_t channels = axis == 1 ? 5 : 7;
      std::vector<float> scales(static_cast<size_t>(channels));
      for (int64_t i = 0; i < channels; ++i) scales[i] = 0.01f * static_cast<float>(i + 1);
      Tensor zp = is_signed ? int_tensor<int8_t>({channels}, -20, 20, 5)
                            : int_tensor<uint8_t>({channels}, 100, 150, 5);
      for (bool per_axis : {false, true}) {
        Tensor scale = per_axis ? Tensor::from_vector<float>(scales, {channels})
                                : Tensor::scalar<float>(0.03f);
        Tensor zero =
            per_axis ? zp : (is_signed ? Tensor::scalar<int8_t>(-4) : Tensor::scalar<uint8_t>(128));
        OneNodeGraph q(
            "QuantizeLinear",
            {{"X", cpu::testing::random_tensor(shape, 6, -3.0f, 3.0f)}, {"S", scale}, {"Z", zero}},
            {false, true, true}, {int_attr("axis", axis)});
        const Tensor want_q = q.run(reference_backend(), 1, nullptr);
        std::string kernel;
        const Tensor got_q = q.run(cpu_backend(), 2, &kernel);
        EXPECT_EQ(kernel.rfind("cpu/quantize-", 0), 0u) << kernel;
        ASSERT_EQ(got_q.dtype(), want_q.dtype());
        for (int64_t i = 0; i < want_q.numel(); ++i)
          ASSERT_EQ(got_q.get_as_double(i), want_q.get_as_double(i)) << "at " << i;
        OneNodeGraph d("DequantizeLinear", {{"X", want_q}, {"S", scale}, {"Z", zero}},
                       {false, true, true}, {int_attr("axis", axis)});
        const Tensor want_d = d.run(reference_backend(), 1, nullptr);
        const Tensor got_d = d.run(cpu_backend(), 2, &kernel);
        EXPECT_EQ(kernel.rfind("cpu/dequantize-", 0), 0u) << kernel;
        cpu::testing::expect_close(got_d, want_d, 0.0f);
      }
    }
}

// The CPU kernel does the reference's float32 operations: equal outputs. Scales with inexact
// products (0.1, 0.3) catch a product contracted into an FMA; 0.5 / 0.25 / 1 put quotients on
// half-integers (ties to even).
TEST(CpuQLinearAdd, MatchesReference) {
  struct Scales {
    float a, b, c;
  };
  for (Scales sc :
       {Scales{0.03f, 0.05f, 0.07f}, Scales{0.5f, 0.25f, 1.0f}, Scales{0.1f, 0.3f, 0.2f}})
    for (int64_t n : {1, 15, 16, 17, 100, 40000})
      for (bool signed_out : {false, true}) {
        SCOPED_TRACE("n=" + std::to_string(n) + " signed=" + std::to_string(signed_out) +
                     " c_scale=" + std::to_string(sc.c));
        OneNodeGraph g(
            "QLinearAdd",
            {{"A", int_tensor<uint8_t>({n}, 0, 255, 7)},
             {"AS", Tensor::scalar<float>(sc.a)},
             {"AZ", Tensor::scalar<uint8_t>(100)},
             {"B", int_tensor<int8_t>({n}, -128, 127, 8)},
             {"BS", Tensor::scalar<float>(sc.b)},
             {"BZ", Tensor::scalar<int8_t>(3)},
             {"CS", Tensor::scalar<float>(sc.c)},
             {"CZ", signed_out ? Tensor::scalar<int8_t>(-7) : Tensor::scalar<uint8_t>(90)}},
            {false, true, true, false, true, true, true, true}, {}, "peregrine");
        const Tensor want = g.run(reference_backend(), 1, nullptr);
        for (int threads : {1, 2}) {
          std::string kernel;
          const Tensor got = g.run(cpu_backend(), threads, &kernel);
          EXPECT_EQ(kernel.rfind("cpu/qlinear-add-", 0), 0u) << kernel;
          ASSERT_EQ(got.dtype(), want.dtype());
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(got.get_as_double(i), want.get_as_double(i)) << "at " << i;
        }
      }
}

}  // namespace
}  // namespace peregrine
