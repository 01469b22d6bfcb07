// bf16 GEMM: C = epilogue(alpha * A * B + beta * C) with A and B rounded to bfloat16 and the
// products summed in float32 (AVX-512 BF16, vdpbf16ps). The engine's reduced-precision path for
// nodes a session runs at --precision bf16 (passes/assign_precision.h): activations are
// converted while they are packed, constant weights once at prepare time.
//
// Loops: tasks over (M part) x (N block); per task, per K block of KC: B(kc, nc) packed into
// pair panels (unless pre-packed), then each MR-row A panel against every NR-column B panel of
// the block, the epilogue applied to each tile after its last K block while it is in cache.
// A that is not pre-packed is packed whole first (in row chunks), shared by the tasks.
#pragma once

#include <cstdint>
#include <memory>

#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/ukernels/bf16_gemm_ukernels.h"

namespace peregrine::cpu {

struct Bf16GemmKernelInfo {
  const char* name;  // "bf16_gemm_ukernel_14x32__avx512bf16"
  Bf16GemmUkernelFn ukernel;
  Bf16PackAFn pack_a_panel;
  Bf16PackBFn pack_b_panel;
  int mr, nr;
  int kc;  // K block, even: an A and a B micro-panel stay in L1
  int nc;  // N block (multiple of nr): the packed B block (kc, nc) stays in L2
  Bf16GemmIndirectUkernelFn indirect_ukernel;  // B rows in place (kernels/conv_phase_planes.h)
  Bf16InterleaveRowsFn interleave_rows;        // two float32 rows into pairs
};

// The bf16 kernel, or nullptr when this CPU (or PEREGRINE_ISA) does not allow AVX-512 BF16.
const Bf16GemmKernelInfo* bf16_gemm_kernel();
// Why bf16_gemm_kernel() is nullptr ("this CPU has no AVX512_BF16", ...); "" when it is not.
std::string bf16_unavailable_reason();

// A weight matrix converted to bf16 once, in the driver's layout: K in blocks of KC, each block
// its panels one after another ((kc/2, MR) uint32 for A, (kc/2, NR) for B), zero-padded.
class Bf16PackedMatrix {
 public:
  // kc: the K block (even; 0: the kernel's). bf16_gemm takes only the kernel's; a driver of
  // its own may balance the blocks of its K (kernels/conv_phase_planes.cc).
  static Bf16PackedMatrix pack_a(const Bf16GemmKernelInfo& kernel, MatrixView a, int64_t m,
                                 int64_t k, int kc = 0);
  static Bf16PackedMatrix pack_b(const Bf16GemmKernelInfo& kernel, MatrixView b, int64_t k,
                                 int64_t n);
  bool is_a() const { return is_a_; }
  int64_t rows() const { return rows_; }  // M for A, K for B
  int64_t cols() const { return cols_; }  // K for A, N for B
  int64_t depth() const { return is_a_ ? cols_ : rows_; }
  int kc() const { return kc_; }
  // Panel `index` of the K block starting at p0 (a multiple of KC).
  const uint32_t* panel(int64_t index, int64_t p0) const;
  int64_t panel_stride(int64_t p0) const;  // uint32s between panels of that block
  const Bf16GemmKernelInfo* kernel() const { return kernel_; }

 private:
  struct Free {
    void operator()(uint32_t* p) const;
  };
  bool is_a_ = false;
  int64_t rows_ = 0, cols_ = 0, panels_ = 0;
  int width_ = 0, kc_ = 2;
  const Bf16GemmKernelInfo* kernel_ = nullptr;
  std::unique_ptr<uint32_t[], Free> data_;
};

// An operand: a float32 strided view (converted while packed), a matrix packed for the same
// kernel, or (B only) a packer that writes float32 panels (an im2col rule), or float32 panels
// already in memory in f32_gemm's packed-B layout for NR = the bf16 kernel's NR and KC = its KC
// (packed_b_offset of an f32 kernel with those sizes: Winograd's transformed input).
struct Bf16GemmOperand {
  MatrixView view;
  const Bf16PackedMatrix* packed = nullptr;
  const BPanelPacker* packer = nullptr;
  const float* f32_panels = nullptr;
  static Bf16GemmOperand of(const float* data, int64_t rs, int64_t cs) {
    return {MatrixView{data, rs, cs}, nullptr, nullptr, nullptr};
  }
  static Bf16GemmOperand of(const Bf16PackedMatrix& p) {
    return {MatrixView{}, &p, nullptr, nullptr};
  }
  static Bf16GemmOperand of(const BPanelPacker& p) { return {MatrixView{}, nullptr, &p, nullptr}; }
  static Bf16GemmOperand float_panels(const float* panels) {
    return {MatrixView{}, nullptr, nullptr, panels};
  }
};

// C = epilogue(alpha * A * B + beta * C) for A (m, k), B (k, n), C (m, n) row stride ldc, on
// up to num_threads threads of cpu_thread_pool(). `epilogue` applies `ep` to a finished tile
// (an f32 kernel's, GemmKernelInfo::epilogue). k == 0 gives beta * C.
void bf16_gemm(const Bf16GemmKernelInfo& kernel, int64_t m, int64_t n, int64_t k,
               const Bf16GemmOperand& a, const Bf16GemmOperand& b, float* c, int64_t ldc,
               float alpha, float beta, const GemmEpilogue& ep, F32GemmEpilogueFn epilogue,
               int num_threads);

}  // namespace peregrine::cpu
