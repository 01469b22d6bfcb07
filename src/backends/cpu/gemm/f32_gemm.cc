#include "backends/cpu/gemm/f32_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "backends/cpu/gemm/aligned_buffer.h"
#include "backends/cpu/gemm/epilogue_impl.h"
#include "backends/cpu/thread_pool.h"
#include "core/int_math.h"

namespace peregrine::cpu {

namespace {

void f32_gemm_epilogue__scalar(float* c, size_t ldc, size_t rows, size_t cols, size_t row0,
                               size_t col0, const GemmEpilogue& ep) {
  apply_epilogue(c, ldc, rows, cols, row0, col0, ep);
}

// The 14x32 AVX-512 micro-kernel's rate against the 6x16 AVX2 one's on L1-resident panels, as
// measured by BM_Ukernel (peregrine_gemm_bench) on AMD Zen 4, which runs a 512-bit FMA as two
// 256-bit halves. CPUs with two full-width 512-bit FMA units would be near 2; the lower figure
// only makes the choice between tile shapes (f32_gemm_kernel_for_shape) favour the narrower
// tile more often.
constexpr double kAvx512RelativeRate = 1.15;

// The per-ISA table. KC * (MR + NR) * 4 bytes of micro-panels fit L1 (32 KiB); MC * KC * 4
// fits L2 (512 KiB+); KC * NC * 4 is the shared-cache share of the B block; KC * NC_L2 * 4 is
// half of L2. AVX-512 CPUs have 1 MiB of L2 or more, so their MC is 15 tiles (210 rows, a
// 210 KiB A block): a 197-token ViT's activations are then one block and each B block streams
// once, not twice (faster ViT linear layers, BM_LinearGemmVit). The AVX-512 table keeps the
// AVX2 epilogue: it is the one with vectorized transcendental activations, and every AVX-512
// CPU runs AVX2.
const GemmKernelInfo kKernels[] = {
    {Isa::kScalar, "f32_gemm_ukernel_4x8__scalar", scalar::f32_gemm_ukernel_4x8__scalar,
     scalar::f32_gemm_fused_ukernel_4x8__scalar, nullptr, nullptr, f32_gemm_epilogue__scalar, 4, 8,
     256, 128, 1024, 256, 0.1},
    {Isa::kAvx2, "f32_gemm_ukernel_6x16__avx2", avx2::f32_gemm_ukernel_6x16__avx2,
     avx2::f32_gemm_fused_ukernel_6x16__avx2, nullptr, nullptr, avx2::f32_gemm_epilogue__avx2, 6,
     16, 256, 144, 2048, 256, 1.0},
    {Isa::kAvx512, "f32_gemm_ukernel_14x32__avx512", avx512::f32_gemm_ukernel_14x32__avx512,
     avx512::f32_gemm_fused_ukernel_14x32__avx512, avx512::f32_gemm_partial_ukernel_14x32__avx512,
     avx512::f32_gemm_indirect_ukernel_14x32__avx512, avx512::f32_gemm_epilogue__avx512, 14, 32, 256,
     210, 2048, 256, kAvx512RelativeRate, avx512::f32_gemm_pack_a_14__avx512},
};

struct GemmScratch {
  GrowBuffer<float> a, b;
  GrowBuffer<float> whole_a;        // the calling thread's: all of A packed once (pack_a_whole)
  GrowBuffer<float> whole_b;        // the calling thread's: all of B packed once (pack_b_whole)
  alignas(64) float tile[16 * 32];  // an MR x NR edge tile (largest MR*NR in kKernels)
};

GemmScratch& thread_scratch() {
  thread_local GemmScratch scratch;
  return scratch;
}

// One full (kc, MR) panel of row-major A (rows `src`, `src + lda`, ...): a column of MR rows at
// a time, MR a constant so the copy is unrolled (with a run-time MR, packing A was a large share
// of BM_SgemmPackedB's 256^3 GEMM).
template <int kMr>
void pack_a_panel(const float* src, int64_t lda, int64_t kc, float* dst) {
  for (int64_t p = 0; p < kc; ++p, dst += kMr)
    for (int i = 0; i < kMr; ++i) dst[i] = src[i * lda + p];
}

// Packs A(i0 : i0 + mc, p0 : p0 + kc) into MR-row panels of (kc, MR), zero rows past mc.
// Row-major A is read a column of MR rows at a time, so the panel is written in order and the
// MR source rows stream side by side.
void pack_a_block(const GemmKernelInfo& kernel, MatrixView a, int64_t i0, int64_t p0, int64_t mc,
                  int64_t kc, float* dst) {
  const int mr = kernel.mr;
  const float* rows[32];  // MR <= 32
  for (int64_t ir = 0; ir < mc; ir += mr, dst += kc * mr) {
    const int64_t n = std::min<int64_t>(mr, mc - ir);
    if (a.cs == 1 && n == mr && kernel.pack_a_panel) {
      kernel.pack_a_panel(a.data + (i0 + ir) * a.rs + p0, static_cast<size_t>(a.rs),
                          static_cast<size_t>(kc), dst);
      continue;
    }
    if (a.cs == 1 && n == mr && (mr == 4 || mr == 6)) {  // MR 14: kernel.pack_a_panel
      const float* src = a.data + (i0 + ir) * a.rs + p0;
      if (mr == 4) pack_a_panel<4>(src, a.rs, kc, dst);
      if (mr == 6) pack_a_panel<6>(src, a.rs, kc, dst);
      continue;
    }
    if (a.cs != 1) {
      if (n < mr) std::memset(dst, 0, sizeof(float) * static_cast<size_t>(kc * mr));
      for (int64_t i = 0; i < n; ++i) {
        const float* src = a.data + (i0 + ir + i) * a.rs + p0 * a.cs;
        for (int64_t p = 0; p < kc; ++p) dst[p * mr + i] = src[p * a.cs];
      }
      continue;
    }
    for (int64_t i = 0; i < n; ++i) rows[i] = a.data + (i0 + ir + i) * a.rs + p0;
    for (int64_t p = 0; p < kc; ++p) {
      float* out = dst + p * mr;
      for (int64_t i = 0; i < n; ++i) out[i] = rows[i][p];
      for (int64_t i = n; i < mr; ++i) out[i] = 0.0f;
    }
  }
}

// Packs B(p0 : p0 + kc, j0 : j0 + nc) into NR-column panels of (kc, NR), each `panel_stride`
// apart, zero columns past nc. Row-major B is copied a row at a time: one sequential read
// stream, where panel order would read kc rows at once (too many streams to prefetch).
void pack_b_block(MatrixView b, int64_t p0, int64_t j0, int64_t kc, int64_t nc, int nr,
                  int64_t panel_stride, float* dst) {
  if (b.cs == 1) {
    const int64_t full = nc / nr * nr;
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = b.data + (p0 + p) * b.rs + j0;
      float* out = dst + p * nr;
      if (nr == 16) {
        for (int64_t jr = 0; jr < full; jr += 16, out += panel_stride)
          std::memcpy(out, src + jr, sizeof(float) * 16);  // constant size: inline vector moves
      } else if (nr == 32) {
        for (int64_t jr = 0; jr < full; jr += 32, out += panel_stride)
          std::memcpy(out, src + jr, sizeof(float) * 32);
      } else {
        for (int64_t jr = 0; jr < full; jr += nr, out += panel_stride)
          std::memcpy(out, src + jr, sizeof(float) * static_cast<size_t>(nr));
      }
      if (full < nc) {
        std::memcpy(out, src + full, sizeof(float) * static_cast<size_t>(nc - full));
        std::fill(out + (nc - full), out + nr, 0.0f);
      }
    }
    return;
  }
  for (int64_t jr = 0; jr < nc; jr += nr, dst += panel_stride) {
    const int64_t cols = std::min<int64_t>(nr, nc - jr);
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = b.data + (p0 + p) * b.rs + (j0 + jr) * b.cs;
      float* out = dst + p * nr;
      for (int64_t j = 0; j < cols; ++j) out[j] = src[j * b.cs];
      for (int64_t j = cols; j < nr; ++j) out[j] = 0.0f;
    }
  }
}

// Requests the cache lines of a (rows, cols) tile with row stride ld, for reading.
inline void prefetch_tile(const float* p, int64_t ld, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i, p += ld) {
    __builtin_prefetch(p, 0, 3);
    __builtin_prefetch(p + cols - 1, 0, 3);
  }
}

// Up to this many rows of A, and from this depth on, a row-major B is read in place instead of
// packed (the copy is amortized over M). Measured on ResNet-50's 1x1 conv shapes
// (BM_ConvGemmResNet50BiasRelu, 1 thread, Zen 4): a gain up to M = 128, none from M = 256 on;
// on MobileNetV2's: a gain at K = 144-192 with M = 24-32, a loss at K = 16-24 with M = 96-144
// (even on the widest, 16 x 112 x 112, with whole tiles on the unmasked K loop).
// Up to kDirectBAnyDepthMaxRows rows, B is read in place at any depth: faster on MobileNetV2's
// 32 -> 16 1x1 conv at 112 x 112 (K = 32) in the model, at 1 and 2 threads. (It was slower in
// the model before the micro-kernel requested its C lines ahead and kept its accumulators in
// registers for the epilogue: packing then hid more of the tile's cost.)
constexpr int64_t kDirectBMaxRows = 192;
constexpr int64_t kDirectBMinDepth = 64;
constexpr int64_t kDirectBAnyDepthMaxRows = 32;

// Largest operand packed whole (pack_a_whole, pack_b_whole), in floats (16 MiB): the buffer
// stays with the calling thread, so a larger one (a batch of long sequences) keeps per-block
// packing instead of holding that much memory for the session's life.
constexpr int64_t kWholeOperandMaxFloats = int64_t{1} << 22;

// Packs all of A (m, k) into dst in the packed-A layout (f32_gemm.h, PackedMatrix), ceil(m / MR)
// * MR * k floats, spread over the pool by groups of panels: PackedMatrix::pack_a (1 thread) and
// a linear layer's activations (f32_gemm).
void pack_a_whole(const GemmKernelInfo& kernel, MatrixView a, int64_t m, int64_t k, int num_threads,
                  float* dst) {
  const int mr = kernel.mr;
  const int64_t panels = ceil_div(m, mr);
  constexpr int64_t kPanelsPerTask = 4;
  auto task = [&](int64_t t, int) {
    const int64_t first = t * kPanelsPerTask, last = std::min(panels, first + kPanelsPerTask);
    for (int64_t p0 = 0; p0 < k; p0 += kernel.kc) {
      const int64_t kc = std::min<int64_t>(kernel.kc, k - p0);
      pack_a_block(kernel, a, first * mr, p0, std::min(m, last * mr) - first * mr, kc,
                   dst + p0 * panels * mr + first * kc * mr);
    }
  };
  cpu_thread_pool().parallel_for(ceil_div(panels, kPanelsPerTask), num_threads, task);
}

// Packs all of B (k, n) (a view or a packer's) into dst in the packed-B layout (packed_b_offset),
// packed_b_floats(kernel, k, n) floats, spread over the pool by K block and group of panels:
// PackedMatrix::pack_b (1 thread) and an im2col B shared by M parts (f32_gemm).
void pack_b_whole(const GemmKernelInfo& kernel, const GemmOperand& b, int64_t k, int64_t n,
                  int num_threads, float* dst) {
  const int nr = kernel.nr;
  const int64_t panels = ceil_div(n, nr);
  constexpr int64_t kPanelsPerTask = 8;
  const int64_t groups = ceil_div(panels, kPanelsPerTask);
  auto task = [&](int64_t t, int) {
    const int64_t p0 = (t / groups) * kernel.kc, kc = std::min<int64_t>(kernel.kc, k - p0);
    const int64_t j0 = (t % groups) * kPanelsPerTask * nr;
    const int64_t nc = std::min<int64_t>(n - j0, kPanelsPerTask * nr);
    float* out = dst + p0 * panels * nr + (j0 / nr) * kc * nr;
    if (b.packer)
      b.packer->pack(p0, j0, kc, nc, nr, kc * nr, out);
    else
      pack_b_block(b.view, p0, j0, kc, nc, nr, kc * nr, out);
  };
  cpu_thread_pool().parallel_for(ceil_div(k, kernel.kc) * groups, num_threads, task);
}

}  // namespace

// The clamp a fused micro-kernel applies for `ep`'s activation (HardSwish: none, the tile
// epilogue's own step); false when the activation needs the full epilogue.
bool fused_epilogue_clamp(const GemmEpilogue& ep, float* lo, float* hi) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  switch (ep.activation) {
    case Activation::kNone:
      *lo = -kInf, *hi = kInf;
      return true;
    case Activation::kRelu:
      *lo = 0.0f, *hi = kInf;
      return true;
    case Activation::kClip:
      *lo = ep.act_alpha, *hi = ep.act_beta;
      return true;
    case Activation::kHardSwish:  // the tile epilogue's hardswish step, no clamp
      *lo = -kInf, *hi = kInf;
      return true;
    default:
      return false;
  }
}

// `ep` (bias, residual, clamp `lo`..`hi`) for the full tile at (row0, col0) of C.
F32GemmTileEpilogue fused_tile_epilogue(const GemmEpilogue& ep, float lo, float hi, int64_t row0,
                                  int64_t col0) {
  F32GemmTileEpilogue t;
  t.lo = lo, t.hi = hi;
  t.hardswish = ep.activation == Activation::kHardSwish;
  if (ep.bias_kind == GemmEpilogue::Bias::kPerRow) t.bias_row = ep.bias + row0;
  if (ep.bias_kind == GemmEpilogue::Bias::kPerColumn) t.bias_col = ep.bias + col0;
  if (ep.residual) {
    t.residual = ep.residual + row0 * ep.ldr + col0;
    t.ldr = static_cast<size_t>(ep.ldr);
  }
  return t;
}

void split_gemm_tasks(int64_t tiles_m, int64_t panels_n, int64_t n_blocks, int num_threads,
                      int64_t* blocks, int64_t* parts) {
  *parts = 1;
  if (n_blocks < num_threads) {
    if (panels_n >= tiles_m)
      n_blocks = std::min<int64_t>(panels_n, num_threads);
    else
      *parts = std::min<int64_t>(tiles_m, ceil_div(num_threads, n_blocks));
  } else {
    // As many N blocks as a multiple of the thread count (3136 columns by 256 would leave
    // one thread 7 blocks and the other 6).
    n_blocks = std::min<int64_t>(panels_n, round_up(n_blocks, num_threads));
  }
  *blocks = n_blocks;
}

const GemmKernelInfo* f32_gemm_kernel_for(Isa isa) {
  if (!isa_supported(isa)) return nullptr;
  for (const auto& k : kKernels)
    if (k.isa == isa) return &k;
  return nullptr;
}

const GemmKernelInfo& f32_gemm_kernel() {
  const Expected<Isa>& isa = selected_isa();
  const GemmKernelInfo* k =
      f32_gemm_kernel_for(isa.is_ok() ? isa.value() : cpu_features().best_isa());
  return k ? *k : kKernels[0];
}

std::vector<const GemmKernelInfo*> f32_gemm_kernel_candidates() {
  const Expected<Isa>& selected = selected_isa();
  const Isa top = selected.is_ok() ? selected.value() : cpu_features().best_isa();
  std::vector<const GemmKernelInfo*> out;
  for (const auto& k : kKernels)
    if (k.isa <= top && isa_supported(k.isa)) out.push_back(&k);
  return out;
}

int f32_gemm_column_step(const GemmKernelInfo& kernel) {
  return kernel.partial_ukernel ? 16 : kernel.nr;
}

namespace {

// Rows and columns a kernel computes for (m, n). Without a partial kernel, whole MR x NR tiles.
// With one (ukernels/f32-gemm-14x32-avx512.cc): the leftover rows exactly, but as if at least 4
// (with fewer, its FMA chains wait on their latency), and the leftover columns as vectors of 16,
// or one by one where fewer than 14 are left.
int64_t computed_rows(const GemmKernelInfo& kernel, int64_t m) {
  if (!kernel.partial_ukernel) return round_up(m, kernel.mr);
  const int64_t rest = m % kernel.mr;
  return m - rest + (rest > 0 ? std::max<int64_t>(rest, 4) : 0);
}
int64_t computed_columns(const GemmKernelInfo& kernel, int64_t n) {
  if (!kernel.partial_ukernel) return round_up(n, kernel.nr);
  const int64_t rest = n % f32_gemm_column_step(kernel);
  return n - rest + (rest >= 14 ? 16 : rest);
}

}  // namespace

double f32_gemm_relative_time(const GemmKernelInfo& kernel, int64_t m, int64_t n) {
  const double rows = m > 0 ? static_cast<double>(computed_rows(kernel, m)) / m : 1.0;
  const double cols = n > 0 ? static_cast<double>(computed_columns(kernel, n)) / n : 1.0;
  return rows * cols / kernel.relative_rate;
}

const GemmKernelInfo& f32_gemm_kernel_for_shape(int64_t m, int64_t n) {
  const GemmKernelInfo* best = &f32_gemm_kernel();
  for (const GemmKernelInfo* k : f32_gemm_kernel_candidates())
    if (f32_gemm_relative_time(*k, m, n) < f32_gemm_relative_time(*best, m, n)) best = k;
  return *best;
}

void PackedMatrix::Free::operator()(float* p) const { std::free(p); }

PackedMatrix PackedMatrix::pack_a(const GemmKernelInfo& kernel, MatrixView a, int64_t m,
                                  int64_t k) {
  PackedMatrix pm;
  pm.is_a_ = true;
  pm.rows_ = m;
  pm.cols_ = k;
  pm.width_ = kernel.mr;
  pm.kc_ = kernel.kc;
  pm.kernel_ = &kernel;
  pm.panels_ = ceil_div(m, kernel.mr);
  pm.data_.reset(
      aligned_array<float>(static_cast<size_t>(std::max<int64_t>(1, pm.panels_ * kernel.mr * k))));
  pack_a_whole(kernel, a, m, k, 1, pm.data_.get());
  return pm;
}

void PackedMatrix::unpack(float* dst) const {
  for (int64_t r = 0; r < rows_; ++r)
    for (int64_t c = 0; c < cols_; ++c) {
      // A: panels run over rows, K over columns; B: K over rows, panels over columns.
      const int64_t p = is_a_ ? c : r, q = is_a_ ? r : c;  // depth index, panel-dim index
      const int64_t p0 = p / kc_ * kc_;
      dst[r * cols_ + c] = panel(q / width_, p0)[(p - p0) * width_ + q % width_];
    }
}

PackedMatrix PackedMatrix::pack_b(const GemmKernelInfo& kernel, MatrixView b, int64_t k,
                                  int64_t n) {
  PackedMatrix pm;
  pm.is_a_ = false;
  pm.rows_ = k;
  pm.cols_ = n;
  pm.width_ = kernel.nr;
  pm.kc_ = kernel.kc;
  pm.kernel_ = &kernel;
  pm.panels_ = ceil_div(n, kernel.nr);
  pm.data_.reset(
      aligned_array<float>(static_cast<size_t>(std::max<int64_t>(1, pm.panels_ * kernel.nr * k))));
  pack_b_whole(kernel, GemmOperand::of(b.data, b.rs, b.cs), k, n, 1, pm.data_.get());
  return pm;
}

namespace {

// What f32_gemm decides once per call: how the work splits into tasks, and where each block's A
// and B panels come from (the loops below only ask).
struct F32GemmPlan {
  int64_t tiles_m = 0, panels_n = 0;  // register tiles along M, B panels along N
  int64_t parts_m = 0, n_blocks = 0;  // tasks: parts_m parts of M x n_blocks blocks of N
  int64_t kc_max = 0;
  // A: the caller's packed weights (a.packed), packed whole here (a_whole, a linear layer's
  // activations), or packed per (K, M) block into the task's scratch.
  const float* a_whole = nullptr;
  int64_t a_panel_count = 0;
  bool a_prepacked = false;
  // B: the caller's packed weights (b.packed), read in place (direct_b), packed whole
  // (prepacked_b: by the caller or here), or packed per (K, N) block into scratch.
  const float* prepacked_b = nullptr;
  bool direct_b = false;
  // Tile order within a block. A pre-packed A with its L2-sized B block: a row of tiles at a
  // time, so consecutive tiles write (and read residuals from) the same MR rows of C, each row
  // one cache line further, instead of MR new rows a whole C row apart per tile (on a 56x56
  // conv each tile touched 6 pages). Otherwise BLIS order: the B micro-panel stays in L1 while
  // the A block streams from L2.
  bool rows_outer() const { return a_prepacked; }
  // Full tiles take the epilogue in registers on the last K block.
  bool fusable = false;
  float clamp_lo = 0.0f, clamp_hi = 0.0f;
};

F32GemmPlan plan_f32_gemm(const GemmKernelInfo& kernel, int64_t m, int64_t n, int64_t k,
                          const GemmOperand& a, const GemmOperand& b, const GemmEpilogue& ep,
                          int num_threads) {
  const int mr = kernel.mr, nr = kernel.nr;
  F32GemmPlan plan;
  // A linear layer: activations against pre-packed weights. A is packed once here, whole,
  // instead of once per N block in every task, and the driver then walks it as it walks
  // pre-packed weights: L2-sized B blocks, each task's C columns staying in L2 across the K
  // blocks (with N blocks of 2048 a 197 x 1536 C block went back to L3 between K blocks).
  plan.a_panel_count = ceil_div(m, mr);
  if (a.packed == nullptr && b.packed != nullptr &&
      plan.a_panel_count * mr * k <= kWholeOperandMaxFloats) {
    float* buf = thread_scratch().whole_a.get(static_cast<size_t>(plan.a_panel_count * mr * k));
    pack_a_whole(kernel, a.view, m, k, num_threads, buf);
    plan.a_whole = buf;
  }
  plan.a_prepacked = a.packed != nullptr || plan.a_whole != nullptr;

  // Work split: tasks are (M part) x (N block). One thread: the whole M, N by NC, so each
  // B block is packed once. More threads: split the dimension with more register tiles into
  // at least num_threads parts (whole register tiles), so no thread idles.
  // A pre-packed A (weights) costs nothing to walk again, so then the B block is sized for L2,
  // where packing writes it and the micro-kernel reads it back; an A packed here is instead
  // amortized over a wide B block in the shared cache.
  // Parts and blocks take whole register tiles, spread as evenly as the tiles allow: 784
  // columns in 4 blocks are 7 + 6 + 6 + 6 panels of 32, not 224 + 224 + 224 + 112 columns
  // (a 2-thread split of 448 : 336).
  const int64_t nc_target = plan.a_prepacked ? kernel.nc_l2 : kernel.nc;
  plan.tiles_m = ceil_div(m, mr);
  plan.panels_n = ceil_div(n, nr);
  split_gemm_tasks(plan.tiles_m, plan.panels_n, ceil_div(n, nc_target), num_threads, &plan.n_blocks,
                   &plan.parts_m);
  plan.fusable = !ep.empty() && kernel.fused_ukernel != nullptr &&
                 fused_epilogue_clamp(ep, &plan.clamp_lo, &plan.clamp_hi);
  plan.kc_max = std::min<int64_t>(kernel.kc, k);
  // B read in place, not packed: a row-major B (a 1x1 conv's input planes) against pre-packed
  // weights with few rows, where the ISA's partial kernel takes a B row stride; packing would
  // copy each B element to feed only those few rows.
  plan.direct_b = kernel.partial_ukernel != nullptr && a.packed != nullptr && b.packed == nullptr &&
                  b.prepacked_b == nullptr && b.packer == nullptr && b.view.cs == 1 &&
                  m <= kDirectBMaxRows && (k >= kDirectBMinDepth || m <= kDirectBAnyDepthMaxRows);
  // Parts of M would each run the same packer over the same B columns (a 3x3 / 2 conv's
  // im2col, a large share of its time, twice at 2 threads): B is then packed once, whole, by
  // all threads, and read as prepacked (faster on ResNet-50's strided convs at 2 threads). A
  // plain copy of a B view stays per part: 1x1 convs that read half of a shared B from the
  // other core's cache were slower.
  plan.prepacked_b = b.prepacked_b;
  const int64_t b_floats = packed_b_floats(kernel, k, n);
  if (plan.parts_m > 1 && b.packer != nullptr && b_floats <= kWholeOperandMaxFloats) {
    float* buf = thread_scratch().whole_b.get(static_cast<size_t>(b_floats));
    pack_b_whole(kernel, b, k, n, num_threads, buf);
    plan.prepacked_b = buf;
  }
  return plan;
}

// The B panels (kc, NR) of columns j0 : j0 + ncur for the K block at p0, and their stride.
const float* b_block_panels(const F32GemmPlan& plan, const GemmOperand& b, int64_t n, int nr,
                            int64_t p0, int64_t kc, int64_t j0, int64_t ncur, float* b_buf,
                            int64_t* stride) {
  if (b.packed) {
    *stride = b.packed->panel_stride(p0);
    return b.packed->panel(j0 / nr, p0);
  }
  if (plan.direct_b) {
    *stride = nr;  // panel jr starts nr columns further along the rows
    return b.view.data + p0 * b.view.rs + j0;
  }
  *stride = kc * nr;
  if (plan.prepacked_b) return plan.prepacked_b + p0 * round_up(n, nr) + (j0 / nr) * *stride;
  if (b.packer)
    b.packer->pack(p0, j0, kc, ncur, nr, *stride, b_buf);
  else
    pack_b_block(b.view, p0, j0, kc, ncur, nr, *stride, b_buf);
  return b_buf;
}

// The A panels (kc, MR) of rows i0 : i0 + mcur for the K block at p0, and their stride.
const float* a_block_panels(const F32GemmPlan& plan, const GemmKernelInfo& kernel,
                            const GemmOperand& a, int64_t i0, int64_t p0, int64_t mcur, int64_t kc,
                            float* a_buf, int64_t* stride) {
  const int mr = kernel.mr;
  if (a.packed) {
    *stride = a.packed->panel_stride(p0);
    return a.packed->panel(i0 / mr, p0);
  }
  *stride = kc * mr;
  if (plan.a_whole) return plan.a_whole + p0 * plan.a_panel_count * mr + (i0 / mr) * *stride;
  pack_a_block(kernel, a.view, i0, p0, mcur, kc, a_buf);
  return a_buf;
}

// One (K block, M block, N block) of C: its A and B panels, and the register tiles over them.
struct F32GemmBlock {
  const GemmKernelInfo& kernel;
  const F32GemmPlan& plan;
  const GemmEpilogue& ep;
  float* c;
  int64_t ldc;
  float alpha, beta;  // beta of this K block (the caller's on the first, then 1)
  const float* a_panels;
  int64_t a_stride;
  const float* b_panels;
  int64_t b_stride;
  int64_t ldb_direct;  // B's row stride when read in place
  int64_t i0, j0, mcur, ncur, kc;
  bool last;           // the last K block: epilogues and residuals
  bool fuse_epilogue;  // full tiles take the epilogue in registers
  // An epilogue the tiles cannot take in registers (a transcendental activation) runs once
  // per row of tiles rather than per tile: per tile its vector map is called on rows of 32
  // columns, where the call costs as much as the map (EfficientNet's 1x1 convs with SiLU,
  // bench: peregrine profile of efficientnet_b0).
  bool row_epilogue;
  float* tile_scratch;

  // One MR x NR tile of C at (i0 + ir, j0 + jr): A panel ir / MR, B panel jr / NR, passed in
  // (ip, jp) by the loops, since two divisions by the runtime tile sizes cost a visible share
  // of a short-K tile (1x1 convs of 16 channels: peregrine profile of mnasnet).
  void tile(int64_t ir, int64_t jr, int64_t ip, int64_t jp) const {
    const int mr = kernel.mr, nr = kernel.nr;
    const int64_t ncols = std::min<int64_t>(nr, ncur - jr);
    const float* bp = b_panels + jp * b_stride;
    const int64_t nrows = std::min<int64_t>(mr, mcur - ir);
    const float* ap = a_panels + ip * a_stride;
    float* ct = c + (i0 + ir) * ldc + j0 + jr;  // (nrows, ncols) of C
    // The tile's residual rows (last K block) sit a whole row of C apart: too many streams for
    // the hardware prefetcher, so each line would be a demand miss in the epilogue. Requested
    // now, they arrive while the kernel computes (the micro-kernel prefetches its C rows
    // itself).
    if (last && ep.residual)
      prefetch_tile(ep.residual + (i0 + ir) * ep.ldr + j0 + jr, ep.ldr, nrows, ncols);
    bool epilogue_done = false;
    const bool full = nrows == mr && ncols == nr;
    if (plan.direct_b || (!full && kernel.partial_ukernel)) {
      // Straight into C: B in place (row stride ldb), or an edge tile of packed panels.
      F32GemmTileEpilogue te;
      if (fuse_epilogue)
        te = fused_tile_epilogue(ep, plan.clamp_lo, plan.clamp_hi, i0 + ir, j0 + jr);
      const int64_t ldb = plan.direct_b ? ldb_direct : nr;
      kernel.partial_ukernel(static_cast<size_t>(nrows), static_cast<size_t>(ncols),
                             static_cast<size_t>(kc), ap, bp, static_cast<size_t>(ldb), ct,
                             static_cast<size_t>(ldc), alpha, beta, fuse_epilogue ? &te : nullptr);
      epilogue_done = fuse_epilogue;
    } else if (full) {
      if (fuse_epilogue) {
        kernel.fused_ukernel(
            static_cast<size_t>(kc), ap, bp, ct, static_cast<size_t>(ldc), alpha, beta,
            fused_tile_epilogue(ep, plan.clamp_lo, plan.clamp_hi, i0 + ir, j0 + jr));
        epilogue_done = true;
      } else {
        kernel.ukernel(static_cast<size_t>(kc), ap, bp, ct, static_cast<size_t>(ldc), alpha, beta);
      }
    } else {
      // Edge: the full tile goes to scratch, the valid part is merged into C.
      float* t = tile_scratch;
      kernel.ukernel(static_cast<size_t>(kc), ap, bp, t, static_cast<size_t>(nr), alpha, 0.0f);
      for (int64_t i = 0; i < nrows; ++i) {
        float* crow = ct + i * ldc;
        const float* trow = t + i * nr;
        if (beta == 0.0f) {
          for (int64_t j = 0; j < ncols; ++j) crow[j] = trow[j];
        } else {
          for (int64_t j = 0; j < ncols; ++j) crow[j] = trow[j] + beta * crow[j];
        }
      }
    }
    if (last && !ep.empty() && !epilogue_done && !row_epilogue)
      kernel.epilogue(ct, static_cast<size_t>(ldc), static_cast<size_t>(nrows),
                      static_cast<size_t>(ncols), static_cast<size_t>(i0 + ir),
                      static_cast<size_t>(j0 + jr), ep);
  }

  // Every tile of the block, in the plan's order.
  void run() const {
    const int mr = kernel.mr, nr = kernel.nr;
    if (!plan.rows_outer()) {
      for (int64_t jr = 0, jp = 0; jr < ncur; jr += nr, ++jp)  // jr loop
        for (int64_t ir = 0, ip = 0; ir < mcur; ir += mr, ++ip) tile(ir, jr, ip, jp);
      return;
    }
    for (int64_t ir = 0, ip = 0; ir < mcur; ir += mr, ++ip) {  // ir loop
      for (int64_t jr = 0, jp = 0; jr < ncur; jr += nr, ++jp) tile(ir, jr, ip, jp);
      if (row_epilogue)  // the row of tiles just written, still in cache
        kernel.epilogue(c + (i0 + ir) * ldc + j0, static_cast<size_t>(ldc),
                        static_cast<size_t>(std::min<int64_t>(mr, mcur - ir)),
                        static_cast<size_t>(ncur), static_cast<size_t>(i0 + ir),
                        static_cast<size_t>(j0), ep);
    }
  }
};

}  // namespace

void f32_gemm(const GemmKernelInfo& kernel, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
              const GemmOperand& b, float* c, int64_t ldc, float alpha, float beta,
              const GemmEpilogue& ep, int num_threads) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    if (!ep.empty())
      kernel.epilogue(c, static_cast<size_t>(ldc), static_cast<size_t>(m), static_cast<size_t>(n),
                      0, 0, ep);
    return;
  }
  const int mr = kernel.mr, nr = kernel.nr;
  num_threads = std::max(1, num_threads);
  const F32GemmPlan plan = plan_f32_gemm(kernel, m, n, k, a, b, ep, num_threads);

  // One task: a part of M against a block of N, through every K block (pc loop) and every M
  // block of the part (ic loop).
  auto task = [&](int64_t t, int) {
    const int64_t part = t % plan.parts_m, block = t / plan.parts_m;
    const int64_t m_begin = plan.tiles_m * part / plan.parts_m * mr;
    const int64_t m_end = std::min(m, plan.tiles_m * (part + 1) / plan.parts_m * mr);
    const int64_t j0 = plan.panels_n * block / plan.n_blocks * nr;
    const int64_t ncur = std::min(n, plan.panels_n * (block + 1) / plan.n_blocks * nr) - j0;
    GemmScratch& scratch = thread_scratch();
    float* a_buf =
        plan.a_prepacked
            ? nullptr
            : scratch.a.get(static_cast<size_t>(
                  round_up(std::min<int64_t>(kernel.mc, m_end - m_begin), mr) * plan.kc_max));
    float* b_buf = b.packed || plan.prepacked_b || plan.direct_b
                       ? nullptr
                       : scratch.b.get(static_cast<size_t>(round_up(ncur, nr) * plan.kc_max));
    for (int64_t p0 = 0; p0 < k; p0 += kernel.kc) {  // pc loop
      const int64_t kc = std::min<int64_t>(kernel.kc, k - p0);
      int64_t b_stride = 0;
      const float* b_panels = b_block_panels(plan, b, n, nr, p0, kc, j0, ncur, b_buf, &b_stride);
      const bool last = p0 + kc == k;
      for (int64_t i0 = m_begin; i0 < m_end; i0 += kernel.mc) {  // ic loop
        const int64_t mcur = std::min<int64_t>(kernel.mc, m_end - i0);
        int64_t a_stride = 0;
        const float* a_panels = a_block_panels(plan, kernel, a, i0, p0, mcur, kc, a_buf, &a_stride);
        const F32GemmBlock blk{kernel,
                               plan,
                               ep,
                               c,
                               ldc,
                               alpha,
                               p0 == 0 ? beta : 1.0f,
                               a_panels,
                               a_stride,
                               b_panels,
                               b_stride,
                               b.view.rs,
                               i0,
                               j0,
                               mcur,
                               ncur,
                               kc,
                               last,
                               last && plan.fusable,
                               plan.rows_outer() && last && !ep.empty() && !plan.fusable,
                               scratch.tile};
        blk.run();
      }
    }
  };
  cpu_thread_pool().parallel_for(plan.parts_m * plan.n_blocks, num_threads, task);
}

void f32_gemm_indirect(const GemmKernelInfo& kernel, int64_t m, int64_t k, const PackedMatrix& a,
                       const IndirectB& b, float* c, int64_t ldc, const GemmEpilogue& ep,
                       int num_threads) {
  const int64_t rows = b.rows(), len = b.row_len();
  if (m <= 0 || rows <= 0 || len <= 0) return;
  const int mr = kernel.mr, nr = kernel.nr;
  float clamp_lo = 0.0f, clamp_hi = 0.0f;
  const bool fusable = !ep.empty() && fused_epilogue_clamp(ep, &clamp_lo, &clamp_hi);
  auto task = [&](int64_t r, int) {
    thread_local std::vector<const float*> pointers;
    pointers.resize(static_cast<size_t>(k + 8));
    b.row_pointers(r, pointers.data());
    std::fill(pointers.begin() + k, pointers.end(), pointers[0]);
    const int64_t col0 = r * len;
    for (int64_t p0 = 0; p0 < k; p0 += kernel.kc) {
      const int64_t kc = std::min<int64_t>(kernel.kc, k - p0);
      const bool last = p0 + kc == k;
      // A row tile's panel stays in L1 across the row's column tiles; the row's B (kc runs of
      // row_len floats) in L1 / L2 across the row tiles.
      for (int64_t i0 = 0; i0 < m; i0 += mr) {
        const int64_t nrows = std::min<int64_t>(mr, m - i0);
        const float* ap = a.panel(i0 / mr, p0);
        for (int64_t j = 0; j < len; j += nr) {
          const int64_t ncols = std::min<int64_t>(nr, len - j);
          float* ct = c + i0 * ldc + col0 + j;
          F32GemmTileEpilogue te;
          if (last && fusable) te = fused_tile_epilogue(ep, clamp_lo, clamp_hi, i0, col0 + j);
          kernel.indirect_ukernel(static_cast<size_t>(nrows), static_cast<size_t>(ncols),
                                  static_cast<size_t>(kc), ap, pointers.data() + p0,
                                  static_cast<size_t>(j), ct, static_cast<size_t>(ldc), 1.0f,
                                  p0 == 0 ? 0.0f : 1.0f, last && fusable ? &te : nullptr);
        }
        if (last && !ep.empty() && !fusable)  // once per row of tiles, as in f32_gemm
          kernel.epilogue(c + i0 * ldc + col0, static_cast<size_t>(ldc), static_cast<size_t>(nrows),
                          static_cast<size_t>(len), static_cast<size_t>(i0),
                          static_cast<size_t>(col0), ep);
      }
    }
  };
  cpu_thread_pool().parallel_for(rows, num_threads, task);
}

}  // namespace peregrine::cpu
