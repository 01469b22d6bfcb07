// CPU kernel of Resize mode=nearest on a 4-D (N, C, H, W) tensor resized along H and W only,
// any fixed-size dtype (a pure gather of elements). The output sizes and per-axis scales come
// from the same planning as the reference kernel (ops/resize_util.h, so scales / sizes / axes /
// keep_aspect_ratio_policy agree), and every output row and column's source index from the
// same coordinate math (ops/resize_coordinate.h). Per plane, each output row gathers its source
// row through the column table; a row whose source row equals the previous output row's is a
// memcpy of that row. Integer factor-2 upsampling of columns (YOLO's upsample) writes each
// source element twice. Planes (or, for few planes, rows) are spread over the thread pool.
// tf_crop_and_resize, exclude_outside, antialias and resizing N or C run the reference.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/copy_ops.h"
#include "backends/cpu/kernels/resize_hw.h"
#include "backends/cpu/thread_pool.h"
#include "ops/resize_coordinate.h"
#include "ops/resize_util.h"

namespace peregrine::cpu {

namespace {

// Source index per output position along one axis, as the reference computes it
// (an axis whose size and scale are unchanged is skipped there: the identity).
void nearest_table(const std::string& ctm, const std::string& nearest_mode, int64_t in_len,
                   int64_t out_len, double scale, std::vector<int64_t>* table) {
  table->resize(static_cast<size_t>(out_len));
  const bool identity = out_len == in_len && scale == 1.0;
  for (int64_t x = 0; x < out_len; ++x)
    (*table)[static_cast<size_t>(x)] =
        identity ? x : resize_nearest_index(ctm, nearest_mode, x, in_len, out_len, scale);
}

// One output row from one source row through the column table.
template <typename T>
void gather_row(const T* src, T* dst, const int64_t* cols, int64_t out_w, bool twice) {
  if (twice) {  // cols[x] == x / 2: each source element written twice
    const int64_t pairs = out_w / 2;
    for (int64_t i = 0; i < pairs; ++i) dst[2 * i] = dst[2 * i + 1] = src[i];
    if (out_w % 2) dst[out_w - 1] = src[cols[out_w - 1]];
    return;
  }
  for (int64_t x = 0; x < out_w; ++x) dst[x] = src[cols[x]];
}

template <typename T>
void resize_planes(const T* x, T* y, int64_t planes, int64_t in_h, int64_t in_w, int64_t out_h,
                   int64_t out_w, const std::vector<int64_t>& rows,
                   const std::vector<int64_t>& cols, int threads) {
  bool twice = out_w >= 2;
  for (int64_t i = 0; i < out_w && twice; ++i) twice = cols[static_cast<size_t>(i)] == i / 2;
  // Tasks of whole output rows: a plane's rows split into `chunks` so a few planes still
  // spread over the threads.
  const int64_t plane_elems = std::max<int64_t>(1, out_h * out_w);
  const int64_t chunks = std::clamp<int64_t>(
      plane_elems * static_cast<int64_t>(sizeof(T)) / kCopyBytesPerTask, 1, out_h);
  const int64_t rows_per_chunk = (out_h + chunks - 1) / chunks;
  auto task = [&](int64_t t, int) {
    const int64_t p = t / chunks, r0 = (t % chunks) * rows_per_chunk;
    const int64_t r1 = std::min(out_h, r0 + rows_per_chunk);
    const T* src = x + p * in_h * in_w;
    T* dst = y + p * out_h * out_w;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t sr = rows[static_cast<size_t>(r)];
      T* out_row = dst + r * out_w;
      if (r > r0 && sr == rows[static_cast<size_t>(r - 1)])  // same source row: copy the last
        std::memcpy(out_row, out_row - out_w, static_cast<size_t>(out_w) * sizeof(T));
      else
        gather_row(src + sr * in_w, out_row, cols.data(), out_w, twice);
    }
  };
  cpu_thread_pool().parallel_for(planes * chunks, threads, task);
}

template <size_t kSize>
struct Bytes {
  unsigned char b[kSize];
};

// The dtypes the reference kernel resizes (it errors on the others; so must we).
bool reference_resizes(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat64:
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kInt64:
    case DType::kUInt64:
      return true;
    default:
      return false;
  }
}

class ResizeNearestKernel : public PreparedKernel {
 public:
  std::string name() const override { return "cpu/resize_nearest"; }
  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (!reference_resizes(x.dtype())) return run_reference(ctx);
    ResizeHw r;
    PG_ASSIGN_OR_RETURN(bool mapped, plan_resize_hw(ctx, x, &r));
    std::string nearest_mode = "simple";  // Resize-10
    if (ctx.opset() >= 11) {
      PG_ASSIGN_OR_RETURN(nearest_mode,
                          ctx.attrs().get_string("nearest_mode", "round_prefer_floor"));
    }
    const bool known_nearest = (ctx.opset() < 11 && nearest_mode == "simple") ||
                               nearest_mode == "round_prefer_floor" ||
                               nearest_mode == "round_prefer_ceil" || nearest_mode == "floor" ||
                               nearest_mode == "ceil";
    if (!mapped || !known_nearest) return run_reference(ctx);
    const ResizePlan& plan = r.plan;
    const std::string& ctm = r.ctm;
    const int64_t in_h = x.dim(2), in_w = x.dim(3), out_h = plan.out_dims[2],
                  out_w = plan.out_dims[3];
    Tensor& y = ctx.output_for_overwrite(0);
    if (y.numel() == 0) return Status::ok();
    nearest_table(ctm, nearest_mode, in_h, out_h, plan.scales[2], &rows_);
    nearest_table(ctm, nearest_mode, in_w, out_w, plan.scales[3], &cols_);
    const int64_t planes = x.dim(0) * x.dim(1);
    const int threads = ctx.num_threads();
    switch (dtype_size(x.dtype())) {
      case 1:
        return run_typed<Bytes<1>>(x, y, planes, in_h, in_w, out_h, out_w, threads);
      case 2:
        return run_typed<uint16_t>(x, y, planes, in_h, in_w, out_h, out_w, threads);
      case 4:
        return run_typed<uint32_t>(x, y, planes, in_h, in_w, out_h, out_w, threads);
      case 8:
        return run_typed<uint64_t>(x, y, planes, in_h, in_w, out_h, out_w, threads);
      default:
        return run_reference(ctx);
    }
  }

 private:
  template <typename T>
  Status run_typed(const Tensor& x, Tensor& y, int64_t planes, int64_t in_h, int64_t in_w,
                   int64_t out_h, int64_t out_w, int threads) {
    resize_planes(static_cast<const T*>(x.raw()), static_cast<T*>(y.raw()), planes, in_h, in_w,
                  out_h, out_w, rows_, cols_, threads);
    return Status::ok();
  }

  std::vector<int64_t> rows_, cols_;  // source row / column per output row / column
};

}  // namespace

bool claims_resize_nearest(const ir::Node& node) {
  if (!(node.domain.empty() || node.domain == "ai.onnx") || node.op_type != "Resize") return false;
  ir::AttrView attrs(node);
  auto mode = attrs.get_string("mode", "nearest");
  return mode.is_ok() && mode.value() == "nearest";
}

Expected<std::unique_ptr<PreparedKernel>> prepare_resize_nearest(const ir::Node& node) {
  return std::unique_ptr<PreparedKernel>(new ResizeNearestKernel());
}

}  // namespace peregrine::cpu
