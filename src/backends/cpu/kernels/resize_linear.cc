// CPU kernel of Resize mode=linear (bilinear) on a 4-D (N, C, H, W) float32 tensor resized along
// H and W only, every coordinate_transformation_mode but tf_crop_and_resize. The output sizes
// and scales come from the reference's planning (ops/resize_util.h) and each output row's and
// column's two taps from the same coordinate math (ops/resize_coordinate.h): source indices
// left and left + 1 clamped to the axis, weights 1 - ratio and ratio. Separable: per output
// row, the two source rows are interpolated along W into a per-thread scratch row pair (kept
// when the next output row reads the same source rows, as upsampling does), then blended.
// Tasks are chunks of a plane's output rows. antialias, exclude_outside and resizing N or C run
// the reference kernel.
#include <algorithm>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/resize_hw.h"
#include "backends/cpu/kernels/vector_ops.h"
#include "backends/cpu/thread_pool.h"
#include "ops/resize_coordinate.h"
#include "ops/resize_util.h"

namespace peregrine::cpu {

namespace {

struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<float> w0, w1;
};

void linear_taps(const std::string& ctm, int64_t in_len, int64_t out_len, double scale, Taps* t) {
  const size_t n = static_cast<size_t>(out_len);
  t->i0.resize(n);
  t->i1.resize(n);
  t->w0.resize(n);
  t->w1.resize(n);
  for (int64_t x = 0; x < out_len; ++x) {
    double x_ori = 0;
    resize_source_coordinate(ctm, x, in_len, out_len, scale, 0.0, 1.0, &x_ori);
    int64_t left = 0;
    double ratio = 0;
    resize_split_coordinate(x_ori, &left, &ratio);
    const size_t k = static_cast<size_t>(x);
    t->i0[k] = std::clamp<int64_t>(left, 0, in_len - 1);
    t->i1[k] = std::clamp<int64_t>(left + 1, 0, in_len - 1);
    t->w0[k] = static_cast<float>(1 - ratio);
    t->w1[k] = static_cast<float>(ratio);
  }
}

void interpolate_row(const float* src, const Taps& c, float* dst, int64_t out_w) {
  for (int64_t x = 0; x < out_w; ++x) {
    const size_t k = static_cast<size_t>(x);
    dst[x] = c.w0[k] * src[c.i0[k]] + c.w1[k] * src[c.i1[k]];
  }
}

class ResizeLinearKernel : public PreparedKernel {
 public:
  std::string name() const override { return "cpu/resize_linear"; }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kFloat32 || ctx.opset() < 11) return run_reference(ctx);
    ResizeHw r;
    PG_ASSIGN_OR_RETURN(bool mapped, plan_resize_hw(ctx, x, &r));
    if (!mapped) return run_reference(ctx);
    const ResizePlan& plan = r.plan;
    const std::string& ctm = r.ctm;
    const int64_t in_h = x.dim(2), in_w = x.dim(3), out_h = plan.out_dims[2],
                  out_w = plan.out_dims[3];
    Tensor& y = ctx.output_for_overwrite(0);
    if (y.numel() == 0) return Status::ok();
    linear_taps(ctm, in_h, out_h, plan.scales[2], &rows_);
    linear_taps(ctm, in_w, out_w, plan.scales[3], &cols_);
    const int threads = ctx.num_threads();
    scratch_.resize(static_cast<size_t>(threads) * 2 * static_cast<size_t>(out_w));
    const int64_t planes = x.dim(0) * x.dim(1);
    const int64_t chunks =
        std::clamp<int64_t>(out_h * out_w / kElementsPerTask, 1, std::max<int64_t>(1, out_h));
    const int64_t rows_per_chunk = (out_h + chunks - 1) / chunks;
    const float* px = x.data<float>();
    float* py = y.data<float>();
    cpu_thread_pool().parallel_for(planes * chunks, threads, [&](int64_t t, int thread) {
      const int64_t p = t / chunks, r0 = (t % chunks) * rows_per_chunk;
      const int64_t r1 = std::min(out_h, r0 + rows_per_chunk);
      const float* src = px + p * in_h * in_w;
      float* dst = py + p * out_h * out_w;
      float* h0 = scratch_.data() + static_cast<size_t>(thread) * 2 * static_cast<size_t>(out_w);
      float* h1 = h0 + out_w;
      int64_t have0 = -1, have1 = -1;  // source rows now in h0 / h1
      for (int64_t r = r0; r < r1; ++r) {
        const size_t k = static_cast<size_t>(r);
        const int64_t s0 = rows_.i0[k], s1 = rows_.i1[k];
        if (s0 == have1 && s0 != have0) {  // moving down one source row: reuse
          std::swap(h0, h1);
          std::swap(have0, have1);
        }
        if (s0 != have0) {
          interpolate_row(src + s0 * in_w, cols_, h0, out_w);
          have0 = s0;
        }
        if (s1 != have1 && s1 != have0) {
          interpolate_row(src + s1 * in_w, cols_, h1, out_w);
          have1 = s1;
        }
        const float* b = s1 == have0 ? h0 : h1;
        const float w0 = rows_.w0[k], w1 = rows_.w1[k];
        float* out = dst + r * out_w;
        for (int64_t c = 0; c < out_w; ++c) out[c] = w0 * h0[c] + w1 * b[c];
      }
    });
    return Status::ok();
  }

 private:
  Taps rows_, cols_;
  std::vector<float> scratch_;  // per thread: two interpolated rows
};

}  // namespace

bool claims_resize_linear(const ir::Node& node) {
  if (!(node.domain.empty() || node.domain == "ai.onnx") || node.op_type != "Resize") return false;
  ir::AttrView attrs(node);
  auto mode = attrs.get_string("mode", "nearest");
  return mode.is_ok() && mode.value() == "linear";
}

Expected<std::unique_ptr<PreparedKernel>> prepare_resize_linear(const ir::Node& node) {
  return std::unique_ptr<PreparedKernel>(new ResizeLinearKernel());
}

}  // namespace peregrine::cpu
