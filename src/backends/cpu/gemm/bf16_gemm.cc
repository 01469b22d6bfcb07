#include "backends/cpu/gemm/bf16_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/gemm/aligned_buffer.h"
#include "backends/cpu/thread_pool.h"
#include "core/int_math.h"

namespace peregrine::cpu {

namespace {

// KC * (MR + NR) * 2 bytes of micro-panels (23.5 KiB) fit L1; KC * NC * 2 bytes of B block
// (256 KiB) fit L2 with room for the A panels streaming through.
const Bf16GemmKernelInfo kBf16Kernel = {"bf16_gemm_ukernel_14x32__avx512bf16",
                                        avx512bf16::bf16_gemm_ukernel_14x32__avx512bf16,
                                        avx512bf16::bf16_pack_a_14__avx512bf16,
                                        avx512bf16::bf16_pack_b_32__avx512bf16,
                                        avx512bf16::kBf16GemmMr,
                                        avx512bf16::kBf16GemmNr,
                                        /*kc=*/256,
                                        /*nc=*/512,
                                        avx512bf16::bf16_gemm_indirect_ukernel_14x32__avx512bf16,
                                        avx512bf16::bf16_interleave_rows__avx512bf16};

// A not pre-packed is packed whole in chunks of at most this many uint32 (16 MiB), so a very
// long batch of rows does not hold its whole bf16 copy.
constexpr int64_t kAChunkMaxPairs = int64_t{1} << 22;

struct Bf16Scratch {
  GrowBuffer<uint32_t> b_pairs;  // a task's B block
  GrowBuffer<float> b_floats;    // a packer's float32 panels before conversion
  GrowBuffer<uint32_t> a_whole;  // the calling thread's: A packed for all tasks
};
Bf16Scratch& scratch() {
  thread_local Bf16Scratch s;
  return s;
}

uint32_t pair_of(float lo, float hi) {
  return static_cast<uint32_t>(float_to_bf16_bits(lo)) |
         (static_cast<uint32_t>(float_to_bf16_bits(hi)) << 16);
}

// Any-stride packers (weights at prepare time, transposed operands).
void pack_a_strided(MatrixView a, int64_t i0, int64_t rows, int64_t p0, int64_t kc, int mr,
                    uint32_t* dst) {
  for (int64_t q = 0; q < ceil_div(kc, 2); ++q)
    for (int64_t i = 0; i < mr; ++i) {
      const float* row = a.data + (i0 + i) * a.rs;
      const int64_t p = p0 + 2 * q;
      const bool in = i < rows;
      dst[q * mr + i] = pair_of(in ? row[p * a.cs] : 0.0f,
                                in && 2 * q + 1 < kc ? row[(p + 1) * a.cs] : 0.0f);
    }
}
void pack_b_strided(MatrixView b, int64_t p0, int64_t kc, int64_t j0, int64_t cols, int nr,
                    uint32_t* dst) {
  for (int64_t q = 0; q < ceil_div(kc, 2); ++q)
    for (int64_t j = 0; j < nr; ++j) {
      const int64_t p = p0 + 2 * q;
      const bool in = j < cols;
      const float* col = b.data + (j0 + j) * b.cs;
      dst[q * nr + j] = pair_of(in ? col[p * b.rs] : 0.0f,
                                in && 2 * q + 1 < kc ? col[(p + 1) * b.rs] : 0.0f);
    }
}

void pack_a_panel(const Bf16GemmKernelInfo& kernel, MatrixView a, int64_t i0, int64_t rows,
                  int64_t p0, int64_t kc, uint32_t* dst) {
  if (a.cs == 1)
    kernel.pack_a_panel(a.data + i0 * a.rs + p0, static_cast<size_t>(a.rs),
                        static_cast<size_t>(rows), static_cast<size_t>(kc), dst);
  else
    pack_a_strided(a, i0, rows, p0, kc, kernel.mr, dst);
}
void pack_b_panel(const Bf16GemmKernelInfo& kernel, MatrixView b, int64_t p0, int64_t kc,
                  int64_t j0, int64_t cols, uint32_t* dst) {
  if (b.cs == 1)
    kernel.pack_b_panel(b.data + p0 * b.rs + j0, static_cast<size_t>(b.rs),
                        static_cast<size_t>(kc), static_cast<size_t>(cols), dst);
  else
    pack_b_strided(b, p0, kc, j0, cols, kernel.nr, dst);
}

// B(p0 : p0 + kc, j0 : j0 + ncur) of a row-major view into pair panels `stride` apart, a pair
// of rows at a time across every panel: two sequential read streams, where panel order would
// read kc rows at once (too many streams for the hardware prefetcher).
void pack_b_rows(const Bf16GemmKernelInfo& kernel, MatrixView b, int64_t p0, int64_t kc,
                 int64_t j0, int64_t ncur, int64_t stride, uint32_t* dst) {
  const int nr = kernel.nr;
  for (int64_t p = 0; p < kc; p += 2) {
    const float* src = b.data + (p0 + p) * b.rs + j0;
    const size_t rows = static_cast<size_t>(std::min<int64_t>(2, kc - p));
    uint32_t* out = dst + p / 2 * nr;
    for (int64_t jr = 0; jr < ncur; jr += nr, out += stride)
      kernel.pack_b_panel(src + jr, static_cast<size_t>(b.rs), rows,
                          static_cast<size_t>(std::min<int64_t>(nr, ncur - jr)), out);
  }
}

// Panels in the packed layout (Bf16PackedMatrix): K blocks of kc, each `panels` panels of
// (ceil(kcur / 2), width) uint32.
struct PanelLayout {
  const uint32_t* base;
  int64_t panels, depth;
  int width, kc;
  int64_t stride(int64_t p0) const {
    return ceil_div(std::min<int64_t>(kc, depth - p0), 2) * width;
  }
  const uint32_t* panel(int64_t index, int64_t p0) const {
    return base + p0 / 2 * panels * width + index * stride(p0);
  }
};

// Packs A rows [0, m) (k deep) into dst in PanelLayout order for K blocks of kc, spread over
// the pool.
void pack_a_whole(const Bf16GemmKernelInfo& kernel, MatrixView a, int64_t m, int64_t k, int kc,
                  int num_threads, uint32_t* dst) {
  const int mr = kernel.mr;
  const PanelLayout layout{dst, ceil_div(m, mr), k, mr, kc};
  auto task = [&](int64_t panel, int) {
    for (int64_t p0 = 0; p0 < k; p0 += kc)
      pack_a_panel(kernel, a, panel * mr, std::min<int64_t>(mr, m - panel * mr), p0,
                   std::min<int64_t>(kc, k - p0), const_cast<uint32_t*>(layout.panel(panel, p0)));
  };
  cpu_thread_pool().parallel_for(layout.panels, num_threads, task);
}

void scale_c(int64_t m, int64_t n, float* c, int64_t ldc, float beta) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
}

// The GEMM on a packed A.
void gemm_packed_a(const Bf16GemmKernelInfo& kernel, int64_t m, int64_t n, int64_t k,
                   const PanelLayout& a, const Bf16GemmOperand& b, float* c, int64_t ldc,
                   float alpha, float beta, const GemmEpilogue& ep, F32GemmEpilogueFn epilogue,
                   int num_threads) {
  const int mr = kernel.mr, nr = kernel.nr;
  // Tasks: (M part) x (N block), whole register tiles, as evenly as the tiles allow.
  const int64_t tiles_m = ceil_div(m, mr), panels_n = ceil_div(n, nr);
  int64_t n_blocks = 0, parts_m = 0;
  split_gemm_tasks(tiles_m, panels_n, ceil_div(n, kernel.nc), num_threads, &n_blocks, &parts_m);
  const int64_t kc_max = std::min<int64_t>(kernel.kc, k);
  // On the last K block, bias, residual and clamp-type activations go into the micro-kernel's
  // registers; other activations take the tile epilogue after the store.
  float clamp_lo = 0.0f, clamp_hi = 0.0f;
  const bool fusable = !ep.empty() && fused_epilogue_clamp(ep, &clamp_lo, &clamp_hi);
  auto task = [&](int64_t t, int) {
    const int64_t part = t % parts_m, block = t / parts_m;
    const int64_t m_begin = tiles_m * part / parts_m * mr;
    const int64_t m_end = std::min(m, tiles_m * (part + 1) / parts_m * mr);
    const int64_t j0 = panels_n * block / n_blocks * nr;
    const int64_t ncur = std::min(n, panels_n * (block + 1) / n_blocks * nr) - j0;
    const int64_t npanels = ceil_div(ncur, nr);
    Bf16Scratch& s = scratch();
    uint32_t* b_buf =
        b.packed ? nullptr : s.b_pairs.get(static_cast<size_t>(npanels * nr * ceil_div(kc_max, 2)));
    float* f_buf = b.packer ? s.b_floats.get(static_cast<size_t>(npanels * nr * kc_max)) : nullptr;
    for (int64_t p0 = 0; p0 < k; p0 += kernel.kc) {
      const int64_t kc = std::min<int64_t>(kernel.kc, k - p0), kp = ceil_div(kc, 2);
      const uint32_t* b_panels;
      int64_t b_stride;
      if (b.packed) {
        b_panels = b.packed->panel(j0 / nr, p0);
        b_stride = b.packed->panel_stride(p0);
      } else {
        b_stride = kp * nr;
        if (b.packer) b.packer->pack(p0, j0, kc, ncur, nr, kc * nr, f_buf);
        if (!b.packer && !b.f32_panels && b.view.cs == 1) {
          pack_b_rows(kernel, b.view, p0, kc, j0, ncur, b_stride, b_buf);
        } else {
          for (int64_t jp = 0; jp < npanels; ++jp) {
            uint32_t* dst = b_buf + jp * b_stride;
            const int64_t cols = std::min<int64_t>(nr, ncur - jp * nr);
            if (b.packer)
              kernel.pack_b_panel(f_buf + jp * kc * nr, static_cast<size_t>(nr),
                                  static_cast<size_t>(kc), static_cast<size_t>(nr), dst);
            else if (b.f32_panels)
              kernel.pack_b_panel(b.f32_panels + p0 * round_up(n, nr) + (j0 / nr + jp) * kc * nr,
                                  static_cast<size_t>(nr), static_cast<size_t>(kc),
                                  static_cast<size_t>(nr), dst);
            else
              pack_b_panel(kernel, b.view, p0, kc, j0 + jp * nr, cols, dst);
          }
        }
        b_panels = b_buf;
      }
      const float beta_block = p0 == 0 ? beta : 1.0f;
      const bool last = p0 + kc == k;
      const bool fuse = last && fusable;
      for (int64_t i = m_begin; i < m_end; i += mr) {
        const int64_t rows = std::min<int64_t>(mr, m_end - i);
        const uint32_t* a_panel = a.panel(i / mr, p0);
        for (int64_t jp = 0; jp < npanels; ++jp) {
          const int64_t j = j0 + jp * nr, cols = std::min<int64_t>(nr, ncur - jp * nr);
          float* tile = c + i * ldc + j;
          F32GemmTileEpilogue te;
          if (fuse) te = fused_tile_epilogue(ep, clamp_lo, clamp_hi, i, j);
          kernel.ukernel(static_cast<size_t>(rows), static_cast<size_t>(cols),
                         static_cast<size_t>(kp), a_panel, b_panels + jp * b_stride, tile,
                         static_cast<size_t>(ldc), alpha, beta_block, fuse ? &te : nullptr);
          if (last && !fuse && !ep.empty())
            epilogue(tile, static_cast<size_t>(ldc), static_cast<size_t>(rows),
                     static_cast<size_t>(cols), static_cast<size_t>(i), static_cast<size_t>(j), ep);
        }
      }
    }
  };
  cpu_thread_pool().parallel_for(parts_m * n_blocks, num_threads, task);
}

}  // namespace

const Bf16GemmKernelInfo* bf16_gemm_kernel() {
  return bf16_unavailable_reason().empty() ? &kBf16Kernel : nullptr;
}

std::string bf16_unavailable_reason() {
  if (!cpu_features().avx512_bf16) return "this CPU has no AVX512_BF16 (vdpbf16ps)";
  const Expected<Isa>& isa = selected_isa();
  if (!isa.is_ok()) return isa.status().message();
  if (isa.value() < Isa::kAvx512)
    return std::string("PEREGRINE_ISA=") + isa_name(isa.value()) + " excludes AVX-512 BF16";
  return "";
}

void Bf16PackedMatrix::Free::operator()(uint32_t* p) const { std::free(p); }

const uint32_t* Bf16PackedMatrix::panel(int64_t index, int64_t p0) const {
  return PanelLayout{data_.get(), panels_, depth(), width_, kc_}.panel(index, p0);
}
int64_t Bf16PackedMatrix::panel_stride(int64_t p0) const {
  return PanelLayout{data_.get(), panels_, depth(), width_, kc_}.stride(p0);
}

Bf16PackedMatrix Bf16PackedMatrix::pack_a(const Bf16GemmKernelInfo& kernel, MatrixView a, int64_t m,
                                          int64_t k, int kc) {
  Bf16PackedMatrix pm;
  pm.is_a_ = true;
  pm.rows_ = m, pm.cols_ = k;
  pm.width_ = kernel.mr, pm.kc_ = kc > 0 ? kc : kernel.kc;
  pm.kernel_ = &kernel;
  pm.panels_ = ceil_div(m, kernel.mr);
  pm.data_.reset(
      aligned_array<uint32_t>(static_cast<size_t>(pm.panels_ * kernel.mr * ceil_div(k, 2))));
  pack_a_whole(kernel, a, m, k, pm.kc_, 1, pm.data_.get());
  return pm;
}

Bf16PackedMatrix Bf16PackedMatrix::pack_b(const Bf16GemmKernelInfo& kernel, MatrixView b,
                                          int64_t k, int64_t n) {
  Bf16PackedMatrix pm;
  pm.is_a_ = false;
  pm.rows_ = k, pm.cols_ = n;
  pm.width_ = kernel.nr, pm.kc_ = kernel.kc;
  pm.kernel_ = &kernel;
  pm.panels_ = ceil_div(n, kernel.nr);
  pm.data_.reset(
      aligned_array<uint32_t>(static_cast<size_t>(pm.panels_ * kernel.nr * ceil_div(k, 2))));
  for (int64_t p0 = 0; p0 < k; p0 += kernel.kc)
    for (int64_t jp = 0; jp < pm.panels_; ++jp)
      pack_b_panel(kernel, b, p0, std::min<int64_t>(kernel.kc, k - p0), jp * kernel.nr,
                   std::min<int64_t>(kernel.nr, n - jp * kernel.nr),
                   const_cast<uint32_t*>(pm.panel(jp, p0)));
  return pm;
}

void bf16_gemm(const Bf16GemmKernelInfo& kernel, int64_t m, int64_t n, int64_t k,
               const Bf16GemmOperand& a, const Bf16GemmOperand& b, float* c, int64_t ldc,
               float alpha, float beta, const GemmEpilogue& ep, F32GemmEpilogueFn epilogue,
               int num_threads) {
  if (m <= 0 || n <= 0) return;
  num_threads = std::max(1, num_threads);
  if (k <= 0) {
    scale_c(m, n, c, ldc, beta);
    if (!ep.empty())
      epilogue(c, static_cast<size_t>(ldc), static_cast<size_t>(m), static_cast<size_t>(n), 0, 0,
               ep);
    return;
  }
  if (a.packed) {
    const PanelLayout layout{a.packed->panel(0, 0), ceil_div(m, kernel.mr), k, kernel.mr,
                             kernel.kc};
    gemm_packed_a(kernel, m, n, k, layout, b, c, ldc, alpha, beta, ep, epilogue, num_threads);
    return;
  }
  // Rows of A in chunks, each packed whole (all threads) and then multiplied; the epilogue's
  // row-indexed terms shift with the chunk.
  const int64_t kp = ceil_div(k, 2);
  const int64_t chunk = std::max<int64_t>(kernel.mr, kAChunkMaxPairs / kp / kernel.mr * kernel.mr);
  for (int64_t m0 = 0; m0 < m; m0 += chunk) {
    const int64_t rows = std::min(chunk, m - m0);
    uint32_t* buf = scratch().a_whole.get(
        static_cast<size_t>(ceil_div(rows, kernel.mr) * kernel.mr * kp));
    pack_a_whole(kernel, MatrixView{a.view.data + m0 * a.view.rs, a.view.rs, a.view.cs}, rows, k,
                 kernel.kc, num_threads, buf);
    GemmEpilogue chunk_ep = ep;
    if (ep.bias_kind == GemmEpilogue::Bias::kPerRow) chunk_ep.bias = ep.bias + m0;
    if (ep.residual) chunk_ep.residual = ep.residual + m0 * ep.ldr;
    const PanelLayout layout{buf, ceil_div(rows, kernel.mr), k, kernel.mr, kernel.kc};
    gemm_packed_a(kernel, rows, n, k, layout, b, c + m0 * ldc, ldc, alpha, beta, chunk_ep,
                  epilogue, num_threads);
  }
}

}  // namespace peregrine::cpu
