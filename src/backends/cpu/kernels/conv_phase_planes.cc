// Phase-plane convolution (the layout and why: kernels/conv_phase_planes.h).
#include "backends/cpu/kernels/conv_phase_planes.h"

#include <algorithm>
#include <cstring>
#include <vector>

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

int64_t scratch_ldc(const PhasePlanesConvShape& s) { return round_up(grid_columns(s), 16); }

// Copies channel ci of x into its stride_d * stride_h * stride_w zero-padded phase planes.
void build_planes(const float* x, const PhasePlanesConvShape& s, int64_t ci, float* planes) {
  const int64_t pd = phase_plane_d(s), ph = phase_plane_h(s), pw = phase_plane_w(s);
  const int64_t pitch = phase_plane_pitch(s), plane_size = plane_floats(s);
  const int64_t sd = s.stride_d, sh = s.stride_h, sw = s.stride_w;
  const F32CopyRowFn copy_row = vector_ukernels().copy_row;
  for (int64_t e = 0; e < sd; ++e) {
    for (int64_t a = 0; a < sh; ++a) {
      for (int64_t b = 0; b < sw; ++b) {
        float* plane = planes + (((ci * sd + e) * sh + a) * sw + b) * plane_size;
        const auto [lo, hi] = phase_columns(s, b);
        const int64_t iw0 = b - s.pad_l;
        // Rows t * pitch + [0, pw): where pitch < pw a row's trailing padding is the next
        // row's leading padding, written as zeros by both.
        for (int64_t v = 0; v < pd; ++v) {
          float* slice = plane + v * ph * pitch;
          const int64_t id = v * sd + e - s.pad_f;
          if (id < 0 || id >= s.in_d) {
            std::fill(slice, slice + ph * pw, 0.0f);
            continue;
          }
          const float* xs = x + (ci * s.in_d + id) * s.in_h * s.in_w;
          for (int64_t t = 0; t < ph; ++t) {
            float* dst = slice + t * pitch;
            const int64_t ih = t * sh + a - s.pad_t;
            if (ih < 0 || ih >= s.in_h || hi == lo) {
              std::fill(dst, dst + pw, 0.0f);
              continue;
            }
            const float* src = xs + ih * s.in_w + iw0 + lo * sw;
            std::fill(dst, dst + lo, 0.0f);
            if (sw == 1)
              std::memcpy(dst + lo, src, static_cast<size_t>(hi - lo) * sizeof(float));
            else if (sw == 2)
              copy_row(src, 2, dst + lo, static_cast<size_t>(hi - lo));
            else
              for (int64_t u = lo; u < hi; ++u) dst[u] = src[(u - lo) * sw];
            std::fill(dst + hi, dst + pw, 0.0f);
          }
        }
      }
    }
  }
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

int64_t phase_planes_scratch_floats(const PhasePlanesConvShape& s) {
  return all_planes_floats(s) + (writes_y_directly(s) ? 0 : s.out_c * scratch_ldc(s));
}

void conv_phase_planes(const GemmKernelInfo& kernel, const PackedMatrix& w, const float* x,
                       const PhasePlanesConvShape& s, float* y, const GemmEpilogue& ep,
                       float* scratch, int num_threads) {
  const int64_t ph = phase_plane_h(s), pitch = phase_plane_pitch(s), plane = plane_floats(s);
  const int64_t k = s.in_c * s.kd * s.kh * s.kw, m = s.out_c, n = grid_columns(s);
  const int64_t pixels = s.out_d * s.out_h * s.out_w;
  float* planes = scratch;
  cpu_thread_pool().parallel_for(s.in_c, num_threads,
                                 [&](int64_t ci, int) { build_planes(x, s, ci, planes); });

  // B row (ci, kz, ki, kj): its plane at the tap's offset. Shared by every task.
  thread_local std::vector<const float*> rows;
  rows.resize(static_cast<size_t>(k + 8));
  for (int64_t ci = 0, r = 0; ci < s.in_c; ++ci)
    for (int64_t kz = 0; kz < s.kd; ++kz)
      for (int64_t ki = 0; ki < s.kh; ++ki)
        for (int64_t kj = 0; kj < s.kw; ++kj, ++r) {
          const int64_t dz = kz * s.dil_d, dy = ki * s.dil_h, dx = kj * s.dil_w;
          const int64_t phase =
              ((ci * s.stride_d + dz % s.stride_d) * s.stride_h + dy % s.stride_h) * s.stride_w +
              dx % s.stride_w;
          rows[static_cast<size_t>(r)] = planes + phase * plane +
                                         ((dz / s.stride_d) * ph + dy / s.stride_h) * pitch +
                                         dx / s.stride_w;
        }
  std::fill(rows.begin() + k, rows.end(), rows[0]);
  const float* const* b_rows = rows.data();

  // Straight into Y with the whole epilogue, or into scratch with the bias (and, without a
  // residual, the activation), the rest applied while compacting: the residual is laid out as
  // Y, not as the grid.
  const bool direct = writes_y_directly(s);
  float* c = direct ? y : scratch + all_planes_floats(s);
  const int64_t ldc = direct ? pixels : scratch_ldc(s);
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
  const int mr = kernel.mr, nr = kernel.nr;
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
  auto task = [&](int64_t t, int) {
    const int64_t c0 = first_tile(t / m_parts) * nr;
    const int64_t c1 = std::min(n, first_tile(t / m_parts + 1) * nr);
    const int64_t r0 = (t % m_parts) * part_rows, r1 = std::min(m, r0 + part_rows);
    for (int64_t p0 = 0; p0 < k; p0 += kernel.kc) {
      const int64_t kc = std::min<int64_t>(kernel.kc, k - p0);
      const bool last = p0 + kc == k;
      // A column tile's B rows stay in L1 across the row tiles; the A block in L2.
      for (int64_t j = c0; j < c1; j += nr) {
        const int64_t ncols = std::min<int64_t>(nr, c1 - j);
        for (int64_t i0 = r0; i0 < r1; i0 += mr) {
          const int64_t nrows = std::min<int64_t>(mr, r1 - i0);
          float* ct = c + i0 * ldc + j;
          F32GemmTileEpilogue te;
          if (last && fusable) te = fused_tile_epilogue(gemm_ep, clamp_lo, clamp_hi, i0, j);
          kernel.indirect_ukernel(static_cast<size_t>(nrows), static_cast<size_t>(ncols),
                                  static_cast<size_t>(kc), w.panel(i0 / mr, p0), b_rows + p0,
                                  static_cast<size_t>(j), ct, static_cast<size_t>(ldc), 1.0f,
                                  p0 == 0 ? 0.0f : 1.0f, last && fusable ? &te : nullptr);
          if (last && !gemm_ep.empty() && !fusable)
            kernel.epilogue(ct, static_cast<size_t>(ldc), static_cast<size_t>(nrows),
                            static_cast<size_t>(ncols), static_cast<size_t>(i0),
                            static_cast<size_t>(j), gemm_ep);
        }
      }
    }
  };
  cpu_thread_pool().parallel_for(tasks, num_threads, task);
  if (direct) return;

  cpu_thread_pool().parallel_for(m, num_threads, [&](int64_t o, int) {
    float* dst = y + o * pixels;
    const float* src = c + o * ldc;
    for (int64_t od = 0; od < s.out_d; ++od)
      for (int64_t oh = 0; oh < s.out_h; ++oh)
        std::memcpy(dst + (od * s.out_h + oh) * s.out_w, src + (od * ph + oh) * pitch,
                    static_cast<size_t>(s.out_w) * sizeof(float));
    if (!post_ep.empty())
      kernel.epilogue(dst, static_cast<size_t>(pixels), 1, static_cast<size_t>(pixels),
                      static_cast<size_t>(o), 0, post_ep);
  });
}

}  // namespace peregrine::cpu
