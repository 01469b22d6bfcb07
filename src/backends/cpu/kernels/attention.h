// Fused scaled-dot-product attention on the CPU (float32), for peregrine.Attention:
//
//   out[b](Sq, Dv) = softmax(scale * Q[b](Sq, D) K[b](Skv, D)^T + mask[b] [+ causal]) V[b](Skv, Dv)
//
// for every index b of a batch shape (the head form's (B, H), or the plain form's leading dims).
// Algorithm (FlashAttention-style, one pass over the keys): tasks are (b, query block of up to
// kAttentionQueryBlock rows, kAttentionCausalQueryBlock when causal), spread over the thread pool.
// A task walks the keys in blocks of kAttentionKeyBlock: scores (rows, kb) = scale * Q K^T + mask;
// per row a running max m and running sum l of exp(score - m); when a block raises m the row's
// accumulator and l are rescaled by exp(m_old - m_new); acc += exp(scores - m) V_block. After the
// last block out = acc / l. The (Sq, Skv) matrix never exists; per thread scratch is (rows x kb)
// scores + (rows x Dv) accumulator, grown once and reused (no allocation per run).
//
// Causal: query i (0-based within Sq) sees key j iff j <= i + Skv - Sq (the last query sees
// every key); key blocks past a tile's last visible key are skipped. A row that sees no key at
// all (only when Skv < Sq, or a mask of -inf everywhere) gives NaN, as the unfused graph does,
// or zeros with empty_rows_zero (ONNX Attention's rule, and torch's exported NaN guard).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/cpu_features.h"

namespace peregrine::cpu {

constexpr int kAttentionMaxBatchRank = 6;
// Rows per task (at most). Taller blocks amortize each row's per-block work over more rows
// (peregrine_attention_bench, ViT-B/16's 197 tokens); causal tiles of 128 rows compute more of
// the masked triangle, so causal keeps 32. Where a batch index has several query blocks, its
// keys and values are packed once for all of them (f32_attention), else each task packs the
// key blocks it walks.
constexpr int64_t kAttentionQueryBlock = 128;
constexpr int64_t kAttentionCausalQueryBlock = 32;
constexpr int64_t kAttentionKeyBlock = 128;  // keys per online-softmax step

// A float32 operand: batch index (b_0, ..., b_{r-1}) starts at
// data + sum_i b_i * batch_strides[i] (0 where broadcast); element (row, col) of that matrix is
// at row * rs + col * cs. Rows are queries (Q, out, mask) or keys (K, V); columns are features
// (Q, K, V, out) or keys (mask).
struct AttentionOperand {
  const float* data = nullptr;
  int64_t batch_strides[kAttentionMaxBatchRank] = {};
  int64_t rs = 0, cs = 1;
};

struct AttentionProblem {
  int batch_rank = 0;
  int64_t batch_dims[kAttentionMaxBatchRank] = {};
  int64_t sq = 0, skv = 0, d = 0, dv = 0;
  float scale = 1.0f;
  // > 0: each scaled score s becomes softcap * tanh(s / softcap), then the mask is added.
  float softcap = 0.0f;
  bool causal = false;
  bool empty_rows_zero = false;  // a row that sees no key gives zeros instead of NaN
  AttentionOperand q, k, v;  // q.cs and v.cs must be 1; k.cs may be anything (K^T given)
  AttentionOperand mask;     // data == nullptr: none; rs / cs may be 0 (broadcast)
  AttentionOperand out;      // written (data cast from const); out.cs must be 1
};

// One task: rows [0, rows) of one batch's product, already offset to the task's first row.
//   q: (rows, d) row stride q_rs; k: key j feature e at k[j * k_rs + e * k_cs], (skv keys);
//   v: (skv, dv) row stride v_rs; mask: (rows, skv) strides mask_rs / mask_cs, or nullptr;
//   out: (rows, dv) row stride out_rs.
// Causal: row r sees keys j < min(skv, key_limit0 + r) (key_limit0 may be <= 0); without causal
// every row sees all skv keys.
struct AttentionTile {
  const float* q;
  int64_t q_rs;
  const float* k;
  int64_t k_rs, k_cs;
  const float* v;
  int64_t v_rs;
  const float* mask;
  int64_t mask_rs, mask_cs;
  float* out;
  int64_t out_rs;
  int64_t rows, skv, d, dv;
  bool causal;
  int64_t key_limit0;
  float scale;
  float softcap = 0.0f;          // as AttentionProblem::softcap
  bool empty_rows_zero = false;  // as AttentionProblem::empty_rows_zero
  // Keys and values already packed for every key (the kernel's pack function), shared by the
  // query blocks of one batch index; nullptr: the tile packs each key block itself.
  const void* k_packed = nullptr;
  const void* v_packed = nullptr;
};

using AttentionTileFn = void (*)(const AttentionTile& tile);
// Packs a tile's keys and values for all skv keys, as the tile packs one key block, into
// k_dst / v_dst of the sizes below, 64-byte aligned.
using AttentionPackFn = void (*)(const AttentionTile& tile, void* k_dst, void* v_dst);
// 4-byte words of a batch index's packed keys (skv, d) or values (skv, dv).
using AttentionPackedWordsFn = int64_t (*)(int64_t skv, int64_t width);

namespace scalar {
void f32_attention_tile__scalar(const AttentionTile& tile);
}  // namespace scalar
// The vector tiles: kernels/attention_tile_impl.h over 8 lanes (AVX2, 6-row x 16-column register
// tiles) and 16 (AVX-512, 6 x 32), float32 products; and over 16 lanes with bf16 products
// (AVX-512 BF16: the bf16 GEMM micro-kernel's 14 x 32 tiles, kernels/attention-avx512bf16.cc).
namespace avx2 {
void f32_attention_tile__avx2(const AttentionTile& tile);
void f32_attention_pack__avx2(const AttentionTile& tile, void* k_dst, void* v_dst);
int64_t f32_attention_key_words__avx2(int64_t skv, int64_t d);
int64_t f32_attention_value_words__avx2(int64_t skv, int64_t dv);
}  // namespace avx2
namespace avx512 {
void f32_attention_tile__avx512(const AttentionTile& tile);
void f32_attention_pack__avx512(const AttentionTile& tile, void* k_dst, void* v_dst);
int64_t f32_attention_key_words__avx512(int64_t skv, int64_t d);
int64_t f32_attention_value_words__avx512(int64_t skv, int64_t dv);
}  // namespace avx512
namespace avx512bf16 {
void bf16_attention_tile__avx512bf16(const AttentionTile& tile);
void bf16_attention_pack__avx512bf16(const AttentionTile& tile, void* k_dst, void* v_dst);
int64_t bf16_attention_key_words__avx512bf16(int64_t skv, int64_t d);
int64_t bf16_attention_value_words__avx512bf16(int64_t skv, int64_t dv);
}  // namespace avx512bf16

struct AttentionKernelInfo {
  Isa isa;
  const char* name;  // "f32_attention_tile__avx2"
  AttentionTileFn tile;
  AttentionPackFn pack;                           // nullptr: the tile reads K and V in place
  AttentionPackedWordsFn key_words, value_words;  // the pack's sizes (with pack)
  // Query blocks are rounded up to a multiple of this many rows: the products' register tile
  // height, so a block's rows do not end in a short tile.
  int64_t row_tile;
};

// The entry for `isa`, or nullptr when this CPU cannot run it.
const AttentionKernelInfo* f32_attention_kernel_for(Isa isa);
// The entry for selected_isa().
const AttentionKernelInfo& f32_attention_kernel();

// The bf16 tile (products in bf16 with float32 accumulation, softmax in float32), or nullptr
// where bf16_unavailable_reason() (gemm/bf16_gemm.h) says why not.
const AttentionKernelInfo* bf16_attention_kernel();

// Runs `p` on exactly min(num_threads, tasks) threads of cpu_thread_pool().
void run_attention(const AttentionKernelInfo& kernel, const AttentionProblem& p, int num_threads);

// The CPU kernel of peregrine.Attention (attributes num_heads, k_transposed, scale, causal).
// Shapes it does not handle (non-float32, batch dims that need broadcasting beyond K / V / mask
// broadcast into Q's batch, batch rank above kAttentionMaxBatchRank) run the reference kernel.
Expected<std::unique_ptr<PreparedKernel>> prepare_attention(const ir::Node& node);

}  // namespace peregrine::cpu
