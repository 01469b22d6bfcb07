// f32 GEMM, BLIS-style:  C(M, N) = epilogue(alpha * op(A)(M, K) * op(B)(K, N) + beta * C)
//
// Loops (assumptions: row-major C with row stride ldc; A and B any strides or pre-packed):
//   jc: tasks over (M part) x (N by NC), spread over the thread pool (one thread: the whole
//       M, so each B block is packed once); per task:
//     pc: K by KC        pack B(kc, nc) into NR-column panels (unless pre-packed)
//       ic: M part by MC pack A(mc, kc) into MR-row panels (unless pre-packed)
//         jr: nc by NR
//           ir: mc by MR micro-kernel on an MR x NR tile; edge tiles via the ISA's partial
//                        kernel or a temporary tile; after the last pc block the epilogue runs
//                        on the tile while it is hot.
// With A pre-packed (weights) NC is smaller (the B block stays in L2) and ir runs outside jr;
// a plain A against a pre-packed B (a linear layer) is packed whole first, then walked the same;
// with few rows of pre-packed A, a row-major B is read in place by the partial kernel.
// beta == 0 never reads C. The micro-kernel, MR/NR and block sizes come from one per-ISA
// table (GemmKernelInfo).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/ukernels/f32_gemm_ukernels.h"

namespace peregrine::cpu {

enum class Activation {
  kNone,
  kRelu,
  kClip,
  kLeakyRelu,
  kSigmoid,
  kSilu,
  kHardSwish,
  kGelu,      // exact: 0.5 x (1 + erf(x / sqrt 2))
  kGeluTanh,  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
  kTanh,
};

// Applied to each output element once its full K sum is known, in this order:
//   v = alpha * sum + beta * C;  v += bias;  v += residual;  C = activation(v)
struct GemmEpilogue {
  enum class Bias { kNone, kPerRow, kPerColumn };
  Bias bias_kind = Bias::kNone;
  const float* bias = nullptr;      // M values (per row) or N values (per column)
  const float* residual = nullptr;  // (M, N) with row stride ldr; may alias nothing in C
  int64_t ldr = 0;
  Activation activation = Activation::kNone;
  float act_alpha = 0.0f;  // Clip: min; LeakyRelu: slope
  float act_beta = 0.0f;   // Clip: max
  bool empty() const {
    return bias_kind == Bias::kNone && residual == nullptr && activation == Activation::kNone;
  }
};

// Applies `ep` to the tile c(rows, cols) (row stride ldc) that sits at (row0, col0) of C.
using F32GemmEpilogueFn = void (*)(float* c, size_t ldc, size_t rows, size_t cols, size_t row0,
                                   size_t col0, const GemmEpilogue& ep);

// The clamp a fused micro-kernel applies for `ep`'s activation (HardSwish: none, the tile
// epilogue's own step); false when the activation needs the full epilogue.
bool fused_epilogue_clamp(const GemmEpilogue& ep, float* lo, float* hi);
// `ep` (bias, residual, clamp `lo`..`hi`) for the full tile at (row0, col0) of C.
F32GemmTileEpilogue fused_tile_epilogue(const GemmEpilogue& ep, float lo, float hi, int64_t row0,
                                        int64_t col0);

// The driver's work split for tiles_m register tiles of M and panels_n of N, `n_blocks` N
// blocks by cache size: *blocks N blocks x *parts M parts. With fewer N blocks than threads
// the dimension with more tiles is split so no thread idles; otherwise the N blocks become a
// multiple of the thread count.
void split_gemm_tasks(int64_t tiles_m, int64_t panels_n, int64_t n_blocks, int num_threads,
                      int64_t* blocks, int64_t* parts);

// One ISA's GEMM: micro-kernel, register tile and cache blocking.
struct GemmKernelInfo {
  Isa isa;
  const char* name;  // "f32_gemm_ukernel_6x16__avx2"
  F32GemmUkernelFn ukernel;
  F32GemmFusedUkernelFn fused_ukernel;  // min/max-type epilogues in registers; may be nullptr
  // Edge tiles straight into C; nullptr: the full kernel on a temporary tile, merged into C.
  F32GemmPartialUkernelFn partial_ukernel;
  F32GemmIndirectUkernelFn indirect_ukernel;  // B by row pointers; nullptr: no f32_gemm_indirect
  F32GemmEpilogueFn epilogue;
  int mr, nr;  // register tile
  int kc;      // K block: one A and one B micro-panel stay in L1
  int mc;      // M block (multiple of mr): the packed A block stays in L2
  int nc;      // N block (multiple of nr): the packed B block stays in L3
  int nc_l2;   // N block when A is pre-packed: the packed B block (kc, nc_l2) stays in L2
  // The micro-kernel's rate relative to the AVX2 one, for choosing between tile shapes.
  double relative_rate;
  // Packs a full micro-panel of row-major A; nullptr: the driver's generic copy.
  F32GemmPackAFn pack_a_panel = nullptr;
};

// The table entry for `isa`, or nullptr when this CPU cannot run it.
const GemmKernelInfo* f32_gemm_kernel_for(Isa isa);
// The entry for selected_isa() (the best level when PEREGRINE_ISA is invalid).
const GemmKernelInfo& f32_gemm_kernel();

// Every kernel this CPU runs at or below the selected ISA level (scalar first).
std::vector<const GemmKernelInfo*> f32_gemm_kernel_candidates();
// Estimated time of an (m, n) product on `kernel`, in relative units: the area it computes
// (m and n rounded up to MR and NR, or less where a partial kernel takes the edges) over its
// relative rate. m or n <= 0 means unknown (large): that dimension counts no padding.
double f32_gemm_relative_time(const GemmKernelInfo& kernel, int64_t m, int64_t n);
// The column step in which `kernel` computes a product's last columns: NR, or 16 where a
// partial kernel takes edge tiles in vectors of 16 (it computes no column past the next 16).
int f32_gemm_column_step(const GemmKernelInfo& kernel);
// The candidate with the least relative time for (m, n): a wide tile pads small dimensions
// (AVX-512's 14 x 32 computes twice the columns of a 16-column product).
const GemmKernelInfo& f32_gemm_kernel_for_shape(int64_t m, int64_t n);

// Element (r, c) of a matrix is data[r * rs + c * cs].
struct MatrixView {
  const float* data = nullptr;
  int64_t rs = 0, cs = 0;
};

// An operand packed once (weights), in the driver's order: K in blocks of the kernel's KC,
// and within each K block the panels one after another, so the (kc, nc) B block or (mc, kc)
// A block the driver walks is contiguous, exactly as if packed on the fly.
//   packed A: per K block, ceil(M / MR) panels of (kc, MR); rows past M are zero.
//   packed B: per K block, ceil(N / NR) panels of (kc, NR); columns past N are zero.
// 64-byte aligned. Only usable with the kernel (and its KC) it was packed for.
class PackedMatrix {
 public:
  static PackedMatrix pack_a(const GemmKernelInfo& kernel, MatrixView a, int64_t m, int64_t k);
  static PackedMatrix pack_b(const GemmKernelInfo& kernel, MatrixView b, int64_t k, int64_t n);

  bool is_a() const { return is_a_; }
  int64_t rows() const { return rows_; }                   // M for A, K for B
  int64_t cols() const { return cols_; }                   // K for A, N for B
  int width() const { return width_; }                     // MR for A, NR for B
  int64_t depth() const { return is_a_ ? cols_ : rows_; }  // K
  // Panel `index` of the K block starting at p0 (a multiple of the kernel's KC).
  const float* panel(int64_t index, int64_t p0) const {
    return data_.get() + p0 * panels_ * width_ + index * panel_stride(p0);
  }
  // Distance between consecutive panels of the K block starting at p0: (kc, width).
  int64_t panel_stride(int64_t p0) const { return std::min<int64_t>(kc_, depth() - p0) * width_; }
  const GemmKernelInfo* kernel() const { return kernel_; }
  // The matrix back in row-major order: dst (rows(), cols()).
  void unpack(float* dst) const;

 private:
  struct Free {
    void operator()(float* p) const;
  };
  bool is_a_ = false;
  int64_t rows_ = 0, cols_ = 0, panels_ = 0, kc_ = 1;
  int width_ = 0;
  const GemmKernelInfo* kernel_ = nullptr;
  std::unique_ptr<float[], Free> data_;
};

// A B operand that exists only as a rule (implicit GEMM: a convolution's im2col matrix), packed
// by the caller straight into the driver's panels, so the matrix is never written out whole.
class BPanelPacker {
 public:
  virtual ~BPanelPacker() = default;
  // Writes B(p0 : p0 + kc, j0 : j0 + nc) as ceil(nc / nr) panels of (kc, nr), each
  // `panel_stride` floats apart, columns past nc zero. Called concurrently from several threads.
  virtual void pack(int64_t p0, int64_t j0, int64_t kc, int64_t nc, int nr, int64_t panel_stride,
                    float* dst) const = 0;
};

// B (k, n) already in caller memory in exactly PackedMatrix::pack_b's layout for `kernel`
// (producers that can write panels directly, e.g. Winograd's input transform): per K block of
// KC rows, ceil(n / NR) panels of (kc, NR); columns past n are read but only feed C columns the
// driver discards. 64-byte aligned base. These give its size and the offset of B(p, j).
inline int64_t packed_b_floats(const GemmKernelInfo& kernel, int64_t k, int64_t n) {
  return (n + kernel.nr - 1) / kernel.nr * kernel.nr * k;
}
inline int64_t packed_b_offset(const GemmKernelInfo& kernel, int64_t k, int64_t n, int64_t p,
                               int64_t j) {
  const int64_t p0 = p / kernel.kc * kernel.kc, kc = std::min<int64_t>(kernel.kc, k - p0);
  return p0 * ((n + kernel.nr - 1) / kernel.nr * kernel.nr) + (j / kernel.nr) * kc * kernel.nr +
         (p - p0) * kernel.nr + j % kernel.nr;
}

// A GEMM operand: a strided view, a matrix packed for the same kernel, (B only) a packer, or
// (B only) panels already packed in caller memory (see packed_b_offset).
struct GemmOperand {
  MatrixView view;
  const PackedMatrix* packed = nullptr;
  const BPanelPacker* packer = nullptr;
  const float* prepacked_b = nullptr;
  static GemmOperand of(const float* data, int64_t rs, int64_t cs) {
    return GemmOperand{MatrixView{data, rs, cs}, nullptr, nullptr, nullptr};
  }
  static GemmOperand of(const PackedMatrix& p) {
    return GemmOperand{MatrixView{}, &p, nullptr, nullptr};
  }
  static GemmOperand of(const BPanelPacker& p) {
    return GemmOperand{MatrixView{}, nullptr, &p, nullptr};
  }
  static GemmOperand prepacked(const float* panels) {
    return GemmOperand{MatrixView{}, nullptr, nullptr, panels};
  }
};

// B of an indirect GEMM (f32_gemm_indirect): N = rows() * row_len() columns in rows of
// row_len() (a convolution's output rows), B(p, r * row_len() + j) = pointers of row r [p][j].
class IndirectB {
 public:
  virtual ~IndirectB() = default;
  virtual int64_t rows() const = 0;
  virtual int64_t row_len() const = 0;
  // Writes the k pointers of row r, each valid for row_len() floats. Called concurrently from
  // several threads.
  virtual void row_pointers(int64_t r, const float** dst) const = 0;
};

// C = epilogue(A * B) for a pre-packed A (m, k), k > 0, and an indirect B: no B is packed, each
// tile reads its K rows through the pointers. Tasks are B's rows. `kernel` must be the one A was
// packed for and have an indirect_ukernel.
void f32_gemm_indirect(const GemmKernelInfo& kernel, int64_t m, int64_t k, const PackedMatrix& a,
                       const IndirectB& b, float* c, int64_t ldc, const GemmEpilogue& ep,
                       int num_threads);

// C = epilogue(alpha * A * B + beta * C) for A (m, k), B (k, n), C (m, n) with row stride ldc,
// on exactly min(num_threads, tasks) threads of cpu_thread_pool(). Packed operands must come
// from the same `kernel`. Empty m or n does nothing; k == 0 gives beta * C (0 for beta == 0).
void f32_gemm(const GemmKernelInfo& kernel, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
              const GemmOperand& b, float* c, int64_t ldc, float alpha, float beta,
              const GemmEpilogue& ep, int num_threads);

}  // namespace peregrine::cpu
