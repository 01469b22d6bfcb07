#include "backends/cpu/gemm/qu8_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/gemm/aligned_buffer.h"
#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/thread_pool.h"
#include "core/int_math.h"

namespace peregrine::cpu {

namespace {

const Qu8GemmKernelInfo kVnniKernel = {"qu8_gemm_ukernel_14x32__avx512vnni",
                                       avx512vnni::qu8_gemm_ukernel_14x32__avx512vnni,
                                       avx512vnni::qu8_pack_b_32__avx512vnni,
                                       avx512vnni::qu8_pack_conv_b_32__avx512vnni,
                                       avx512vnni::qu8_pack_conv_strided_b_32__avx512vnni,
                                       avx512vnni::kQu8GemmMr,
                                       avx512vnni::kQu8GemmNr};
const Qu8GemmKernelInfo kScalarKernel = {"qu8_gemm_ukernel_4x8__scalar",
                                         qu8_gemm_ukernel_4x8__scalar,
                                         qu8_pack_b_8__scalar,
                                         qu8_pack_conv_b_8__scalar,
                                         qu8_pack_conv_strided_b_8__scalar,
                                         kQu8ScalarMr,
                                         kQu8ScalarNr};

// The packed B block of a task stays in L2 (1 MiB here) with room for the A panel streaming
// through.
constexpr int64_t kBBlockBytes = 384 * 1024;

GrowBuffer<uint32_t>& b_scratch() {
  thread_local GrowBuffer<uint32_t> buffer;
  return buffer;
}

}  // namespace

const Qu8GemmKernelInfo& qu8_gemm_kernel() {
  const Expected<Isa>& isa = selected_isa();
  if (isa.is_ok() && isa.value() >= Isa::kAvx512 && cpu_features().avx512_vnni)
    return kVnniKernel;
  return kScalarKernel;
}

std::vector<const Qu8GemmKernelInfo*> qu8_gemm_kernels_runnable() {
  std::vector<const Qu8GemmKernelInfo*> kernels = {&kScalarKernel};
  if (isa_supported(Isa::kAvx512) && cpu_features().avx512_vnni) kernels.push_back(&kVnniKernel);
  return kernels;
}

void Qu8PackedA::Free::operator()(uint32_t* p) const { std::free(p); }

Qu8PackedA Qu8PackedA::pack(const Qu8GemmKernelInfo& kernel, const int8_t* w, int64_t ldw,
                            int64_t m, int64_t k) {
  Qu8PackedA a;
  a.rows_ = m;
  a.depth_ = k;
  a.width_ = kernel.mr;
  a.kernel_ = &kernel;
  const int64_t panels = ceil_div(m, kernel.mr), kq = ceil_div(k, 4);
  a.data_.reset(aligned_array<uint32_t>(static_cast<size_t>(panels * kq * kernel.mr)));
  a.row_sums_.reset(new int32_t[static_cast<size_t>(std::max<int64_t>(m, 1))]);
  for (int64_t panel = 0; panel < panels; ++panel) {
    uint32_t* dst = a.data_.get() + panel * a.panel_stride();
    for (int64_t q = 0; q < kq; ++q)
      for (int64_t r = 0; r < kernel.mr; ++r) {
        const int64_t i = panel * kernel.mr + r;
        uint32_t quad = 0;
        for (int64_t byte = 0; byte < 4 && i < m && 4 * q + byte < k; ++byte)
          quad |= static_cast<uint32_t>(static_cast<uint8_t>(w[i * ldw + 4 * q + byte]))
                  << (8 * byte);
        dst[q * kernel.mr + r] = quad;
      }
  }
  for (int64_t i = 0; i < m; ++i) {
    int32_t sum = 0;
    for (int64_t p = 0; p < k; ++p) sum += w[i * ldw + p];
    a.row_sums_[i] = sum;
  }
  return a;
}

namespace {

// Panels of B from B^T: quad q of column j is four consecutive bytes of row j of B^T.
void pack_b_transposed(const uint8_t* bt, int64_t ldbt, int64_t k, int64_t cols, int nr,
                       uint32_t* dst) {
  const int64_t kq = ceil_div(k, 4), full = k / 4;
  for (int64_t j = 0; j < nr; ++j) {
    if (j >= cols) {
      for (int64_t q = 0; q < kq; ++q) dst[q * nr + j] = 0;
      continue;
    }
    const uint8_t* row = bt + j * ldbt;
    for (int64_t q = 0; q < full; ++q) std::memcpy(&dst[q * nr + j], row + 4 * q, 4);
    if (full < kq) {
      uint32_t quad = 0;
      for (int64_t byte = 0; 4 * full + byte < k; ++byte)
        quad |= static_cast<uint32_t>(row[4 * full + byte]) << (8 * byte);
      dst[full * nr + j] = quad;
    }
  }
}

// Packs the B block of columns [j0, j0 + ncur) into ceil(ncur / NR) panels of kq * NR quads.
using PackBlockFn = std::function<void(int64_t j0, int64_t ncur, uint32_t* panels)>;

void gemm(int64_t m, int64_t n, const Qu8PackedA& a, const PackBlockFn& pack_block, uint8_t* c,
          int64_t ldc, const Qu8Requant& rq, int num_threads) {
  const Qu8GemmKernelInfo& kernel = *a.kernel();
  const int mr = kernel.mr, nr = kernel.nr;
  const int64_t kq = ceil_div(a.depth(), 4);
  if (m == 0 || n == 0) return;
  const int64_t nc = std::max<int64_t>(nr, kBBlockBytes / std::max<int64_t>(4 * kq, 1) / nr * nr);
  const int64_t tiles_m = ceil_div(m, mr), panels_n = ceil_div(n, nr);
  int64_t n_blocks = 0, parts_m = 0;
  split_gemm_tasks(tiles_m, panels_n, ceil_div(n, nc), num_threads, &n_blocks, &parts_m);
  auto task = [&](int64_t t, int) {
    const int64_t part = t % parts_m, block = t / parts_m;
    const int64_t m_begin = tiles_m * part / parts_m * mr;
    const int64_t m_end = std::min(m, tiles_m * (part + 1) / parts_m * mr);
    const int64_t j0 = panels_n * block / n_blocks * nr;
    const int64_t ncur = std::min(n, panels_n * (block + 1) / n_blocks * nr) - j0;
    if (m_begin >= m_end || ncur <= 0) return;
    const int64_t npanels = ceil_div(ncur, nr), stride = kq * nr;
    uint32_t* panels = b_scratch().get(static_cast<size_t>(npanels * stride));
    pack_block(j0, ncur, panels);
    for (int64_t i = m_begin; i < m_end; i += mr) {
      const size_t rows = static_cast<size_t>(std::min<int64_t>(mr, m_end - i));
      for (int64_t jp = 0; jp < npanels; ++jp) {
        const int64_t j = j0 + jp * nr;
        kernel.ukernel(rows, static_cast<size_t>(std::min<int64_t>(nr, ncur - jp * nr)),
                       static_cast<size_t>(kq), a.panel(i / mr), panels + jp * stride,
                       c + i * ldc + j, static_cast<size_t>(ldc), rq.bias + i, rq.scale + i,
                       rq.out);
      }
    }
  };
  cpu_thread_pool().parallel_for(n_blocks * parts_m, num_threads, task);
}

// Bit 2t set for each bit t of `lanes`: the bytes of lanes read at stride 2.
uint64_t even_bytes(uint32_t lanes) {
  uint64_t x = lanes;
  x = (x | x << 16) & 0x0000FFFF0000FFFFull;
  x = (x | x << 8) & 0x00FF00FF00FF00FFull;
  x = (x | x << 4) & 0x0F0F0F0F0F0F0F0Full;
  x = (x | x << 2) & 0x3333333333333333ull;
  x = (x | x << 1) & 0x5555555555555555ull;
  return x;
}

// Bits [lo, hi) of 32.
uint32_t lane_range(int64_t lo, int64_t hi) {
  if (lo >= hi) return 0;
  const uint64_t upto = (uint64_t{1} << hi) - 1, below = (uint64_t{1} << lo) - 1;
  return static_cast<uint32_t>(upto & ~below);
}

// Contiguous panels (Qu8ConvPanel): per tap of the panel's columns [first, first + nr), bit t
// where the input of output pixel first + t lies inside the image; rows and columns of the
// image checked apart, then combined.
void conv_panel_inside(const Qu8ConvImage& x, int64_t n, int64_t first, int nr, uint32_t* rows,
                       uint32_t* cols, uint32_t* inside) {
  std::fill(rows, rows + x.kh, 0u);
  std::fill(cols, cols + x.kw, 0u);
  int64_t oy = first / x.w, ox = first % x.w;
  for (int t = 0; t < nr && first + t < n; ++t) {
    for (int64_t i = 0; i < x.kh; ++i) {
      const int64_t iy = oy + i * x.dh - x.pad_top;
      if (iy >= 0 && iy < x.h) rows[i] |= 1u << t;
    }
    for (int64_t j = 0; j < x.kw; ++j) {
      const int64_t ix = ox + j * x.dw - x.pad_left;
      if (ix >= 0 && ix < x.w) cols[j] |= 1u << t;
    }
    if (++ox == x.w) ox = 0, ++oy;
  }
  for (int64_t i = 0; i < x.kh; ++i)
    for (int64_t j = 0; j < x.kw; ++j) inside[i * x.kw + j] = rows[i] & cols[j];
}

// A run of a panel's columns in one output row: lanes [t0, t0 + len) are output (oy, ox..).
struct Segment {
  int64_t oy, ox, t0, len;
};

// Strided panels (Qu8ConvStridedPanel): the segments of columns [first, first + nr), then per
// tap and segment the lanes reading inside the image and where lane 0 would read.
size_t conv_panel_segments(const Qu8ConvImage& x, int64_t n, int64_t first, int nr,
                           Segment* segments) {
  size_t count = 0;
  int64_t oy = first / x.ow, ox = first % x.ow;
  for (int64_t t0 = 0; t0 < nr && first + t0 < n;) {
    const int64_t len = std::min<int64_t>({x.ow - ox, nr - t0, n - first - t0});
    segments[count++] = {oy, ox, t0, len};
    t0 += len;
    ox = 0, ++oy;
  }
  return count;
}

void conv_panel_pieces(const Qu8ConvImage& x, const Segment* segments, size_t count,
                       Qu8ConvPiece* pieces) {
  const int shift = x.sw == 2 ? 1 : 0;
  for (int64_t i = 0; i < x.kh; ++i)
    for (int64_t j = 0; j < x.kw; ++j) {
      const int64_t col_off = j * x.dw - x.pad_left;
      for (size_t s = 0; s < count; ++s) {
        const Segment& seg = segments[s];
        Qu8ConvPiece& piece = pieces[static_cast<size_t>(i * x.kw + j) * count + s];
        const int64_t iy = seg.oy * x.sh - x.pad_top + i * x.dh;
        // Lane seg.t0 + u reads input column start + u * sw, inside for u in [lo, hi).
        const int64_t start = seg.ox * x.sw + col_off;
        const int64_t lo = start >= 0 ? 0 : (-start + x.sw - 1) >> shift;
        const int64_t hi = x.w - 1 - start < 0 ? 0 : ((x.w - 1 - start) >> shift) + 1;
        piece.lanes = iy >= 0 && iy < x.h ? lane_range(seg.t0 + std::min(lo, seg.len),
                                                       seg.t0 + std::min(hi, seg.len))
                                          : 0;
        piece.offset = static_cast<ptrdiff_t>(iy * x.w + start - seg.t0 * x.sw);
        piece.bytes = x.sw == 2 ? even_bytes(piece.lanes) : 0;
      }
    }
}

}  // namespace

void qu8_gemm(int64_t m, int64_t n, const Qu8PackedA& a, const uint8_t* b, int64_t ldb, uint8_t* c,
              int64_t ldc, const Qu8Requant& rq, int num_threads) {
  const Qu8GemmKernelInfo& kernel = *a.kernel();
  const int nr = kernel.nr;
  const int64_t k = a.depth(), stride = ceil_div(k, 4) * nr;
  // A quad of rows at a time across every panel: four sequential read streams, where panel
  // order would read all K rows at once (too many streams for the hardware prefetcher).
  auto pack = [&](int64_t j0, int64_t ncur, uint32_t* panels) {
    const int64_t npanels = ceil_div(ncur, nr);
    for (int64_t p = 0; p < k; p += 4)
      for (int64_t jp = 0; jp < npanels; ++jp)
        kernel.pack_b_panel(b + p * ldb + j0 + jp * nr, static_cast<size_t>(ldb),
                            static_cast<size_t>(std::min<int64_t>(4, k - p)),
                            static_cast<size_t>(std::min<int64_t>(nr, ncur - jp * nr)),
                            panels + jp * stride + p / 4 * nr);
  };
  gemm(m, n, a, pack, c, ldc, rq, num_threads);
}

void qu8_gemm_bt(int64_t m, int64_t n, const Qu8PackedA& a, const uint8_t* bt, int64_t ldbt,
                 uint8_t* c, int64_t ldc, const Qu8Requant& rq, int num_threads) {
  const int nr = a.kernel()->nr;
  const int64_t k = a.depth(), stride = ceil_div(k, 4) * nr;
  auto pack = [&](int64_t j0, int64_t ncur, uint32_t* panels) {
    for (int64_t jp = 0; jp * nr < ncur; ++jp)
      pack_b_transposed(bt + (j0 + jp * nr) * ldbt, ldbt, k, std::min<int64_t>(nr, ncur - jp * nr),
                        nr, panels + jp * stride);
  };
  gemm(m, n, a, pack, c, ldc, rq, num_threads);
}

bool qu8_conv_packs_directly(int64_t stride_w) { return stride_w == 1 || stride_w == 2; }

void qu8_gemm_conv(int64_t m, const Qu8PackedA& a, const Qu8ConvImage& x, uint8_t* c, int64_t ldc,
                   const Qu8Requant& rq, int num_threads) {
  const Qu8GemmKernelInfo& kernel = *a.kernel();
  const int nr = kernel.nr;
  const int64_t taps = x.kh * x.kw, n = x.oh * x.ow;
  const int64_t k = a.depth(), stride = ceil_div(k, 4) * nr;
  if (x.sw == 1 && x.sh == 1 && x.ow == x.w) {
    // Output pixel p reads input pixel p + a tap offset: one masked load per row. (The offsets
    // live in this thread's buffer, read by every task: no allocation per run.)
    thread_local GrowBuffer<ptrdiff_t> offsets;
    ptrdiff_t* offset = offsets.get(static_cast<size_t>(taps));
    for (int64_t i = 0; i < x.kh; ++i)
      for (int64_t j = 0; j < x.kw; ++j)
        offset[i * x.kw + j] = (i * x.dh - x.pad_top) * x.w + j * x.dw - x.pad_left;
    auto pack = [&](int64_t j0, int64_t ncur, uint32_t* panels) {
      thread_local GrowBuffer<uint32_t> masks;
      uint32_t* rows = masks.get(static_cast<size_t>(x.kh + x.kw + taps));
      uint32_t* cols = rows + x.kh;
      uint32_t* inside = cols + x.kw;
      for (int64_t jp = 0; jp * nr < ncur; ++jp) {
        const int64_t first = j0 + jp * nr;
        conv_panel_inside(x, n, first, nr, rows, cols, inside);
        const Qu8ConvPanel panel{x.image + first,
                                 static_cast<size_t>(x.h * x.w),
                                 static_cast<size_t>(taps),
                                 offset,
                                 inside,
                                 x.pad};
        kernel.pack_conv_panel(panel, static_cast<size_t>(k), panels + jp * stride);
      }
    };
    return gemm(m, n, a, pack, c, ldc, rq, num_threads);
  }
  // A panel's columns span at most this many output rows.
  const int64_t max_segments = std::min<int64_t>(nr, ceil_div(nr - 1, x.ow) + 1);
  auto pack = [&](int64_t j0, int64_t ncur, uint32_t* panels) {
    thread_local GrowBuffer<Segment> segment_buf;
    thread_local GrowBuffer<Qu8ConvPiece> piece_buf;
    Segment* segments = segment_buf.get(static_cast<size_t>(max_segments));
    Qu8ConvPiece* pieces = piece_buf.get(static_cast<size_t>(taps * max_segments));
    for (int64_t jp = 0; jp * nr < ncur; ++jp) {
      const size_t count = conv_panel_segments(x, n, j0 + jp * nr, nr, segments);
      conv_panel_pieces(x, segments, count, pieces);
      const Qu8ConvStridedPanel panel{
          x.image, static_cast<size_t>(x.h * x.w), static_cast<size_t>(taps),
          count,   static_cast<size_t>(x.sw),      pieces,
          x.pad};
      kernel.pack_conv_strided_panel(panel, static_cast<size_t>(k), panels + jp * stride);
    }
  };
  gemm(m, n, a, pack, c, ldc, rq, num_threads);
}

}  // namespace peregrine::cpu
