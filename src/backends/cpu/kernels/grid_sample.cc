// CPU kernel of GridSample on 4-D float32 inputs with mode linear (bilinear) or nearest, every
// padding mode and align_corners value (RAFT's correlation lookups, deformable heads). Per
// output position the two axes' taps (source index or "zero", weight) are computed once, with
// the reference kernel's coordinate arithmetic (float unnormalization, then the padding rule in
// double), and reused for every channel. Tasks are runs of output positions of one image.
// Cubic mode and other ranks run the reference.
#include <algorithm>
#include <cmath>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/vector_ops.h"
#include "backends/cpu/thread_pool.h"

namespace peregrine::cpu {

namespace {

enum class Padding { kZeros, kBorder, kReflection };

double reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x, n = std::floor(dx / range), r = dx - n * range;
    return std::fmod(n, 2.0) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi, n = std::floor(dx / range), r = dx - n * range;
    return std::fmod(n, 2.0) == 0 ? hi - r : lo + r;
  }
  return x;
}

struct AxisTaps {
  int64_t index[2];  // -1: reads zero
  float weight[2];
  int count;
};

class GridSampleKernel : public PreparedKernel {
 public:
  GridSampleKernel(bool nearest, Padding padding, bool align)
      : nearest_(nearest), padding_(padding), align_(align) {}
  std::string name() const override { return "cpu/grid_sample"; }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& grid = ctx.input(1);
    if (x.dtype() != DType::kFloat32 || grid.dtype() != DType::kFloat32 || x.rank() != 4 ||
        grid.rank() != 4 || grid.dim(3) != 2 || grid.dim(0) != x.dim(0) || x.dim(2) == 0 ||
        x.dim(3) == 0)
      return run_reference(ctx);
    Tensor& y = ctx.output_for_overwrite(0);
    if (y.numel() == 0) return Status::ok();
    const int64_t batch = x.dim(0), channels = x.dim(1), in_h = x.dim(2), in_w = x.dim(3);
    const int64_t out_size = grid.dim(1) * grid.dim(2), plane = in_h * in_w;
    const float* px = x.data<float>();
    const float* pg = grid.data<float>();
    float* py = y.data<float>();
    const bool bilinear_zeros = !nearest_ && padding_ == Padding::kZeros;
    const int64_t chunk = std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(1, channels));
    const int64_t per_image = (out_size + chunk - 1) / chunk;
    cpu_thread_pool().parallel_for(batch * per_image, ctx.num_threads(), [&](int64_t t, int) {
      const int64_t n = t / per_image, p0 = (t % per_image) * chunk;
      const int64_t p1 = std::min(out_size, p0 + chunk);
      const float* src = px + n * channels * plane;
      float* dst = py + n * channels * out_size;
      for (int64_t p = p0; p < p1; ++p) {
        const float* g = pg + (n * out_size + p) * 2;
        const AxisTaps ty = bilinear_zeros ? bilinear_zero_taps(g[1], in_h) : taps(g[1], in_h);
        const AxisTaps tx = bilinear_zeros ? bilinear_zero_taps(g[0], in_w) : taps(g[0], in_w);
        int64_t off[4];
        float w[4];
        int k = 0;
        for (int a = 0; a < ty.count; ++a)
          for (int b = 0; b < tx.count; ++b) {
            if (ty.index[a] < 0 || tx.index[b] < 0) continue;
            const float wt = ty.weight[a] * tx.weight[b];
            if (wt == 0) continue;
            off[k] = ty.index[a] * in_w + tx.index[b];
            w[k++] = wt;
          }
        for (int64_t c = 0; c < channels; ++c) {
          const float* pl = src + c * plane;
          float acc = 0;
          for (int i = 0; i < k; ++i) acc += w[i] * pl[off[i]];
          dst[c * out_size + p] = acc;
        }
      }
    });
    return Status::ok();
  }

 private:
  // taps() for bilinear sampling with zero padding, in float arithmetic: there no clamp or
  // reflection moves the coordinate, so the reference's double steps give these same floats
  // (base and fraction exact, 1 - fraction rounded once). Per position this is the whole cost
  // of a one-channel input (RAFT's correlation lookups). A coordinate outside (-1, len), or
  // NaN, has no tap inside.
  AxisTaps bilinear_zero_taps(float nc, int64_t len) const {
    const float lenf = static_cast<float>(len);
    const float c = align_ ? (nc + 1) / 2.0f * (lenf - 1) : ((nc + 1) * lenf - 1) / 2.0f;
    AxisTaps t;
    t.count = 2;
    if (!(c > -1.0f && c < lenf)) {
      t.index[0] = t.index[1] = -1;
      t.weight[0] = t.weight[1] = 0.0f;
      return t;
    }
    const float base = std::floor(c), frac = c - base;
    const int64_t i0 = static_cast<int64_t>(base);  // in [-1, len - 1]
    t.index[0] = i0;                                // -1 reads zero
    t.index[1] = i0 + 1 < len ? i0 + 1 : -1;
    t.weight[0] = 1.0f - frac;
    t.weight[1] = frac;
    return t;
  }

  // The taps of normalized coordinate `nc` along an axis of `len` inputs.
  AxisTaps taps(float nc, int64_t len) const {
    const float lenf = static_cast<float>(len);
    const float c = align_ ? (nc + 1) / 2.0f * (lenf - 1) : ((nc + 1) * lenf - 1) / 2.0f;
    const double lo = align_ ? 0.0 : -0.5, hi = align_ ? len - 1.0 : len - 0.5;
    double cd = std::isnan(c) ? -1e9 : std::clamp(static_cast<double>(c), -1e9, 1e9);
    if (nearest_) cd = std::nearbyint(cd);
    if (cd < lo || cd > hi) {
      if (padding_ == Padding::kBorder) cd = std::clamp(cd, 0.0, static_cast<double>(len - 1));
      else if (padding_ == Padding::kReflection) cd = reflect(cd, lo, hi);
    }
    cd = static_cast<float>(cd);
    AxisTaps t;
    if (nearest_) {
      t.count = 1;
      t.index[0] = static_cast<int64_t>(cd);
      t.weight[0] = 1.0f;
    } else {
      const double base = std::floor(cd), frac = cd - base;
      t.count = 2;
      t.index[0] = static_cast<int64_t>(base);
      t.index[1] = t.index[0] + 1;
      t.weight[0] = static_cast<float>(1 - frac);
      t.weight[1] = static_cast<float>(frac);
    }
    for (int i = 0; i < t.count; ++i) {
      int64_t& ix = t.index[i];
      if (padding_ == Padding::kZeros) {
        if (ix < 0 || ix >= len) ix = -1;
      } else if (padding_ == Padding::kBorder) {
        ix = std::clamp<int64_t>(ix, 0, len - 1);
      } else {
        ix = std::clamp<int64_t>(static_cast<int64_t>(reflect(static_cast<double>(ix), lo, hi)),
                                 0, len - 1);
      }
    }
    return t;
  }

  bool nearest_;
  Padding padding_;
  bool align_;
};

}  // namespace

bool claims_grid_sample(const ir::Node& node) {
  if (!(node.domain.empty() || node.domain == "ai.onnx") || node.op_type != "GridSample")
    return false;
  ir::AttrView attrs(node);
  auto mode = attrs.get_string("mode", node.opset >= 20 ? "linear" : "bilinear");
  auto pad = attrs.get_string("padding_mode", "zeros");
  if (!mode.is_ok() || !pad.is_ok()) return false;
  const std::string& m = mode.value();
  const std::string& p = pad.value();
  return (m == "linear" || m == "bilinear" || m == "nearest") &&
         (p == "zeros" || p == "border" || p == "reflection");
}

Expected<std::unique_ptr<PreparedKernel>> prepare_grid_sample(const ir::Node& node) {
  ir::AttrView attrs(node);
  PG_ASSIGN_OR_RETURN(std::string mode,
                      attrs.get_string("mode", node.opset >= 20 ? "linear" : "bilinear"));
  PG_ASSIGN_OR_RETURN(std::string pad, attrs.get_string("padding_mode", "zeros"));
  PG_ASSIGN_OR_RETURN(int64_t align, attrs.get_int("align_corners", 0));
  const Padding p = pad == "border" ? Padding::kBorder
                    : pad == "reflection" ? Padding::kReflection : Padding::kZeros;
  return std::unique_ptr<PreparedKernel>(new GridSampleKernel(mode == "nearest", p, align != 0));
}

}  // namespace peregrine::cpu
