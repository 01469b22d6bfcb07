// peregrine.Attention on the CPU: operand layouts from the node's form, the task loop over
// (batch, query block), and the scalar tile. Algorithm and layouts: kernels/attention.h.
#include "backends/cpu/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm/aligned_buffer.h"
#include "backends/cpu/gemm/bf16_gemm.h"
#include "backends/cpu/thread_pool.h"
#include "core/int_math.h"

namespace peregrine::cpu {

namespace scalar {

// The online softmax, one query row at a time over all its visible keys (no key blocking:
// the row's scores live in a scratch row of skv floats).
void f32_attention_tile__scalar(const AttentionTile& t) {
  thread_local std::vector<float> scores, acc;
  if (static_cast<int64_t>(scores.size()) < t.skv) scores.resize(static_cast<size_t>(t.skv));
  if (static_cast<int64_t>(acc.size()) < t.dv) acc.resize(static_cast<size_t>(t.dv));
  for (int64_t r = 0; r < t.rows; ++r) {
    const int64_t keys =
        t.causal ? std::clamp<int64_t>(t.key_limit0 + r, 0, t.skv) : t.skv;  // visible keys
    const float* q = t.q + r * t.q_rs;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < keys; ++j) {
      const float* k = t.k + j * t.k_rs;
      float dot = 0.0f;
      for (int64_t e = 0; e < t.d; ++e) dot += q[e] * k[e * t.k_cs];
      float s = dot * t.scale;
      if (t.softcap > 0) s = t.softcap * std::tanh(s / t.softcap);
      if (t.mask) s += t.mask[r * t.mask_rs + j * t.mask_cs];
      scores[static_cast<size_t>(j)] = s;
      m = std::max(m, s);
    }
    std::fill(acc.begin(), acc.begin() + t.dv, 0.0f);
    // Every score -inf (a fully masked row): shifting by 0 keeps each weight exp(-inf) = 0,
    // where -inf - -inf would be NaN; l stays 0 below.
    if (m == -std::numeric_limits<float>::infinity()) m = 0.0f;
    float l = 0.0f;
    for (int64_t j = 0; j < keys; ++j) {
      const float p = std::exp(scores[static_cast<size_t>(j)] - m);
      l += p;
      const float* v = t.v + j * t.v_rs;
      for (int64_t c = 0; c < t.dv; ++c) acc[static_cast<size_t>(c)] += p * v[c];
    }
    // l == 0 (nothing visible): 0 * inf = NaN, as unfused, or zeros when asked.
    const float inv = l == 0.0f && t.empty_rows_zero ? 0.0f : 1.0f / l;
    float* out = t.out + r * t.out_rs;
    for (int64_t c = 0; c < t.dv; ++c) out[c] = acc[static_cast<size_t>(c)] * inv;
  }
}

}  // namespace scalar

namespace {

// The float32 tiles, one per ISA level. Their query blocks are multiples of 4 rows (the
// attention benchmark's shapes: ViT's 197 tokens as 100 + 97).
const AttentionKernelInfo kAttentionKernels[] = {
    {Isa::kScalar, "f32_attention_tile__scalar", scalar::f32_attention_tile__scalar, nullptr,
     nullptr, nullptr, 4},
    {Isa::kAvx2, "f32_attention_tile__avx2", avx2::f32_attention_tile__avx2,
     avx2::f32_attention_pack__avx2, avx2::f32_attention_key_words__avx2,
     avx2::f32_attention_value_words__avx2, 4},
    {Isa::kAvx512, "f32_attention_tile__avx512", avx512::f32_attention_tile__avx512,
     avx512::f32_attention_pack__avx512, avx512::f32_attention_key_words__avx512,
     avx512::f32_attention_value_words__avx512, 4},
};

// Query blocks of whole 14-row tiles of the bf16 GEMM micro-kernel.
const AttentionKernelInfo kBf16AttentionKernel = {
    Isa::kAvx512,
    "bf16_attention_tile__avx512bf16",
    avx512bf16::bf16_attention_tile__avx512bf16,
    avx512bf16::bf16_attention_pack__avx512bf16,
    avx512bf16::bf16_attention_key_words__avx512bf16,
    avx512bf16::bf16_attention_value_words__avx512bf16,
    14};

// Keys and values are packed once per batch index, for all its query blocks, when there are
// several and the packed copies of every batch index fit in this many bytes (else each tile
// packs its key blocks itself).
constexpr int64_t kMaxSharedPackBytes = int64_t{64} << 20;

}  // namespace

const AttentionKernelInfo* f32_attention_kernel_for(Isa isa) {
  if (!isa_supported(isa)) return nullptr;
  for (const auto& k : kAttentionKernels)
    if (k.isa == isa) return &k;
  return nullptr;
}

const AttentionKernelInfo& f32_attention_kernel() {
  const Expected<Isa>& isa = selected_isa();
  const AttentionKernelInfo* k =
      f32_attention_kernel_for(isa.is_ok() ? isa.value() : cpu_features().best_isa());
  return k ? *k : kAttentionKernels[0];
}

const AttentionKernelInfo* bf16_attention_kernel() {
  return bf16_unavailable_reason().empty() ? &kBf16AttentionKernel : nullptr;
}

void run_attention(const AttentionKernelInfo& kernel, const AttentionProblem& p, int num_threads) {
  int64_t batches = 1;
  for (int i = 0; i < p.batch_rank; ++i) batches *= p.batch_dims[i];
  if (batches == 0 || p.sq == 0 || p.dv == 0) return;
  num_threads = std::max(1, num_threads);
  // Query blocks: at most kAttentionQueryBlock rows (kAttentionCausalQueryBlock causal), as
  // even as multiples of the kernel's row tile allow (197 rows in tiles of 4: 100 + 97, not
  // 128 + 69), smaller when that leaves threads idle (batch-1, few heads).
  const int64_t tile = kernel.row_tile;
  const int64_t max_rows =
      std::max(tile, (p.causal ? kAttentionCausalQueryBlock : kAttentionQueryBlock) / tile * tile);
  auto whole_tiles = [&](int64_t rows) { return ceil_div(rows, tile) * tile; };
  int64_t qb = std::min(p.sq, whole_tiles(ceil_div(p.sq, ceil_div(p.sq, max_rows))));
  while (qb > tile && batches * ceil_div(p.sq, qb) < 2 * num_threads) qb = whole_tiles(qb / 2);
  const int64_t blocks = ceil_div(p.sq, qb);
  // Each batch index's packed keys, then values, at 64-byte boundaries (16 words).
  auto aligned_words = [](int64_t words) { return ceil_div(words, 16) * 16; };
  const int64_t k_words = kernel.pack ? aligned_words(kernel.key_words(p.skv, p.d)) : 0;
  const int64_t v_words = kernel.pack ? aligned_words(kernel.value_words(p.skv, p.dv)) : 0;
  const bool shared_pack = kernel.pack != nullptr && blocks > 1 &&
                           batches * (k_words + v_words) * 4 <= kMaxSharedPackBytes;
  auto make_tile = [&](int64_t t) {
    int64_t b = t / blocks;
    const int64_t i0 = (t % blocks) * qb;
    int64_t oq = 0, ok = 0, ov = 0, om = 0, oo = 0;
    for (int i = p.batch_rank - 1; i >= 0; --i) {  // batch offsets, innermost dim first
      const int64_t bi = b % p.batch_dims[i];
      b /= p.batch_dims[i];
      oq += bi * p.q.batch_strides[i];
      ok += bi * p.k.batch_strides[i];
      ov += bi * p.v.batch_strides[i];
      om += bi * p.mask.batch_strides[i];
      oo += bi * p.out.batch_strides[i];
    }
    AttentionTile tile;
    tile.q = p.q.data + oq + i0 * p.q.rs;
    tile.q_rs = p.q.rs;
    tile.k = p.k.data + ok;
    tile.k_rs = p.k.rs;
    tile.k_cs = p.k.cs;
    tile.v = p.v.data + ov;
    tile.v_rs = p.v.rs;
    tile.mask = p.mask.data ? p.mask.data + om + i0 * p.mask.rs : nullptr;
    tile.mask_rs = p.mask.rs;
    tile.mask_cs = p.mask.cs;
    tile.out = const_cast<float*>(p.out.data) + oo + i0 * p.out.rs;
    tile.out_rs = p.out.rs;
    tile.rows = std::min(qb, p.sq - i0);
    tile.skv = p.skv;
    tile.d = p.d;
    tile.dv = p.dv;
    tile.causal = p.causal;
    tile.key_limit0 = i0 + p.skv - p.sq + 1;
    tile.scale = p.scale;
    tile.softcap = p.softcap;
    tile.empty_rows_zero = p.empty_rows_zero;
    return tile;
  };
  if (!shared_pack) {
    cpu_thread_pool().parallel_for(batches * blocks, num_threads,
                                   [&](int64_t t, int) { kernel.tile(make_tile(t)); });
    return;
  }
  // 4-byte words: float32 or bf16 pairs, as the kernel packs them.
  thread_local GrowBuffer<uint32_t> packed;
  uint32_t* k_packed = packed.get(static_cast<size_t>(batches * (k_words + v_words)));
  uint32_t* v_packed = k_packed + batches * k_words;
  cpu_thread_pool().parallel_for(batches, num_threads, [&](int64_t b, int) {
    kernel.pack(make_tile(b * blocks), k_packed + b * k_words, v_packed + b * v_words);
  });
  cpu_thread_pool().parallel_for(batches * blocks, num_threads, [&](int64_t t, int) {
    AttentionTile tile = make_tile(t);
    tile.k_packed = k_packed + (t / blocks) * k_words;
    tile.v_packed = v_packed + (t / blocks) * v_words;
    kernel.tile(tile);
  });
}

namespace {

// A shape of at most kMaxRank dims, without heap allocation (run() allocates nothing).
constexpr int kMaxRank = kAttentionMaxBatchRank + 2;
struct SmallShape {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  void push_back(int64_t d) { dims[rank++] = d; }
};

// Strides of a row-major tensor of shape `t` broadcast (right-aligned) to `target`: 0 where
// broadcast. False when it does not broadcast without growing `target`.
bool broadcast_strides(const Tensor& t, const SmallShape& target, int64_t* strides) {
  const int rank = static_cast<int>(t.rank());
  if (rank > target.rank) return false;
  std::fill(strides, strides + target.rank, 0);
  int64_t stride = 1;
  for (int i = 0; i < rank; ++i) {
    const int64_t dim = t.dim(rank - 1 - i);
    const int ti = target.rank - 1 - i;
    if (dim != 1 && dim != target.dims[ti]) return false;
    strides[ti] = dim == 1 ? 0 : stride;
    stride *= dim;
  }
  return true;
}

// The per-head form with grouped K / V: Q (B, H, Sq, D), K and V (B or 1, Hkv, ., .) with
// 1 < Hkv < H dividing H (Hkv == 1 broadcasts like any other batch dim).
bool grouped_per_head(const Tensor& q, const Tensor& k, const Tensor& v) {
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4) return false;
  const int64_t h = q.dim(1), hkv = k.dim(1);
  return hkv > 1 && hkv < h && h % hkv == 0 && v.dim(1) == hkv &&
         (k.dim(0) == q.dim(0) || k.dim(0) == 1) && (v.dim(0) == q.dim(0) || v.dim(0) == 1);
}

class AttentionKernel : public PreparedKernel {
 public:
  AttentionKernel(const AttentionKernelInfo& kernel, int64_t heads, int64_t kv_heads,
                  bool k_transposed, float scale, float softcap, bool causal, bool empty_rows_zero)
      : kernel_(kernel),
        heads_(heads),
        kv_heads_(kv_heads > 0 ? kv_heads : heads),
        k_transposed_(k_transposed),
        scale_(scale),
        softcap_(softcap),
        causal_(causal),
        empty_rows_zero_(empty_rows_zero) {}

  std::string name() const override { return std::string("cpu/") + kernel_.name; }

  Status run(KernelContext& ctx) override {
    AttentionProblem p;
    SmallShape out_shape;
    if (!describe(ctx, &p, &out_shape)) return run_reference(ctx);
    Tensor& out = ctx.output_for_overwrite(0);
    if (out.dtype() != DType::kFloat32 || out.rank() != out_shape.rank) return run_reference(ctx);
    for (int i = 0; i < out_shape.rank; ++i)
      if (out.dim(i) != out_shape.dims[i]) return run_reference(ctx);
    if (out.numel() == 0) return Status::ok();
    p.out.data = out.data<float>();
    run_attention(kernel_, p, ctx.num_threads());
    return Status::ok();
  }

 private:
  // Fills `p` (all but out.data) and the output shape from the inputs; false: use the
  // reference kernel.
  bool describe(const KernelContext& ctx, AttentionProblem* p, SmallShape* out_shape) const {
    for (size_t i = 0; i < 3; ++i)
      if (!ctx.has_input(i) || ctx.input(i).dtype() != DType::kFloat32) return false;
    const bool has_mask = ctx.has_input(3);
    if (has_mask && ctx.input(3).dtype() != DType::kFloat32) return false;
    const Tensor &q = ctx.input(0), &k = ctx.input(1), &v = ctx.input(2);
    p->scale = scale_;
    p->softcap = softcap_;
    p->empty_rows_zero = empty_rows_zero_;
    p->causal = causal_;
    SmallShape scores;  // (batch..., Sq, Skv)
    // Grouped-query attention: query head h reads K / V head h / group. The batch dims are then
    // (B, Hkv, group), K and V with stride 0 over the group.
    int64_t group = 1;
    const bool described = heads_ > 0 ? describe_heads(q, k, v, p, out_shape, &scores, &group)
                           : grouped_per_head(q, k, v)
                               ? describe_grouped(q, k, v, p, out_shape, &scores, &group)
                               : describe_plain(q, k, v, p, out_shape, &scores);
    if (!described) return false;
    p->q.data = q.data<float>();
    p->k.data = k.data<float>();
    p->v.data = v.data<float>();
    if (has_mask) {
      const Tensor& m = ctx.input(3);
      int64_t strides[kMaxRank];
      if (!broadcast_strides(m, scores, strides)) return false;
      p->mask.data = m.data<float>();
      if (group > 1) {  // head h = kv head * group + g: the head stride splits in two
        p->mask.batch_strides[0] = strides[0];
        p->mask.batch_strides[1] = strides[1] * group;
        p->mask.batch_strides[2] = strides[1];
      } else {
        for (int i = 0; i < p->batch_rank; ++i) p->mask.batch_strides[i] = strides[i];
      }
      p->mask.rs = strides[scores.rank - 2];
      p->mask.cs = strides[scores.rank - 1];
    }
    if (group > 1 && p->sq == 1) {
      // One query per head (a decode step): the group's queries become the rows of one task over
      // their shared K / V head, which is then read (and packed) once instead of once per query
      // head. Causal is a no-op for a single query (it sees every key).
      p->batch_rank = 2;
      p->sq = group;
      p->causal = false;
      p->q.rs = p->q.batch_strides[2];
      p->out.rs = p->out.batch_strides[2];
      p->mask.rs = p->mask.batch_strides[2];
    }
    return true;
  }

  // The head form (B, S, H * D): batch (b, h) starts at b * S * H * D + h * D; rows are
  // H * D apart.
  bool describe_heads(const Tensor& q, const Tensor& k, const Tensor& v, AttentionProblem* p,
                      SmallShape* out_shape, SmallShape* scores, int64_t* group) const {
    if (q.rank() != 3 || k.rank() != 3 || v.rank() != 3) return false;
    const int64_t h = heads_, hkv = kv_heads_, b = q.dim(0);
    if (h % hkv != 0 || q.dim(2) % h != 0 || v.dim(2) % hkv != 0 ||
        k.dim(2) * h != q.dim(2) * hkv || k.dim(1) != v.dim(1) ||
        (k.dim(0) != b && k.dim(0) != 1) || (v.dim(0) != b && v.dim(0) != 1))
      return false;
    *group = h / hkv;
    p->sq = q.dim(1);
    p->skv = k.dim(1);
    p->d = q.dim(2) / h;
    p->dv = v.dim(2) / hkv;
    p->batch_rank = *group > 1 ? 3 : 2;
    p->batch_dims[0] = b;
    p->batch_dims[1] = hkv;
    p->batch_dims[2] = *group;
    // heads: the operand's head count; shared: K / V, whose heads the group shares.
    auto heads_operand = [&](const Tensor& t, int64_t heads, int64_t width, bool shared) {
      AttentionOperand o;
      o.batch_strides[0] = t.dim(0) == 1 ? 0 : t.dim(1) * heads * width;
      o.batch_strides[1] = width * (shared ? 1 : *group);
      o.batch_strides[2] = shared ? 0 : width;
      o.rs = heads * width;
      o.cs = 1;
      return o;
    };
    p->q = heads_operand(q, h, p->d, false);
    p->k = heads_operand(k, hkv, p->d, true);
    p->v = heads_operand(v, hkv, p->dv, true);
    p->out = heads_operand(q, h, p->dv, false);
    p->out.batch_strides[0] = p->sq * h * p->dv;
    *out_shape = SmallShape{3, {b, p->sq, h * p->dv}};
    *scores = SmallShape{4, {b, h, p->sq, p->skv}};
    return true;
  }

  // (B, H, S, D) with K / V of Hkv heads, Hkv dividing H: batch dims (B, Hkv, group).
  bool describe_grouped(const Tensor& q, const Tensor& k, const Tensor& v, AttentionProblem* p,
                        SmallShape* out_shape, SmallShape* scores, int64_t* group) const {
    const int64_t b = q.dim(0), h = q.dim(1), hkv = k.dim(1);
    *group = h / hkv;
    p->sq = q.dim(2);
    p->d = q.dim(3);
    p->skv = k_transposed_ ? k.dim(3) : k.dim(2);
    p->dv = v.dim(3);
    if ((k_transposed_ ? k.dim(2) : k.dim(3)) != p->d || v.dim(2) != p->skv) return false;
    p->batch_rank = 3;
    p->batch_dims[0] = b;
    p->batch_dims[1] = hkv;
    p->batch_dims[2] = *group;
    auto operand = [&](const Tensor& t, int64_t matrix, int64_t rs, int64_t cs, bool shared) {
      AttentionOperand o;
      o.batch_strides[0] = t.dim(0) == 1 ? 0 : t.dim(1) * matrix;
      o.batch_strides[1] = matrix * (shared ? 1 : *group);
      o.batch_strides[2] = shared ? 0 : matrix;
      o.rs = rs;
      o.cs = cs;
      return o;
    };
    p->q = operand(q, p->sq * p->d, p->d, 1, false);
    p->k = operand(k, p->skv * p->d, k_transposed_ ? 1 : p->d, k_transposed_ ? p->skv : 1, true);
    p->v = operand(v, p->skv * p->dv, p->dv, 1, true);
    p->out = operand(q, p->sq * p->dv, p->dv, 1, false);
    p->out.batch_strides[0] = h * p->sq * p->dv;
    *out_shape = SmallShape{4, {b, h, p->sq, p->dv}};
    *scores = SmallShape{4, {b, h, p->sq, p->skv}};
    return true;
  }

  // (..., S, D) each, K and V broadcast over Q's batch dims; K^T is (..., D, Skv).
  bool describe_plain(const Tensor& q, const Tensor& k, const Tensor& v, AttentionProblem* p,
                      SmallShape* out_shape, SmallShape* scores) const {
    if (q.rank() < 2 || k.rank() < 2 || v.rank() < 2 || k.rank() > q.rank() ||
        v.rank() > q.rank() || q.rank() - 2 > kAttentionMaxBatchRank)
      return false;
    const int64_t kr = k.rank();
    p->sq = q.dim(q.rank() - 2);
    p->d = q.dim(q.rank() - 1);
    p->skv = k_transposed_ ? k.dim(kr - 1) : k.dim(kr - 2);
    const int64_t kd = k_transposed_ ? k.dim(kr - 2) : k.dim(kr - 1);
    p->dv = v.dim(v.rank() - 1);
    if (kd != p->d || v.dim(v.rank() - 2) != p->skv) return false;
    p->batch_rank = static_cast<int>(q.rank() - 2);
    SmallShape batch;
    for (int i = 0; i < p->batch_rank; ++i) batch.push_back(q.dim(i));
    std::copy(batch.dims, batch.dims + batch.rank, p->batch_dims);
    auto plain_operand = [&](const Tensor& t, int64_t rs, int64_t cs, AttentionOperand* o) {
      // The batch dims of t broadcast to Q's; each batch matrix is contiguous.
      SmallShape tb;
      for (int64_t i = 0; i + 2 < t.rank(); ++i) tb.push_back(t.dim(i));
      if (tb.rank > batch.rank) return false;
      const int64_t matrix = t.dim(t.rank() - 2) * t.dim(t.rank() - 1);
      int64_t stride = matrix;
      for (int i = 0; i < batch.rank; ++i) o->batch_strides[i] = 0;
      for (int i = 0; i < tb.rank; ++i) {
        const int64_t dim = tb.dims[tb.rank - 1 - i];
        const int bi = batch.rank - 1 - i;
        if (dim != 1 && dim != batch.dims[bi]) return false;
        o->batch_strides[bi] = dim == 1 ? 0 : stride;
        stride *= dim;
      }
      o->rs = rs;
      o->cs = cs;
      return true;
    };
    if (!plain_operand(q, p->d, 1, &p->q) ||
        !plain_operand(k, k_transposed_ ? 1 : p->d, k_transposed_ ? p->skv : 1, &p->k) ||
        !plain_operand(v, p->dv, 1, &p->v))
      return false;
    int64_t stride = p->sq * p->dv;  // out: contiguous (batch..., Sq, Dv)
    for (int i = p->batch_rank - 1; i >= 0; --i) {
      p->out.batch_strides[i] = stride;
      stride *= p->batch_dims[i];
    }
    p->out.rs = p->dv;
    *out_shape = batch;
    out_shape->push_back(p->sq);
    out_shape->push_back(p->dv);
    *scores = batch;
    scores->push_back(p->sq);
    scores->push_back(p->skv);
    return true;
  }

  const AttentionKernelInfo& kernel_;
  int64_t heads_;
  int64_t kv_heads_;  // the head form's K / V heads (grouped-query attention when < heads_)
  bool k_transposed_;
  float scale_;
  float softcap_;
  bool causal_;
  bool empty_rows_zero_;
};

}  // namespace

Expected<std::unique_ptr<PreparedKernel>> prepare_attention(const ir::Node& node) {
  ir::AttrView attrs(node);
  PG_ASSIGN_OR_RETURN(int64_t heads, attrs.get_int("num_heads", 0));
  PG_ASSIGN_OR_RETURN(int64_t kv_heads, attrs.get_int("kv_num_heads", 0));
  PG_ASSIGN_OR_RETURN(int64_t k_transposed, attrs.get_int("k_transposed", 0));
  PG_ASSIGN_OR_RETURN(float scale, attrs.get_float("scale", 1.0f));
  PG_ASSIGN_OR_RETURN(float softcap, attrs.get_float("softcap", 0.0f));
  PG_ASSIGN_OR_RETURN(int64_t causal, attrs.get_int("causal", 0));
  PG_ASSIGN_OR_RETURN(int64_t empty_rows_zero, attrs.get_int("empty_rows_zero", 0));
  if (heads < 0) return invalid_model(node.describe() + ": num_heads must be >= 0");
  if (kv_heads < 0 || (kv_heads > 0 && (heads == 0 || heads % kv_heads != 0)))
    return invalid_model(node.describe() + ": kv_num_heads must divide num_heads");
  // At bf16 precision (passes/assign_precision.h) the products run in bf16.
  const AttentionKernelInfo* bf16 =
      node.precision == Precision::kBFloat16 ? bf16_attention_kernel() : nullptr;
  return std::unique_ptr<PreparedKernel>(std::make_unique<AttentionKernel>(
      bf16 ? *bf16 : f32_attention_kernel(), heads, kv_heads, k_transposed != 0, scale, softcap,
      causal != 0, empty_rows_zero != 0));
}

}  // namespace peregrine::cpu
