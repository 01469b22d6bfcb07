// Reference kernels of the transformer family (ops/transformer.cc).
#include "backends/reference/kernel_list.h"
#include "ops/op_schema.h"

namespace peregrine {

namespace {

// RotaryEmbedding: per token and head, the first R channels rotate in pairs — (x1, x2) is
// (channel i, channel i + R / 2), or (2i, 2i + 1) when interleaved — by the angle whose cosine
// and sine the caches hold for that token's position; the channels past R pass through.
Status rotary_embedding_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& cos = ctx.input(1);
  const Tensor& sin = ctx.input(2);
  const Tensor* ids = ctx.num_inputs() > 3 && ctx.has_input(3) ? &ctx.input(3) : nullptr;
  PG_ASSIGN_OR_RETURN(int64_t interleaved, ctx.attrs().get_int("interleaved", 0));
  PG_ASSIGN_OR_RETURN(int64_t heads, ctx.attrs().get_int("num_heads", 0));
  PG_ASSIGN_OR_RETURN(int64_t rotary, ctx.attrs().get_int("rotary_embedding_dim", 0));
  const bool four_d = x.rank() == 4;
  const int64_t batch = x.dim(0), seq = four_d ? x.dim(2) : x.dim(1);
  if (!four_d) {
    if (heads <= 0 || x.dim(2) % heads != 0)
      return ctx.error("hidden size " + std::to_string(x.dim(2)) + " is not a multiple of num_heads");
  } else {
    heads = x.dim(1);
  }
  const int64_t head_size = four_d ? x.dim(3) : x.dim(2) / heads;
  if (rotary == 0) rotary = head_size;
  if (rotary < 0 || rotary > head_size || rotary % 2 != 0)
    return ctx.error("rotary_embedding_dim " + std::to_string(rotary) + " must be even and at most the head size " +
                     std::to_string(head_size));
  const int64_t half = rotary / 2;
  if (cos.shape() != sin.shape() || cos.rank() < 2 || cos.dim(cos.rank() - 1) != half)
    return ctx.error("cos_cache and sin_cache must have one shape ending in rotary_embedding_dim / 2 = " +
                     std::to_string(half));
  if (ids) {
    if (cos.rank() != 2 || ids->shape() != Shape{batch, seq})
      return ctx.error("with position_ids (batch, sequence) the caches must be (positions, rotary / 2)");
  } else if (cos.shape() != Shape{batch, seq, half}) {
    return ctx.error("without position_ids the caches must be (batch, sequence, rotary / 2)");
  }
  Tensor& y = ctx.output(0);
  const float* px = x.data<float>();
  float* py = y.data<float>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s) {
      int64_t row = b * seq + s;  // the caches' row for this token
      if (ids) {
        row = ids->get_as_int64(b * seq + s);
        if (row < 0 || row >= cos.dim(0))
          return ctx.error("position id " + std::to_string(row) + " is outside the caches' " +
                           std::to_string(cos.dim(0)) + " positions");
      }
      const float* c = cos.data<float>() + row * half;
      const float* sn = sin.data<float>() + row * half;
      for (int64_t h = 0; h < heads; ++h) {
        // Element (b, s, h, d) of X: (B, S, H * D) or (B, H, S, D).
        const int64_t base = four_d ? ((b * heads + h) * seq + s) * head_size
                                    : (b * seq + s) * heads * head_size + h * head_size;
        const float* in = px + base;
        float* out = py + base;
        for (int64_t i = 0; i < half; ++i) {
          const int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
          const float x1 = in[i1], x2 = in[i2];
          out[i1] = c[i] * x1 - sn[i] * x2;
          out[i2] = sn[i] * x1 + c[i] * x2;
        }
        for (int64_t d = rotary; d < head_size; ++d) out[d] = in[d];
      }
    }
  return Status::ok();
}

}  // namespace

void register_transformer_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "RotaryEmbedding", rotary_embedding_kernel);
}

}  // namespace peregrine
