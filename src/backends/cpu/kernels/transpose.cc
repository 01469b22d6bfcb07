// CPU kernel of Transpose, any perm and rank, any fixed-size dtype (the NCHW <-> NHWC perms
// stay with kernels/transpose_nchw_nhwc.cc). The shape is first simplified: size-1 axes are
// dropped and input axes that stay adjacent and in order under the perm are merged, so
// (0, 2, 1, 3) becomes a 4-D (or smaller) move with a contiguous innermost run. Then:
//   - the last input axis stays last: each output row is one contiguous input run (memcpy);
//   - otherwise: a 2-D tiled transpose between the output axis fed by the input's contiguous
//     axis and the output's last axis, 32 x 32 elements per tile (both sides in L1), repeated
//     over every index of the remaining axes; 4-byte elements go through the vector table's
//     block transpose (register transposes), others element by element.
// Rows or tiles are spread over the thread pool.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/copy_ops.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"

namespace peregrine::cpu {

namespace {

constexpr int64_t kTile = 32;

// A simplified transpose: input dims and the perm over them (output axis j reads input
// axis perm[j]).
struct Simplified {
  std::vector<int64_t> dims, perm;
};

Simplified simplify(const Shape& in_dims, const std::vector<int64_t>& perm) {
  const size_t rank = in_dims.size();
  // Keep non-1 axes; renumber them in input order.
  std::vector<int64_t> new_index(rank, -1);
  int64_t kept = 0;
  for (size_t a = 0; a < rank; ++a)
    if (in_dims[a] != 1) new_index[a] = kept++;
  std::vector<int64_t> perm1, dims1;
  for (size_t a = 0; a < rank; ++a)
    if (in_dims[a] != 1) dims1.push_back(in_dims[a]);
  for (int64_t p : perm)
    if (new_index[static_cast<size_t>(p)] >= 0) perm1.push_back(new_index[static_cast<size_t>(p)]);
  // Merge runs of output axes reading consecutive input axes.
  Simplified s;
  std::vector<std::vector<int64_t>> groups;  // in output order, each a run of input axes
  for (size_t j = 0; j < perm1.size(); ++j) {
    if (j > 0 && perm1[j] == perm1[j - 1] + 1)
      groups.back().push_back(perm1[j]);
    else
      groups.push_back({perm1[j]});
  }
  // Groups ordered by their first input axis give the new input axes.
  std::vector<size_t> order(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) order[g] = g;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return groups[a][0] < groups[b][0]; });
  std::vector<int64_t> input_axis_of_group(groups.size());
  for (size_t i = 0; i < order.size(); ++i) {
    int64_t d = 1;
    for (int64_t a : groups[order[i]]) d *= dims1[static_cast<size_t>(a)];
    s.dims.push_back(d);
    input_axis_of_group[order[i]] = static_cast<int64_t>(i);
  }
  for (size_t g = 0; g < groups.size(); ++g) s.perm.push_back(input_axis_of_group[g]);
  return s;
}

template <typename T>
void transpose_simplified(const T* x, T* y, const Simplified& s, int threads) {
  const size_t rank = s.dims.size();
  if (rank <= 1) {  // a plain copy
    int64_t n = rank == 0 ? 1 : s.dims[0];
    const int64_t per_task = std::max<int64_t>(1, kCopyBytesPerTask / sizeof(T));
    cpu_thread_pool().parallel_for((n + per_task - 1) / per_task, threads, [&](int64_t t, int) {
      const int64_t b = t * per_task, e = std::min(n, b + per_task);
      std::memcpy(y + b, x + b, static_cast<size_t>(e - b) * sizeof(T));
    });
    return;
  }
  std::vector<int64_t> in_stride(rank), out_dims(rank), src_stride(rank);  // per output axis
  in_stride[rank - 1] = 1;
  for (size_t a = rank - 1; a > 0; --a) in_stride[a - 1] = in_stride[a] * s.dims[a];
  for (size_t j = 0; j < rank; ++j) {
    out_dims[j] = s.dims[static_cast<size_t>(s.perm[j])];
    src_stride[j] = in_stride[static_cast<size_t>(s.perm[j])];
  }
  // Output strides per output axis.
  std::vector<int64_t> out_stride(rank);
  out_stride[rank - 1] = 1;
  for (size_t j = rank - 1; j > 0; --j) out_stride[j - 1] = out_stride[j] * out_dims[j];

  if (s.perm[rank - 1] == static_cast<int64_t>(rank) - 1) {
    // Rows: the last axis is contiguous on both sides.
    const int64_t inner = out_dims[rank - 1];
    int64_t rows = 1;
    for (size_t j = 0; j + 1 < rank; ++j) rows *= out_dims[j];
    const int64_t rows_per_task =
        std::max<int64_t>(1, kCopyBytesPerTask / (inner * static_cast<int64_t>(sizeof(T))));
    auto task = [&](int64_t t, int) {
      const int64_t r0 = t * rows_per_task, r1 = std::min(rows, r0 + rows_per_task);
      for (int64_t r = r0; r < r1; ++r) {
        int64_t rem = r, src = 0;
        for (size_t j = rank - 1; j-- > 0;) {
          src += (rem % out_dims[j]) * src_stride[j];
          rem /= out_dims[j];
        }
        std::memcpy(y + r * inner, x + src, static_cast<size_t>(inner) * sizeof(T));
      }
    };
    cpu_thread_pool().parallel_for((rows + rows_per_task - 1) / rows_per_task, threads, task);
    return;
  }
  // Tiles: output axis `a` reads the input's contiguous axis; output axis `b` = last is
  // contiguous in the output.
  size_t a = 0;
  while (s.perm[a] != static_cast<int64_t>(rank) - 1) ++a;
  const size_t b = rank - 1;
  const int64_t len_a = out_dims[a], len_b = out_dims[b];
  const int64_t tiles_a = (len_a + kTile - 1) / kTile, tiles_b = (len_b + kTile - 1) / kTile;
  int64_t outer = 1;
  for (size_t j = 0; j < rank; ++j)
    if (j != a && j != b) outer *= out_dims[j];
  const int64_t sb = src_stride[b], da = out_stride[a];
  const X32TransposeFn transpose_x32 = vector_ukernels().transpose_x32;  // looked up once a run
  auto task = [&](int64_t t, int) {
    const int64_t tile = t % (tiles_a * tiles_b);
    int64_t rem = t / (tiles_a * tiles_b), src = 0, dst = 0;
    for (size_t j = rank; j-- > 0;) {
      if (j == a || j == b) continue;
      const int64_t i = rem % out_dims[j];
      rem /= out_dims[j];
      src += i * src_stride[j];
      dst += i * out_stride[j];
    }
    const int64_t a0 = (tile / tiles_b) * kTile, a1 = std::min(len_a, a0 + kTile);
    const int64_t b0 = (tile % tiles_b) * kTile, b1 = std::min(len_b, b0 + kTile);
    if constexpr (sizeof(T) == 4) {  // input rows b0.. (stride sb) -> output rows a0.. (stride da)
      transpose_x32(x + src + b0 * sb + a0, static_cast<size_t>(sb), y + dst + a0 * da + b0,
                    static_cast<size_t>(da), static_cast<size_t>(b1 - b0),
                    static_cast<size_t>(a1 - a0));
      return;
    }
    for (int64_t i = a0; i < a1; ++i) {
      const T* in = x + src + i;
      T* out = y + dst + i * da;
      for (int64_t k = b0; k < b1; ++k) out[k] = in[k * sb];
    }
  };
  cpu_thread_pool().parallel_for(outer * tiles_a * tiles_b, threads, task);
}

class TransposeKernel : public PreparedKernel {
 public:
  std::string name() const override { return "cpu/transpose"; }
  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t rank = x.rank();
    std::vector<int64_t> perm;
    if (ctx.attrs().has("perm")) {
      PG_ASSIGN_OR_RETURN(perm, ctx.attrs().get_ints("perm"));
    } else {
      for (int64_t a = rank - 1; a >= 0; --a) perm.push_back(a);
    }
    // A perm that is not a permutation of [0, rank) is the reference's error to report.
    if (static_cast<int64_t>(perm.size()) != rank || !ctx.output_type(0).is_static())
      return run_reference(ctx);
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (int64_t p : perm) {
      if (p < 0 || p >= rank || seen[static_cast<size_t>(p)]) return run_reference(ctx);
      seen[static_cast<size_t>(p)] = true;
    }
    if (!is_copyable_dtype(x.dtype())) return run_reference(ctx);
    Tensor& y = ctx.output_for_overwrite(0);
    if (y.numel() == 0) return Status::ok();
    const Simplified s = simplify(x.shape(), perm);
    const int threads = ctx.num_threads();
    switch (dtype_size(x.dtype())) {
      case 1:
        transpose_simplified(x.data<uint8_t>(), y.data<uint8_t>(), s, threads);
        break;
      case 2:
        transpose_simplified(x.data<uint16_t>(), y.data<uint16_t>(), s, threads);
        break;
      case 4:
        transpose_simplified(x.data<uint32_t>(), y.data<uint32_t>(), s, threads);
        break;
      case 8:
        transpose_simplified(x.data<uint64_t>(), y.data<uint64_t>(), s, threads);
        break;
      default:
        return run_reference(ctx);
    }
    return Status::ok();
  }
};

}  // namespace

bool claims_transpose(const ir::Node& node) {
  return (node.domain.empty() || node.domain == "ai.onnx") && node.op_type == "Transpose" &&
         !is_nchw_nhwc_transpose(node);
}

Expected<std::unique_ptr<PreparedKernel>> prepare_transpose(const ir::Node& node) {
  return std::unique_ptr<PreparedKernel>(new TransposeKernel());
}

}  // namespace peregrine::cpu
