// The Winograd F(m x m, 3x3) driver shared by F(4x4) (kernels/conv_winograd_f4x3.h) and F(2x2)
// (kernels/conv_winograd_f2x3.h): weight transform, blocking, threads and the three stages;
// the algorithms differ only in m, G and their transform micro-kernels.
#include "backends/cpu/kernels/conv_winograd_driver.h"

#include <algorithm>

#include "backends/cpu/kernels/conv_scratch.h"
#include "backends/cpu/thread_pool.h"
#include "core/int_math.h"

namespace peregrine::cpu {
namespace {

constexpr int64_t kLanes = 8;  // the widest transform kernel's tile group (AVX2)
// Target for one block's V + M scratch: half this machine's 512 KiB L2. Measured with F(4x4) on
// ResNet-50 layer1 in peregrine_conv_bench (1 thread): 1 MiB and 4 MiB targets were slower.
constexpr int64_t kScratchBytes = int64_t{256} << 10;

// Per-thread buffer for the phase-split input rows of a block's tile rows of one image, and
// after them the padded line split_phase_rows copies each row into.
float *phase_rows_buffer(size_t count) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < count) buffer.resize(count);
  return buffer.data();
}

// rows[p * wq + i] = line[M i + p]: a fixed stride the compiler unrolls, one pass per phase.
template <int64_t M>
void deinterleave(const float *line, int64_t wq, float *rows) {
  for (int64_t p = 0; p < M; ++p)
    for (int64_t i = 0; i < wq; ++i) rows[p * wq + i] = line[M * i + p];
}

// `lines` input rows split into m column phases:
// pq[(r * m + p) * wq + i] = plane(ih0 + r, m i + p + iw0), zero outside the plane (H, W).
// Each row is first copied into a zero-padded line (the m * wq floats at pq + lines * m * wq),
// so the split itself has no bounds to test.
void split_phase_rows(int64_t m, int64_t lines, const float *plane, int64_t h, int64_t w,
                      int64_t ih0, int64_t iw0, int64_t wq, float *pq) {
  const int64_t len = m * wq;
  float *line = pq + lines * len;
  // Line index j holds column j + iw0: columns [0, w) land on [lo, hi).
  const int64_t lo = std::clamp<int64_t>(-iw0, 0, len);
  const int64_t hi = std::clamp<int64_t>(w - iw0, lo, len);
  std::fill(line, line + lo, 0.0f);
  std::fill(line + hi, line + len, 0.0f);
  for (int64_t r = 0; r < lines; ++r) {
    float *rows = pq + r * len;
    const int64_t ih = ih0 + r;
    if (ih < 0 || ih >= h) {
      std::fill(rows, rows + len, 0.0f);
      continue;
    }
    std::copy(plane + ih * w + lo + iw0, plane + ih * w + hi + iw0, line + lo);
    if (m == 4)
      deinterleave<4>(line, wq, rows);
    else if (m == 2)
      deinterleave<2>(line, wq, rows);
    else
      for (int64_t p = 0; p < m; ++p)
        for (int64_t i = 0; i < wq; ++i) rows[p * wq + i] = line[m * i + p];
  }
}

// U_xi (Cout, Cin) for xi = (m + 2) * row + column, from w (Cout, Cin, 3, 3) and G ((m + 2) x 3):
// (points, Cout, Cin) row-major.
std::vector<float> winograd_transform_weights(int64_t tile, const double (*g_matrix)[3],
                                              const float *w, int64_t out_c, int64_t in_c) {
  const int64_t a = tile + 2, points = a * a;
  // u: (points, Cout, Cin); U = G g G^T per filter, in double so only the final rounding is lost.
  std::vector<float> u(static_cast<size_t>(points * out_c * in_c));
  std::vector<double> gg(static_cast<size_t>(a * 3));  // G g, (a, 3)
  for (int64_t oc = 0; oc < out_c; ++oc)
    for (int64_t ic = 0; ic < in_c; ++ic) {
      const float *g = w + (oc * in_c + ic) * 9;  // (3, 3)
      for (int64_t i = 0; i < a; ++i)
        for (int64_t j = 0; j < 3; ++j)
          gg[i * 3 + j] =
              g_matrix[i][0] * g[j] + g_matrix[i][1] * g[3 + j] + g_matrix[i][2] * g[6 + j];
      for (int64_t i = 0; i < a; ++i)
        for (int64_t j = 0; j < a; ++j) {
          const double v = gg[i * 3] * g_matrix[j][0] + gg[i * 3 + 1] * g_matrix[j][1] +
                           gg[i * 3 + 2] * g_matrix[j][2];
          u[static_cast<size_t>(((i * a + j) * out_c + oc) * in_c + ic)] = static_cast<float>(v);
        }
    }
  return u;
}

std::vector<PackedMatrix> winograd_pack_weights(const GemmKernelInfo &gemm, int64_t tile,
                                                const std::vector<float> &u, int64_t out_c,
                                                int64_t in_c) {
  const int64_t points = (tile + 2) * (tile + 2);
  std::vector<PackedMatrix> packed;
  packed.reserve(static_cast<size_t>(points));
  for (int64_t xi = 0; xi < points; ++xi)
    packed.push_back(
        PackedMatrix::pack_a(gemm, MatrixView{u.data() + xi * out_c * in_c, in_c, 1}, out_c, in_c));
  return packed;
}

// How a layer is cut: tile rows per block and GEMM columns per tile row (pitch).
struct WinogradBlocking {
  int64_t block_rows, pitch;
};

// step: the GEMM kernel's column step (f32_gemm_column_step): pitch padding within it is free.
WinogradBlocking winograd_blocking(int64_t tile, const WinogradConvShape &s, int64_t step) {
  const int64_t points = (tile + 2) * (tile + 2);
  const int64_t tiles_h = ceil_div(s.out_h, tile), tiles_w = ceil_div(s.out_w, tile);
  const int64_t tile_rows = s.batch * tiles_h;  // (image, tile row), flattened
  const int64_t row_bytes = points * (s.in_c + s.out_c) * tiles_w * int64_t{sizeof(float)};
  // Tile rows per block: V + M within kScratchBytes (L2-sized, so the transforms' scattered
  // streams hit cache), but at least Cout * Cin / (Cin + Cout) tiles, so streaming the U
  // matrices once per block costs no more than V and M do (deep layers: one block).
  const int64_t min_tiles = s.out_c * s.in_c / (s.in_c + s.out_c);
  const int64_t block_rows = std::clamp<int64_t>(
      std::max(kScratchBytes / std::max<int64_t>(row_bytes, 1), ceil_div(min_tiles, tiles_w)), 1,
      std::max<int64_t>(tile_rows, 1));
  // Columns per tile row in V and M (pitch): tiles_w, or rounded up to whole 8-tile groups
  // where that adds no GEMM columns past the last column step (ResNet-50 layers 1, 2, 4): then
  // every AVX2 transform group is one full vector store inside one panel (partial groups and
  // groups across a panel edge made F(4x4)'s transform a far larger share of layer1's profile
  // in peregrine_conv_bench). The extra columns hold the transform of the zero padding and are
  // never read back.
  const int64_t pitch_groups = ceil_div(tiles_w, kLanes) * kLanes;
  const int64_t pitch =
      ceil_div(block_rows * pitch_groups, step) == ceil_div(block_rows * tiles_w, step)
          ? pitch_groups
          : tiles_w;
  return {block_rows, pitch};
}

// u_bf16: with bf16, the products on the bf16 GEMM (u unused).
void winograd_run(int64_t tile, const GemmKernelInfo &gemm, const WinogradUkernels &transforms,
                  const std::vector<PackedMatrix> &u, const Bf16GemmKernelInfo *bf16,
                  const std::vector<Bf16PackedMatrix> &u_bf16, const float *x,
                  const WinogradConvShape &s, const float *bias, const GemmEpilogue &ep, float *y,
                  int threads) {
  const int64_t points = (tile + 2) * (tile + 2);
  const int64_t tiles_h = ceil_div(s.out_h, tile), tiles_w = ceil_div(s.out_w, tile);
  const int64_t tile_rows = s.batch * tiles_h;  // (image, tile row), flattened
  if (tile_rows == 0 || tiles_w == 0 || s.out_c == 0) return;
  const int64_t wq = ceil_div(tiles_w, kLanes) * kLanes + 1;
  const int64_t nr = gemm.nr, kc = gemm.kc;
  const WinogradBlocking blocking = winograd_blocking(tile, s, f32_gemm_column_step(gemm));
  const int64_t block_rows = blocking.block_rows, pitch = blocking.pitch;
  const int64_t nb_max = block_rows * pitch;
  const int64_t blocks = ceil_div(tile_rows, block_rows);
  const size_t scratch = static_cast<size_t>(
      points * (packed_b_floats(gemm, s.in_c, nb_max) + s.out_c * nb_max) + kLanes);
  const bool epilogue = ep.residual != nullptr || ep.activation != Activation::kNone;
  const int64_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w;

  // One block: tile rows [r0, r0 + rows) on `inner` threads. v: V as points (Cin, nb) GEMM B
  // operands in the packed-panel layout (vx floats each), then M (points, Cout, nb), and a
  // vector of slack the output kernel may read.
  auto run_block = [&](int64_t r0, float *v, int inner) {
    const int64_t rows = std::min(block_rows, tile_rows - r0), nb = rows * pitch;
    const int64_t vx = packed_b_floats(gemm, s.in_c, nb);
    float *m = v + points * vx;
    // Input transform: task (channel), written straight into V_xi's (kc, NR) panels, so the
    // GEMM never re-packs V. The block's input rows of each image are phase-split once (tile
    // rows share two input rows) and each tile row transformed from them: per-(channel, tile
    // row) tasks spent most of the input stage on their own set-up and on re-splitting
    // (peregrine_conv_bench, ResNet50/layer1).
    auto input_task = [&](int64_t ci, int) {
      const int64_t kcur = std::min(kc, s.in_c - ci / kc * kc);    // rows in ci's K block
      float *row = v + packed_b_offset(gemm, s.in_c, nb, ci, 0);  // V_0(ci, 0)
      for (int64_t k0 = 0; k0 < rows;) {
        const int64_t n = (r0 + k0) / tiles_h, tr0 = (r0 + k0) % tiles_h;
        const int64_t count = std::min(rows - k0, tiles_h - tr0);  // image n's tile rows
        const int64_t lines = count * tile + 2;
        float *pq = phase_rows_buffer(static_cast<size_t>((lines + 1) * tile * wq));
        split_phase_rows(tile, lines, x + (n * s.in_c + ci) * in_plane, s.in_h, s.in_w,
                         tr0 * tile - s.pad_t, -s.pad_l, wq, pq);
        for (int64_t k = k0; k < k0 + count; ++k)
          transforms.input(pq + (k - k0) * tile * tile * wq, static_cast<size_t>(wq),
                           static_cast<size_t>(pitch), row, static_cast<size_t>(vx),
                           static_cast<size_t>(k * pitch), static_cast<size_t>(nr),
                           static_cast<size_t>(kcur * nr));
        k0 += count;
      }
      if (nb % nr != 0) {
        // Columns past nb in the last panel: zeros, as pack_b leaves them (they only feed
        // discarded C columns, but stale denormals there would slow the FMAs down).
        float *pad = row + (nb / nr) * kcur * nr + nb % nr;
        for (int64_t xi = 0; xi < points; ++xi)
          std::fill(pad + xi * vx, pad + xi * vx + (nr - nb % nr), 0.0f);
      }
    };
    cpu_thread_pool().parallel_for(s.in_c, inner, input_task);
    // M_xi (Cout, nb) = U_xi (Cout, Cin) V_xi (Cin, nb): one GEMM per task, both operands
    // pre-packed.
    auto gemm_task = [&](int64_t xi, int) {
      if (bf16) {
        bf16_gemm(*bf16, s.out_c, nb, s.in_c,
                  Bf16GemmOperand::of(u_bf16[static_cast<size_t>(xi)]),
                  Bf16GemmOperand::float_panels(v + xi * vx), m + xi * s.out_c * nb, nb, 1.0f,
                  0.0f, GemmEpilogue{}, gemm.epilogue, 1);
        return;
      }
      f32_gemm(gemm, s.out_c, nb, s.in_c, GemmOperand::of(u[static_cast<size_t>(xi)]),
               GemmOperand::prepacked(v + xi * vx), m + xi * s.out_c * nb, nb, 1.0f, 0.0f,
               GemmEpilogue{}, 1);
    };
    cpu_thread_pool().parallel_for(points, inner, gemm_task);
    // Output transform + epilogue: task (output channel, tile row of the block).
    auto output_task = [&](int64_t t, int) {
      const int64_t oc = t / rows, k = t % rows;
      const int64_t n = (r0 + k) / tiles_h, tr = (r0 + k) % tiles_h;
      const int64_t valid_rows = std::min(tile, s.out_h - tr * tile);
      const int64_t offset = (n * s.out_c + oc) * out_plane + tr * tile * s.out_w;
      float *dst = y + offset;  // (valid_rows, OW), row stride OW
      transforms.output(m + oc * nb + k * pitch, static_cast<size_t>(s.out_c * nb),
                         bias ? bias[oc] : 0.0f, dst, static_cast<size_t>(s.out_w),
                         static_cast<size_t>(valid_rows), static_cast<size_t>(s.out_w));
      if (epilogue) {
        GemmEpilogue e = ep;
        e.bias_kind = GemmEpilogue::Bias::kNone;
        e.residual = ep.residual ? ep.residual + offset : nullptr;
        e.ldr = s.out_w;
        gemm.epilogue(dst, static_cast<size_t>(s.out_w), static_cast<size_t>(valid_rows),
                       static_cast<size_t>(s.out_w), 0, 0, e);
      }
    };
    cpu_thread_pool().parallel_for(s.out_c * rows, inner, output_task);
  };

  if (threads > 1 && blocks >= threads) {
    // Enough blocks: one per task, each on its thread's own scratch (one pool sync in all;
    // three per block cost more than the block on a loaded machine).
    auto block_task = [&](int64_t b, int) {
      run_block(b * block_rows, conv_scratch_floats(scratch), 1);
    };
    cpu_thread_pool().parallel_for(blocks, threads, block_task);
  } else {
    // Few blocks (small maps, deep layers): the threads share each block's stages.
    float *v = conv_scratch_floats(scratch);
    for (int64_t b = 0; b < blocks; ++b) run_block(b * block_rows, v, threads);
  }
}

}  // namespace

const GemmKernelInfo &winograd_gemm_kernel(int64_t tile, const WinogradConvShape &s) {
  const GemmKernelInfo *best = &f32_gemm_kernel();
  const int64_t tiles_w = ceil_div(s.out_w, tile);
  // Padding of M by MR, and of a block's tiles by pitch and then by NR (F(2x2) on a 7x7 map:
  // 16 tiles, pitch 8 gives 32 columns with NR = 32 against 16 with NR = 16).
  auto time = [&](const GemmKernelInfo &k) {
    const WinogradBlocking b = winograd_blocking(tile, s, f32_gemm_column_step(k));
    const int64_t tiles = b.block_rows * tiles_w, columns = b.block_rows * b.pitch;
    return f32_gemm_relative_time(k, s.out_c, columns) * static_cast<double>(columns) /
           static_cast<double>(std::max<int64_t>(tiles, 1));
  };
  for (const GemmKernelInfo *k : f32_gemm_kernel_candidates())
    if (time(*k) < time(*best)) best = k;
  return *best;
}

WinogradConv::WinogradConv(const GemmKernelInfo &gemm, const WinogradUkernels &transforms,
                           int64_t tile, const double (*g)[3], const float *w, int64_t out_c,
                           int64_t in_c, const Bf16GemmKernelInfo *bf16)
    : gemm_(gemm),
      transforms_(transforms),
      tile_(tile),
      out_c_(out_c),
      in_c_(in_c),
      bf16_(bf16 && bf16->nr == gemm.nr && bf16->kc == gemm.kc ? bf16 : nullptr) {
  const std::vector<float> u = winograd_transform_weights(tile, g, w, out_c, in_c);
  if (!bf16_) {
    u_ = winograd_pack_weights(gemm, tile, u, out_c, in_c);
    return;
  }
  const int64_t points = (tile + 2) * (tile + 2);
  for (int64_t xi = 0; xi < points; ++xi)
    u_bf16_.push_back(Bf16PackedMatrix::pack_a(
        *bf16_, MatrixView{u.data() + xi * out_c * in_c, in_c, 1}, out_c, in_c));
}

void WinogradConv::run(const float *x, const WinogradConvShape &s, const float *bias,
                       const GemmEpilogue &ep, float *y, int threads) const {
  winograd_run(tile_, gemm_, transforms_, u_, bf16_, u_bf16_, x, s, bias, ep, y, threads);
}

}  // namespace peregrine::cpu
