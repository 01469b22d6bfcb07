// Winograd F(2x2, 3x3) convolution driver (algorithm and assumptions: kernels/conv_winograd_f2x3.h;
// tile transforms: ukernels/f32_winograd_ukernels.h). Its loops are F(4x4)'s
// (kernels/conv_winograd_f4x3.cc) with 2x2 output tiles and 16 points.
#include "backends/cpu/kernels/conv_winograd_f2x3.h"

#include <algorithm>

#include "backends/cpu/kernels/conv_scratch.h"
#include "backends/cpu/thread_pool.h"

namespace peregrine::cpu {
namespace {

constexpr int64_t kTile = 2;     // output tile side
constexpr int64_t kPoints = 16;  // 4x4 transformed values per tile
constexpr int64_t kLanes = 8;    // the widest transform kernel's tile group (AVX2)
// Target for one block's V + M scratch: half this machine's 512 KiB L2, as F(4x4).
constexpr int64_t kScratchBytes = int64_t{256} << 10;

// G of F(2, 3): U = G g G^T.
constexpr double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Per-thread buffer for the parity-split input rows of one tile row (small: 8 * wq floats).
float *parity_rows_buffer(size_t count) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < count) buffer.resize(count);
  return buffer.data();
}

// pq[(r * 2 + p) * wq + i] = plane(ih0 + r, 2 i + p + iw0), zero outside the plane (H, W).
void split_parity_rows(const float *plane, int64_t h, int64_t w, int64_t ih0, int64_t iw0,
                       int64_t wq, float *pq) {
  for (int64_t r = 0; r < 4; ++r) {
    float *rows = pq + r * 2 * wq;
    const int64_t ih = ih0 + r;
    if (ih < 0 || ih >= h) {
      std::fill(rows, rows + 2 * wq, 0.0f);
      continue;
    }
    const float *src = plane + ih * w;
    for (int64_t p = 0; p < 2; ++p) {
      float *dst = rows + p * wq;
      const int64_t off = p + iw0;  // column of index i: 2 i + off
      const int64_t hi = std::clamp<int64_t>(w - 1 - off < 0 ? 0 : (w - 1 - off) / 2 + 1, 0, wq);
      const int64_t lo = std::min(off >= 0 ? 0 : (-off + 1) / 2, hi);
      std::fill(dst, dst + lo, 0.0f);
      for (int64_t i = lo; i < hi; ++i) dst[i] = src[2 * i + off];
      std::fill(dst + hi, dst + wq, 0.0f);
    }
  }
}

}  // namespace

// Measured with bench/kernels/conv_bench.cc (AMD EPYC Zen 3, AVX2, 2 vCPUs shared with other
// builds; min of 5 interleaved repetitions; ms, 1 thread CPU time | 2 threads real time):
//                               im2col  F(4x4)  F(2x2) |  im2col  F(4x4)  F(2x2)
//   7x7x512 (ResNet-50 layer4)    4.60    >10    3.86  |    2.80    6.99    2.04
//   7x7x256                       1.24    1.35    0.57  |    0.84    0.85    0.56
//   7x7x128                       0.36    0.42    0.19  |    0.28    0.27    0.22
//   7x7x64                        0.11    0.14    0.09  |    0.11    0.11    0.09
//   5x5x512 (9 tiles)             2.75    18.9    3.07  |    1.57    13.8    2.18
//   3x3x512 (4 tiles)             1.21    15.5    3.21  |    0.60    7.85    1.70
// so F(2x2) wins from 16 tiles (one full NR = 16 GEMM panel) at 64 channels and up, and loses
// below, where its 16 U matrices (16/9 of the weights) are streamed for too few tiles. At 512
// channels U is 16.8 MB, DRAM-streamed when other processes share the L3: the 7x7x512 layer
// took 3.0-3.3 ms on a quiet host, 3.9-4.1 on a loaded one, 2.2 with U forced cache-hot. Where
// F(4x4) applies (>= 16 tiles of 4x4) it is asked first and is as fast up to 256 channels
// (ResNet-50 layer3 2.55 / 2.63 ms, YOLO 20x20x256 4.11 / 4.94). Below 64 channels and at
// batch > 1 nothing was measured.
bool use_winograd_f2x3(const WinogradConvShape &s) {
  const int64_t tiles = s.batch * ceil_div(s.out_h, kTile) * ceil_div(s.out_w, kTile);
  return s.in_c >= 64 && s.out_c >= 64 && tiles >= 16;
}

WinogradF2x3Conv::WinogradF2x3Conv(const GemmKernelInfo &gemm, const WinogradUkernels &transforms,
                                   const float *w, int64_t out_c, int64_t in_c)
    : gemm_(gemm), transforms_(transforms), out_c_(out_c), in_c_(in_c) {
  // u: (16, Cout, Cin); U = G g G^T per filter, in double so only the final rounding is lost.
  std::vector<float> u(static_cast<size_t>(kPoints * out_c * in_c));
  for (int64_t oc = 0; oc < out_c; ++oc)
    for (int64_t ic = 0; ic < in_c; ++ic) {
      const float *g = w + (oc * in_c + ic) * 9;  // (3, 3)
      double gg[4][3];                            // G g
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 3; ++j)
          gg[i][j] = kG[i][0] * g[j] + kG[i][1] * g[3 + j] + kG[i][2] * g[6 + j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          const double v = gg[i][0] * kG[j][0] + gg[i][1] * kG[j][1] + gg[i][2] * kG[j][2];
          u[static_cast<size_t>(((i * 4 + j) * out_c + oc) * in_c + ic)] = static_cast<float>(v);
        }
    }
  u_.reserve(kPoints);
  for (int64_t xi = 0; xi < kPoints; ++xi)
    u_.push_back(
        PackedMatrix::pack_a(gemm, MatrixView{u.data() + xi * out_c * in_c, in_c, 1}, out_c, in_c));
}

void WinogradF2x3Conv::run(const float *x, const WinogradConvShape &s, const float *bias,
                           const GemmEpilogue &ep, float *y, int threads) const {
  const int64_t tiles_h = ceil_div(s.out_h, kTile), tiles_w = ceil_div(s.out_w, kTile);
  const int64_t tile_rows = s.batch * tiles_h;  // (image, tile row), flattened
  if (tile_rows == 0 || tiles_w == 0 || s.out_c == 0) return;
  const int64_t wq = ceil_div(tiles_w, kLanes) * kLanes + 1;
  const int64_t row_bytes = kPoints * (s.in_c + s.out_c) * tiles_w * int64_t{sizeof(float)};
  // Tile rows per block: V + M within kScratchBytes, but at least Cout * Cin / (Cin + Cout)
  // tiles, so streaming the 16 U matrices once per block costs no more than V and M do.
  const int64_t min_tiles = s.out_c * s.in_c / (s.in_c + s.out_c);
  const int64_t block_rows = std::clamp<int64_t>(
      std::max(kScratchBytes / row_bytes, ceil_div(min_tiles, tiles_w)), 1, tile_rows);
  const int64_t nr = gemm_.nr, kc = gemm_.kc;
  // Columns per tile row in V and M (pitch): tiles_w, or rounded up to whole 8-tile groups
  // where that adds no GEMM columns past the last NR panel, so every AVX2 transform group is one
  // full store inside one panel (the extra columns are never read back). F(4x4) measured why.
  const int64_t pitch_groups = ceil_div(tiles_w, kLanes) * kLanes;
  const int64_t pitch =
      ceil_div(block_rows * pitch_groups, nr) == ceil_div(block_rows * tiles_w, nr) ? pitch_groups
                                                                                    : tiles_w;
  const int64_t nb_max = block_rows * pitch;
  const int64_t blocks = ceil_div(tile_rows, block_rows);
  const size_t scratch = static_cast<size_t>(
      kPoints * (packed_b_floats(gemm_, s.in_c, nb_max) + s.out_c * nb_max) + kLanes);
  const bool epilogue = ep.residual != nullptr || ep.activation != Activation::kNone;
  const int64_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w;

  // One block: tile rows [r0, r0 + rows) on `inner` threads. v: V as 16 (Cin, nb) GEMM B
  // operands in the packed-panel layout (vx floats each), then M (16, Cout, nb), and a vector
  // of slack the output kernel may read.
  auto run_block = [&](int64_t r0, float *v, int inner) {
    const int64_t rows = std::min(block_rows, tile_rows - r0), nb = rows * pitch;
    const int64_t vx = packed_b_floats(gemm_, s.in_c, nb);
    float *m = v + kPoints * vx;
    // Input transform: task (channel, tile row of the block), written straight into V_xi's
    // (kc, NR) panels, so the GEMM never re-packs V.
    auto input_task = [&](int64_t t, int) {
      const int64_t ci = t / rows, k = t % rows;
      const int64_t n = (r0 + k) / tiles_h, tr = (r0 + k) % tiles_h;
      const int64_t kcur = std::min(kc, s.in_c - ci / kc * kc);    // rows in ci's K block
      float *row = v + packed_b_offset(gemm_, s.in_c, nb, ci, 0);  // V_0(ci, 0)
      float *pq = parity_rows_buffer(static_cast<size_t>(8 * wq));
      split_parity_rows(x + (n * s.in_c + ci) * in_plane, s.in_h, s.in_w, tr * kTile - s.pad_t,
                        -s.pad_l, wq, pq);
      transforms_.input(pq, static_cast<size_t>(wq), static_cast<size_t>(pitch), row,
                        static_cast<size_t>(vx), static_cast<size_t>(k * pitch),
                        static_cast<size_t>(nr), static_cast<size_t>(kcur * nr));
      if (k == rows - 1 && nb % nr != 0) {
        // Columns past nb in the last panel: zeros, as pack_b leaves them (they only feed
        // discarded C columns, but stale denormals there would slow the FMAs down).
        float *pad = row + (nb / nr) * kcur * nr + nb % nr;
        for (int64_t xi = 0; xi < kPoints; ++xi)
          std::fill(pad + xi * vx, pad + xi * vx + (nr - nb % nr), 0.0f);
      }
    };
    cpu_thread_pool().parallel_for(s.in_c * rows, inner, input_task);
    // M_xi (Cout, nb) = U_xi (Cout, Cin) V_xi (Cin, nb): one GEMM per task, both operands
    // pre-packed.
    auto gemm_task = [&](int64_t xi, int) {
      f32_gemm(gemm_, s.out_c, nb, s.in_c, GemmOperand::of(u_[static_cast<size_t>(xi)]),
               GemmOperand::prepacked(v + xi * vx), m + xi * s.out_c * nb, nb, 1.0f, 0.0f,
               GemmEpilogue{}, 1);
    };
    cpu_thread_pool().parallel_for(kPoints, inner, gemm_task);
    // Output transform + epilogue: task (output channel, tile row of the block).
    auto output_task = [&](int64_t t, int) {
      const int64_t oc = t / rows, k = t % rows;
      const int64_t n = (r0 + k) / tiles_h, tr = (r0 + k) % tiles_h;
      const int64_t valid_rows = std::min(kTile, s.out_h - tr * kTile);
      const int64_t offset = (n * s.out_c + oc) * out_plane + tr * kTile * s.out_w;
      float *dst = y + offset;  // (valid_rows, OW), row stride OW
      transforms_.output(m + oc * nb + k * pitch, static_cast<size_t>(s.out_c * nb),
                         bias ? bias[oc] : 0.0f, dst, static_cast<size_t>(s.out_w),
                         static_cast<size_t>(valid_rows), static_cast<size_t>(s.out_w));
      if (epilogue) {
        GemmEpilogue e = ep;
        e.bias_kind = GemmEpilogue::Bias::kNone;
        e.residual = ep.residual ? ep.residual + offset : nullptr;
        e.ldr = s.out_w;
        gemm_.epilogue(dst, static_cast<size_t>(s.out_w), static_cast<size_t>(valid_rows),
                       static_cast<size_t>(s.out_w), 0, 0, e);
      }
    };
    cpu_thread_pool().parallel_for(s.out_c * rows, inner, output_task);
  };

  if (threads > 1 && blocks >= threads) {
    // Enough blocks: one per task, each on its thread's own scratch (one pool sync in all).
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

}  // namespace peregrine::cpu
