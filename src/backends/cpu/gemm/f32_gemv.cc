#include "backends/cpu/gemm/f32_gemv.h"

#include <algorithm>

#include "backends/cpu/thread_pool.h"

namespace peregrine::cpu {

namespace scalar {

// NR == 8; the tile is the accumulator, one pass per K step.
void f32_gemv_panel__scalar(size_t m, size_t k, const float *a, size_t lda, const float *packed_b,
                            size_t panels, size_t panel, size_t kc, float *tile) {
  std::fill(tile, tile + m * 8, 0.0f);
  for (size_t p0 = 0; p0 < k; p0 += kc) {
    const size_t kcur = std::min(kc, k - p0);
    const float *b = packed_b + p0 * panels * 8 + panel * kcur * 8;  // (kcur, 8)
    for (size_t p = 0; p < kcur; ++p)
      for (size_t i = 0; i < m; ++i) {
        const float av = a[i * lda + p0 + p];
        for (size_t j = 0; j < 8; ++j) tile[i * 8 + j] += av * b[p * 8 + j];
      }
  }
}

}  // namespace scalar

F32GemvPanelFn f32_gemv_panel_kernel(Isa isa, const PackedMatrix &b) {
  if (b.is_a() || b.kernel() == nullptr) return nullptr;
  if (isa == Isa::kScalar && b.width() == 8) return scalar::f32_gemv_panel__scalar;
  if (isa == Isa::kAvx2 && b.width() == 16 && isa_supported(Isa::kAvx2))
    return avx2::f32_gemv_panel_16__avx2;
  if (isa == Isa::kAvx512 && b.width() == 32 && isa_supported(Isa::kAvx512))
    return avx512::f32_gemv_panel_32__avx512;
  return nullptr;
}

bool f32_gemv_applies(const GemmKernelInfo &kernel, int64_t m, const PackedMatrix &b) {
  return m >= 1 && m <= kGemvMaxM && b.kernel() == &kernel &&
         f32_gemv_panel_kernel(kernel.isa, b) != nullptr;
}

void f32_gemv(const GemmKernelInfo &kernel, int64_t m, int64_t n, int64_t k, const float *a,
              int64_t lda, const PackedMatrix &b, float *c, int64_t ldc, float alpha, float beta,
              const GemmEpilogue &ep, int num_threads) {
  const F32GemvPanelFn panel_fn = f32_gemv_panel_kernel(kernel.isa, b);
  const int64_t nr = b.width(), panels = (n + nr - 1) / nr;
  const float *base = b.panel(0, 0);
  // A few panels per task: enough tasks to balance threads, few enough to keep claims cheap.
  const int64_t per_task =
      std::max<int64_t>(1, panels / (4 * static_cast<int64_t>(std::max(1, num_threads))));
  const int64_t tasks = (panels + per_task - 1) / per_task;
  auto task = [&](int64_t t, int) {
    alignas(64) float tile[kGemvMaxM * 32];
    for (int64_t j = t * per_task; j < std::min(panels, (t + 1) * per_task); ++j) {
      panel_fn(static_cast<size_t>(m), static_cast<size_t>(k), a, static_cast<size_t>(lda), base,
               static_cast<size_t>(panels), static_cast<size_t>(j), static_cast<size_t>(kernel.kc),
               tile);
      const int64_t j0 = j * nr, cols = std::min(nr, n - j0);
      for (int64_t i = 0; i < m; ++i) {
        float *crow = c + i * ldc + j0;
        const float *trow = tile + i * nr;
        if (beta == 0.0f) {
          for (int64_t q = 0; q < cols; ++q) crow[q] = alpha * trow[q];
        } else {
          for (int64_t q = 0; q < cols; ++q) crow[q] = alpha * trow[q] + beta * crow[q];
        }
      }
      if (!ep.empty())
        kernel.epilogue(c + j0, static_cast<size_t>(ldc), static_cast<size_t>(m),
                        static_cast<size_t>(cols), 0, static_cast<size_t>(j0), ep);
    }
  };
  cpu_thread_pool().parallel_for(tasks, num_threads, task);
}

}  // namespace peregrine::cpu
