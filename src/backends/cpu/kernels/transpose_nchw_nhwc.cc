// CPU kernel of the two rank-4 Transposes the layout_nhwc pass puts at the edges of an NHWC
// chain: perm (0, 2, 3, 1) NCHW -> NHWC and (0, 3, 1, 2) NHWC -> NCHW, float32. Either is,
// per image, a 2-D transpose (R, S) -> (S, R) with (R, S) = (C, H * W) or (H * W, C); it runs
// in 32 x 32 tiles (4 KiB read + 4 KiB written, both in L1) so neither side is read or written
// with a large stride for long, each through the vector table's block transpose. Tiles of one image
// are spread over threads; edge tiles are clipped. Other perms, ranks and dtypes run the reference
// kernel.
#include <algorithm>
#include <optional>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"

namespace peregrine::cpu {

namespace {

constexpr int64_t kTile = 32;

// dst(S, R) = src(R, S)^T for `images` consecutive matrices (4-byte elements).
void transpose_matrices(const uint32_t* src, uint32_t* dst, int64_t images, int64_t r, int64_t s,
                        int threads) {
  const X32TransposeFn transpose = vector_ukernels().transpose_x32;
  const int64_t tiles_r = (r + kTile - 1) / kTile, tiles_s = (s + kTile - 1) / kTile;
  const int64_t per_image = tiles_r * tiles_s;
  auto task = [&](int64_t t, int) {
    const int64_t n = t / per_image, tr = (t % per_image) / tiles_s, ts = t % tiles_s;
    const uint32_t* a = src + n * r * s;
    uint32_t* b = dst + n * r * s;
    const int64_t r0 = tr * kTile, r1 = std::min(r, r0 + kTile);
    const int64_t s0 = ts * kTile, s1 = std::min(s, s0 + kTile);
    transpose(a + r0 * s + s0, static_cast<size_t>(s), b + s0 * r + r0, static_cast<size_t>(r),
              static_cast<size_t>(r1 - r0), static_cast<size_t>(s1 - s0));
  };
  cpu_thread_pool().parallel_for(images * per_image, threads, task);
}

class TransposeNchwNhwcKernel : public PreparedKernel {
 public:
  explicit TransposeNchwNhwcKernel(bool to_nhwc) : to_nhwc_(to_nhwc) {}
  std::string name() const override {
    return to_nhwc_ ? "cpu/transpose_nchw_to_nhwc" : "cpu/transpose_nhwc_to_nchw";
  }
  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kFloat32 || x.rank() != 4) return run_reference(ctx);
    Tensor& y = ctx.output_for_overwrite(0);
    if (y.numel() == 0) return Status::ok();
    // NCHW -> NHWC: per image (C, HW) -> (HW, C). NHWC -> NCHW: (HW, C) -> (C, HW).
    const int64_t r = to_nhwc_ ? x.dim(1) : x.dim(1) * x.dim(2);
    const int64_t s = to_nhwc_ ? x.dim(2) * x.dim(3) : x.dim(3);
    transpose_matrices(x.data<uint32_t>(), y.data<uint32_t>(), x.dim(0), r, s, ctx.num_threads());
    return Status::ok();
  }

 private:
  bool to_nhwc_;
};

// true: NCHW -> NHWC, false: NHWC -> NCHW, nullopt: another perm.
std::optional<bool> layout_perm(const ir::Node& node) {
  const ir::Attribute* perm = node.attribute("perm");
  if (!perm || perm->type != ir::Attribute::Type::kInts) return std::nullopt;
  if (perm->ints == std::vector<int64_t>{0, 2, 3, 1}) return true;
  if (perm->ints == std::vector<int64_t>{0, 3, 1, 2}) return false;
  return std::nullopt;
}

}  // namespace

bool is_nchw_nhwc_transpose(const ir::Node& node) {
  return (node.domain.empty() || node.domain == "ai.onnx") && node.op_type == "Transpose" &&
         layout_perm(node).has_value();
}

Expected<std::unique_ptr<PreparedKernel>> prepare_transpose_nchw_nhwc(const ir::Node& node) {
  const std::optional<bool> to_nhwc = layout_perm(node);
  if (!to_nhwc) return unsupported(node.describe() + ": not an NCHW <-> NHWC transpose");
  return std::unique_ptr<PreparedKernel>(std::make_unique<TransposeNchwNhwcKernel>(*to_nhwc));
}

}  // namespace peregrine::cpu
