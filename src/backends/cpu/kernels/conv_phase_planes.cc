// Phase-plane convolution (the layout and why: kernels/conv_phase_planes.h).
#include "backends/cpu/kernels/conv_phase_planes.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/gemm/aligned_buffer.h"
#include "backends/cpu/gemm/bf16_gemm.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"
#include "core/int_math.h"

namespace peregrine::cpu {
namespace {

// Plane columns [lo, hi) of column phase b that hold input pixels (plane column u is input
// column u * stride_w + b - pad_l); the others are zero padding.
struct PhaseColumns {
  int64_t lo, hi;
};
PhaseColumns phase_columns(const PhasePlanesConvShape& s, int64_t b) {
  const int64_t pw = phase_plane_w(s), sw = s.stride_w;
  const int64_t iw0 = b - s.pad_l;
  const int64_t lo = std::min(pw, iw0 >= 0 ? 0 : ceil_div(-iw0, sw));
  const int64_t last = s.in_w - 1 - iw0;
  return {lo, std::max(lo, std::min(pw, last < 0 ? 0 : last / sw + 1))};
}

// GEMM columns: output pixels on the plane grid, up to the last real one.
int64_t grid_columns(const PhasePlanesConvShape& s) {
  const int64_t ph = phase_plane_h(s), pitch = phase_plane_pitch(s);
  return (s.out_d - 1) * ph * pitch + (s.out_h - 1) * pitch + s.out_w;
}

// A plane's rows at its pitch; the last one reaches plane_w - pitch floats further.
int64_t plane_floats(const PhasePlanesConvShape& s) {
  const int64_t pitch = phase_plane_pitch(s);
  return phase_plane_d(s) * phase_plane_h(s) * pitch + (phase_plane_w(s) - pitch);
}

int64_t phases(const PhasePlanesConvShape& s) { return s.stride_d * s.stride_h * s.stride_w; }

int64_t all_planes_floats(const PhasePlanesConvShape& s) {
  return round_up(s.in_c * phases(s) * plane_floats(s), 16);
}

// C is Y itself when every grid column is an output pixel: one output row, or rows (and depth
// slices) as long on the grid as in Y.
bool writes_y_directly(const PhasePlanesConvShape& s) {
  if (s.out_d * s.out_h == 1) return true;
  return phase_plane_pitch(s) == s.out_w && (s.out_d == 1 || phase_plane_h(s) == s.out_h);
}

// Calls row(dst, src, lo, hi) for every row of the stride_d * stride_h * stride_w phase planes
// (plane_floats apart from `planes` on) of the input channel at `xc`: dst the plane row, src
// the channel's input under plane column lo (nullptr where the row lies in the padding), [lo,
// hi) the plane columns that hold input pixels. Plane by plane, rows in order: where pitch <
// pw a row's trailing padding is the next row's leading padding, written as zeros by both.
template <class T, class RowFn>
void for_each_plane_row(const float* xc, const PhasePlanesConvShape& s, T* planes, RowFn row) {
  const int64_t pd = phase_plane_d(s), ph = phase_plane_h(s);
  const int64_t pitch = phase_plane_pitch(s), plane_size = plane_floats(s);
  const int64_t sd = s.stride_d, sh = s.stride_h, sw = s.stride_w;
  for (int64_t e = 0; e < sd; ++e) {
    for (int64_t a = 0; a < sh; ++a) {
      for (int64_t b = 0; b < sw; ++b) {
        T* plane = planes + ((e * sh + a) * sw + b) * plane_size;
        const auto [lo, hi] = phase_columns(s, b);
        for (int64_t v = 0; v < pd; ++v) {
          const int64_t id = v * sd + e - s.pad_f;
          const bool depth_in = id >= 0 && id < s.in_d;
          const float* xs = xc + (depth_in ? id : 0) * s.in_h * s.in_w;
          for (int64_t t = 0; t < ph; ++t) {
            const int64_t ih = t * sh + a - s.pad_t;
            const bool in = depth_in && ih >= 0 && ih < s.in_h && hi > lo;
            row(plane + (v * ph + t) * pitch,
                in ? xs + ih * s.in_w + b - s.pad_l + lo * sw : nullptr, lo, hi);
          }
        }
      }
    }
  }
}

// dst[u] = src[u * stride] for u < count: a phase's columns of an input row.
void gather_columns(const float* src, int64_t stride, int64_t count, float* dst,
                    F32CopyRowFn copy_row) {
  if (stride == 1)
    std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(float));
  else if (stride == 2)
    copy_row(src, 2, dst, static_cast<size_t>(count));
  else
    for (int64_t u = 0; u < count; ++u) dst[u] = src[u * stride];
}

// Copies channel ci of x into its stride_d * stride_h * stride_w zero-padded phase planes.
void build_planes(const float* x, const PhasePlanesConvShape& s, int64_t ci, float* planes) {
  const int64_t pw = phase_plane_w(s), sw = s.stride_w;
  const F32CopyRowFn copy_row = vector_ukernels().copy_row;
  float* channel_planes = planes + ci * phases(s) * plane_floats(s);
  const float* xc = x + ci * s.in_d * s.in_h * s.in_w;
  for_each_plane_row(xc, s, channel_planes,
                     [&](float* dst, const float* src, int64_t lo, int64_t hi) {
                       if (src == nullptr) {
                         std::fill(dst, dst + pw, 0.0f);
                         return;
                       }
                       std::fill(dst, dst + lo, 0.0f);
                       gather_columns(src, sw, hi - lo, dst + lo, copy_row);
                       std::fill(dst + hi, dst + pw, 0.0f);
                     });
}

}  // namespace

int64_t phase_plane_d(const PhasePlanesConvShape& s) {
  return ceil_div((s.out_d - 1) * s.stride_d + (s.kd - 1) * s.dil_d + 1, s.stride_d);
}

int64_t phase_plane_h(const PhasePlanesConvShape& s) {
  return ceil_div((s.out_h - 1) * s.stride_h + (s.kh - 1) * s.dil_h + 1, s.stride_h);
}

int64_t phase_plane_w(const PhasePlanesConvShape& s) {
  return ceil_div((s.out_w - 1) * s.stride_w + (s.kw - 1) * s.dil_w + 1, s.stride_w);
}

int64_t phase_plane_pitch(const PhasePlanesConvShape& s) {
  const int64_t pw = phase_plane_w(s);
  if (s.in_d != 1 || s.out_d != 1 || s.kd != 1) return pw;  // depth slices keep whole rows
  // Every phase's input pixels end by the pitch (its trailing padding may overlap the next
  // row) and start no earlier than pw - pitch (its leading padding may be the previous row's),
  // and grid rows of OW pixels stay apart.
  int64_t pitch = s.out_w;
  for (int64_t b = 0; b < s.stride_w; ++b) {
    const auto [lo, hi] = phase_columns(s, b);
    if (hi > lo) pitch = std::max({pitch, hi, pw - lo});
  }
  return std::min(pitch, pw);
}

double phase_planes_useful_fraction(const PhasePlanesConvShape& s) {
  const double rows = s.out_d > 1 ? static_cast<double>(s.out_h) / phase_plane_h(s) : 1.0;
  return rows * static_cast<double>(s.out_w) / static_cast<double>(phase_plane_pitch(s));
}

// Against im2col packing, measured on 3x3 convs with 7x7 maps and up (7 of 9 columns useful)
// and Inception-v3's 1x7 convs on 17x17 maps (17 of 23): bench/kernels/conv_bench.cc.
bool use_conv_phase_planes(const PhasePlanesConvShape& s) {
  return s.kd * s.kh * s.kw > 1 && phase_planes_useful_fraction(s) >= 0.7;
}

int64_t phase_planes_scratch_floats(const PhasePlanesConvShape& s) { return all_planes_floats(s); }

namespace {

// What differs between the float32 and the bf16 GEMM over the planes: the tile shape, the K
// block in B rows (float32: one row per (channel, tap); bf16: one row per (tap, channel pair)),
// and the tile call with its A panel.
struct F32PlanesGemm {
  using Row = const float*;
  const GemmKernelInfo& kernel;
  const PackedMatrix& w;
  int mr() const { return kernel.mr; }
  int nr() const { return kernel.nr; }
  int64_t block_rows() const { return kernel.kc; }
  F32GemmEpilogueFn epilogue() const { return kernel.epilogue; }
  void tile(int64_t i0, int64_t p0, int64_t kc, int64_t nrows, int64_t ncols, const Row* rows,
            int64_t j, float* c, int64_t ldc, float beta, const F32GemmTileEpilogue* te) const {
    kernel.indirect_ukernel(static_cast<size_t>(nrows), static_cast<size_t>(ncols),
                            static_cast<size_t>(kc), w.panel(i0 / kernel.mr, p0), rows + p0,
                            static_cast<size_t>(j), c, static_cast<size_t>(ldc), 1.0f, beta, te);
  }
};

struct Bf16PlanesGemm {
  using Row = const uint32_t*;
  const Bf16GemmKernelInfo& kernel;
  const Bf16PackedMatrix& w;
  F32GemmEpilogueFn epilogue_fn;
  int mr() const { return kernel.mr; }
  int nr() const { return kernel.nr; }
  int64_t block_rows() const { return w.kc() / 2; }
  F32GemmEpilogueFn epilogue() const { return epilogue_fn; }
  void tile(int64_t i0, int64_t q0, int64_t kp, int64_t nrows, int64_t ncols, const Row* rows,
            int64_t j, float* c, int64_t ldc, float beta, const F32GemmTileEpilogue* te) const {
    kernel.indirect_ukernel(static_cast<size_t>(nrows), static_cast<size_t>(ncols),
                            static_cast<size_t>(kp), w.panel(i0 / kernel.mr, 2 * q0), rows + q0,
                            static_cast<size_t>(j), c, static_cast<size_t>(ldc), 1.0f, beta, te);
  }
};

// Output pixels of grid columns [c0, c1) of C rows [r0, r1) (row o at c + o * ldc) into Y,
// with `post` (the residual and activation the tiles left) applied to each run of pixels
// copied. ph, pitch: the plane's, computed once per conv (per row they showed in single-node
// profiles of SqueezeNet's 16 -> 64 3x3 convs on 55x55 maps).
template <class Gemm>
void compact_chunk(const Gemm& gemm, const PhasePlanesConvShape& s, int64_t ph, int64_t pitch,
                   const float* c, int64_t ldc, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                   float* y, const GemmEpilogue& post) {
  const int64_t pixels = s.out_d * s.out_h * s.out_w;
  for (int64_t g = c0 / pitch; g * pitch < c1; ++g) {  // grid rows the columns cross
    const int64_t oh = g % ph, od = g / ph;
    const int64_t lo = std::max(c0, g * pitch), hi = std::min(c1, g * pitch + s.out_w);
    if (oh >= s.out_h || lo >= hi) continue;  // a 3-D conv's dropped rows, a row's tail
    const int64_t pixel = (od * s.out_h + oh) * s.out_w + (lo - g * pitch);
    for (int64_t o = r0; o < r1; ++o) {
      float* dst = y + o * pixels + pixel;
      std::memcpy(dst, c + o * ldc + lo, static_cast<size_t>(hi - lo) * sizeof(float));
      if (!post.empty())
        gemm.epilogue()(dst, static_cast<size_t>(pixels), 1, static_cast<size_t>(hi - lo),
                        static_cast<size_t>(o), static_cast<size_t>(pixel), post);
    }
  }
}

// Y = epilogue(A * B) over the planes, B row r at b_rows[r] (`k_rows` of them, followed by 8
// copies of the first).
template <class Gemm>
void planes_gemm(const Gemm& gemm, const typename Gemm::Row* b_rows, int64_t k_rows,
                 const PhasePlanesConvShape& s, float* y, const GemmEpilogue& ep, int num_threads) {
  const int64_t m = s.out_c, n = grid_columns(s);
  const int64_t pixels = s.out_d * s.out_h * s.out_w;
  const int64_t ph = phase_plane_h(s), pitch = phase_plane_pitch(s);

  // Straight into Y with the whole epilogue, or, where grid columns are dropped, each task's
  // C chunk into a buffer of its own, compacted into Y as soon as the chunk is done (while it
  // is in L2: a whole-map C compacted afterwards went through memory twice on large maps,
  // the 640x640 stem of yolo_style_640 and unet_groupnorm_256's first conv). The buffer takes
  // the bias (and, without a residual, the activation); the rest is applied while compacting:
  // the residual is laid out as Y, not as the grid.
  const bool direct = writes_y_directly(s);
  GemmEpilogue gemm_ep = ep;
  GemmEpilogue post_ep;
  if (!direct && ep.residual) {
    gemm_ep.residual = nullptr;
    gemm_ep.activation = Activation::kNone;
    post_ep = ep;
    post_ep.bias_kind = GemmEpilogue::Bias::kNone;
    post_ep.bias = nullptr;
  }
  float clamp_lo = 0.0f, clamp_hi = 0.0f;
  const bool fusable = !gemm_ep.empty() && fused_epilogue_clamp(gemm_ep, &clamp_lo, &clamp_hi);

  // Tasks: chunks of whole column tiles, at most kMaxChunkTiles (the chunk's C stays in L2
  // across the K blocks), as many as a multiple of the thread count, their sizes differing by
  // at most one tile. Where that would leave one thread a sixteenth more work than the average
  // (small maps: a few column tiles; the pool hands each thread a contiguous share of the
  // tasks), every column tile is a chunk and C's rows are split among the threads as well.
  constexpr int64_t kMaxChunkTiles = 8;
  const int mr = gemm.mr(), nr = gemm.nr();
  const int64_t tiles_n = ceil_div(n, nr), tiles_m = ceil_div(m, mr);
  const int64_t threads = std::max(1, num_threads);
  int64_t chunks =
      std::min(tiles_n, round_up(std::max(threads, ceil_div(tiles_n, kMaxChunkTiles)), threads));
  auto first_tile = [&](int64_t chunk) { return chunk * tiles_n / chunks; };
  int64_t busiest = 0;  // columns of the busiest thread (the last tile may be narrow)
  for (int64_t i = 0; i < threads; ++i)
    busiest = std::max(busiest, std::min(n, first_tile(chunks * (i + 1) / threads) * nr) -
                                    first_tile(chunks * i / threads) * nr);
  int64_t m_parts = 1;
  if (threads > 1 && 16 * busiest * threads > 17 * n) {
    chunks = tiles_n;
    m_parts = std::min(tiles_m, threads);
  }
  const int64_t part_rows = ceil_div(tiles_m, m_parts) * mr;
  const int64_t tasks = chunks * m_parts;
  const int64_t block = gemm.block_rows();
  const int64_t chunk_ldc = kMaxChunkTiles * nr + 16;  // rows not a power of two apart
  auto task = [&](int64_t t, int) {
    const int64_t c0 = first_tile(t / m_parts) * nr;
    const int64_t c1 = std::min(n, first_tile(t / m_parts + 1) * nr);
    const int64_t r0 = (t % m_parts) * part_rows, r1 = std::min(m, r0 + part_rows);
    // C's tile (i0, j) at c + i0 * ldc + j: Y itself, or the chunk's buffer.
    thread_local GrowBuffer<float> chunk_buffer;
    float* c = y;
    int64_t ldc = pixels;
    if (!direct) {
      ldc = chunk_ldc;
      c = chunk_buffer.get(static_cast<size_t>((r1 - r0) * chunk_ldc)) - r0 * ldc - c0;
    }
    for (int64_t p0 = 0; p0 < k_rows; p0 += block) {
      const int64_t kc = std::min<int64_t>(block, k_rows - p0);
      const bool last = p0 + kc == k_rows;
      // A column tile's B rows stay in L1 across the row tiles; the A block in L2.
      for (int64_t j = c0; j < c1; j += nr) {
        const int64_t ncols = std::min<int64_t>(nr, c1 - j);
        for (int64_t i0 = r0; i0 < r1; i0 += mr) {
          const int64_t nrows = std::min<int64_t>(mr, r1 - i0);
          float* ct = c + i0 * ldc + j;
          F32GemmTileEpilogue te;
          if (last && fusable) te = fused_tile_epilogue(gemm_ep, clamp_lo, clamp_hi, i0, j);
          gemm.tile(i0, p0, kc, nrows, ncols, b_rows, j, ct, ldc, p0 == 0 ? 0.0f : 1.0f,
                    last && fusable ? &te : nullptr);
          if (last && !gemm_ep.empty() && !fusable)
            gemm.epilogue()(ct, static_cast<size_t>(ldc), static_cast<size_t>(nrows),
                            static_cast<size_t>(ncols), static_cast<size_t>(i0),
                            static_cast<size_t>(j), gemm_ep);
        }
      }
    }
    if (!direct) compact_chunk(gemm, s, ph, pitch, c, ldc, r0, r1, c0, c1, y, post_ep);
  };
  cpu_thread_pool().parallel_for(tasks, num_threads, task);
}

// Where B row (channel c, tap (kz, ki, kj)) starts, in elements from the first plane: channel
// c's plane of the tap's phase, at the tap's offset into it. The plane geometry is computed
// once per conv, not per row (the pitch is a loop over the column phases).
struct TapRows {
  const PhasePlanesConvShape& s;
  int64_t ph, pitch, plane;
  explicit TapRows(const PhasePlanesConvShape& shape)
      : s(shape),
        ph(phase_plane_h(shape)),
        pitch(phase_plane_pitch(shape)),
        plane(plane_floats(shape)) {}
  int64_t offset(int64_t c, int64_t kz, int64_t ki, int64_t kj) const {
    const int64_t dz = kz * s.dil_d, dy = ki * s.dil_h, dx = kj * s.dil_w;
    const int64_t phase =
        ((dz % s.stride_d) * s.stride_h + dy % s.stride_h) * s.stride_w + dx % s.stride_w;
    return (c * phases(s) + phase) * plane + ((dz / s.stride_d) * ph + dy / s.stride_h) * pitch +
           dx / s.stride_w;
  }
};

int64_t channel_pairs(const PhasePlanesConvShape& s) { return ceil_div(s.in_c, 2); }

int64_t all_pair_planes_words(const PhasePlanesConvShape& s) {
  return round_up(channel_pairs(s) * phases(s) * plane_floats(s), 16);
}

// Channels 2 cp and 2 cp + 1 of x (zeros for the second past in_c) into their phase planes of
// bf16 pairs, laid out as build_planes lays out one channel's. `row` holds 2 plane_w floats.
void build_pair_planes(const float* x, const PhasePlanesConvShape& s, int64_t cp,
                       Bf16InterleaveRowsFn interleave, float* row, uint32_t* planes) {
  const int64_t pw = phase_plane_w(s), sw = s.stride_w;
  const int64_t channel_floats = s.in_d * s.in_h * s.in_w;
  const bool second = 2 * cp + 1 < s.in_c;
  const F32CopyRowFn copy_row = vector_ukernels().copy_row;
  auto visit = [&](uint32_t* dst, const float* src0, int64_t lo, int64_t hi) {
    if (src0 == nullptr) {
      std::fill(dst, dst + pw, 0u);
      return;
    }
    const float* src1 = second ? src0 + channel_floats : nullptr;
    const int64_t count = hi - lo;
    if (sw != 1) {  // the phase's columns gathered first
      gather_columns(src0, sw, count, row, copy_row);
      src0 = row;
      if (second) {
        gather_columns(src1, sw, count, row + pw, copy_row);
        src1 = row + pw;
      }
    }
    std::fill(dst, dst + lo, 0u);
    interleave(src0, src1, static_cast<size_t>(count), dst + lo);
    std::fill(dst + hi, dst + pw, 0u);
  };
  for_each_plane_row(x + 2 * cp * channel_floats, s, planes + cp * phases(s) * plane_floats(s),
                     visit);
}

}  // namespace

void conv_phase_planes(const GemmKernelInfo& kernel, const PackedMatrix& w, const float* x,
                       const PhasePlanesConvShape& s, float* y, const GemmEpilogue& ep,
                       float* scratch, int num_threads) {
  const int64_t k = s.in_c * s.kd * s.kh * s.kw;
  float* planes = scratch;
  cpu_thread_pool().parallel_for(s.in_c, num_threads,
                                 [&](int64_t ci, int) { build_planes(x, s, ci, planes); });

  // B row (ci, kz, ki, kj): its plane at the tap's offset. Shared by every task.
  thread_local std::vector<const float*> rows;
  rows.resize(static_cast<size_t>(k + 8));
  const TapRows taps(s);
  for (int64_t ci = 0, r = 0; ci < s.in_c; ++ci)
    for (int64_t kz = 0; kz < s.kd; ++kz)
      for (int64_t ki = 0; ki < s.kh; ++ki)
        for (int64_t kj = 0; kj < s.kw; ++kj, ++r)
          rows[static_cast<size_t>(r)] = planes + taps.offset(ci, kz, ki, kj);
  std::fill(rows.begin() + k, rows.end(), rows[0]);
  planes_gemm(F32PlanesGemm{kernel, w}, rows.data(), k, s, y, ep, num_threads);
}

int64_t phase_planes_bf16_scratch_floats(const PhasePlanesConvShape& s) {
  return all_pair_planes_words(s);
}

int64_t phase_planes_bf16_depth(const PhasePlanesConvShape& s) {
  return s.kd * s.kh * s.kw * 2 * channel_pairs(s);
}

Bf16PackedMatrix pack_phase_planes_bf16_weights(const Bf16GemmKernelInfo& kernel, const float* w,
                                                const PhasePlanesConvShape& s) {
  const int64_t taps = s.kd * s.kh * s.kw, even_c = 2 * channel_pairs(s);
  const int64_t depth = phase_planes_bf16_depth(s);
  std::vector<float> reordered(static_cast<size_t>(s.out_c * depth), 0.0f);
  for (int64_t o = 0; o < s.out_c; ++o)
    for (int64_t ci = 0; ci < s.in_c; ++ci)
      for (int64_t t = 0; t < taps; ++t)
        reordered[static_cast<size_t>(o * depth + t * even_c + ci)] =
            w[(o * s.in_c + ci) * taps + t];
  // K blocks of equal size, none larger than the kernel's: 288 = 144 + 144, not 256 + 32,
  // whose short block would load and store C for a few k steps (yolo_style_640's 32 -> 64
  // strided convs).
  const int64_t blocks = ceil_div(depth, int64_t{kernel.kc});
  const int kc = static_cast<int>(round_up(ceil_div(depth, blocks), 2));
  return Bf16PackedMatrix::pack_a(kernel, MatrixView{reordered.data(), depth, 1}, s.out_c, depth,
                                  kc);
}

void conv_phase_planes_bf16(const Bf16GemmKernelInfo& kernel, const Bf16PackedMatrix& w,
                            F32GemmEpilogueFn epilogue, const float* x,
                            const PhasePlanesConvShape& s, float* y, const GemmEpilogue& ep,
                            float* scratch, int num_threads) {
  const int64_t pairs = channel_pairs(s);
  const int64_t kp = phase_planes_bf16_depth(s) / 2;
  uint32_t* planes = reinterpret_cast<uint32_t*>(scratch);
  const int64_t pw = phase_plane_w(s);
  cpu_thread_pool().parallel_for(pairs, num_threads, [&](int64_t cp, int) {
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(2 * pw));
    build_pair_planes(x, s, cp, kernel.interleave_rows, row.data(), planes);
  });

  // B pair row (kz, ki, kj, cp): the pair planes of channels 2 cp, 2 cp + 1 at the tap's offset.
  thread_local std::vector<const uint32_t*> rows;
  rows.resize(static_cast<size_t>(kp + 8));
  const TapRows taps(s);
  for (int64_t kz = 0, q = 0; kz < s.kd; ++kz)
    for (int64_t ki = 0; ki < s.kh; ++ki)
      for (int64_t kj = 0; kj < s.kw; ++kj)
        for (int64_t cp = 0; cp < pairs; ++cp, ++q)
          rows[static_cast<size_t>(q)] = planes + taps.offset(cp, kz, ki, kj);
  std::fill(rows.begin() + kp, rows.end(), rows[0]);
  planes_gemm(Bf16PlanesGemm{kernel, w, epilogue}, rows.data(), kp, s, y, ep, num_threads);
}

}  // namespace peregrine::cpu
