// The attention tile (kernels/attention.h), AVX-512F, 16 float lanes: the algorithm of
// kernels/attention_tile_impl.h on 512-bit registers (kernels/attention_zmm.h) with float32
// products. Register tiles 6 rows x 32 columns (12 zmm accumulators, 2 loads and 6 broadcasts
// per 12 FMAs: half the loads and broadcasts per FLOP of the AVX2 tile).
#include <cstdint>

#include "backends/cpu/kernels/attention.h"
#include "backends/cpu/kernels/attention_tile_impl.h"
#include "backends/cpu/kernels/attention_zmm.h"

namespace peregrine::cpu::avx512 {

void f32_attention_tile__avx512(const AttentionTile& t) { attention_tile<Zmm>(t); }
void f32_attention_pack__avx512(const AttentionTile& t, void* k_dst, void* v_dst) {
  attention_pack<F32Products<Zmm>>(t, k_dst, v_dst);
}
int64_t f32_attention_key_words__avx512(int64_t skv, int64_t d) {
  return attention_packed_key_elems<F32Products<Zmm>>(skv, d);
}
int64_t f32_attention_value_words__avx512(int64_t skv, int64_t dv) {
  return attention_packed_value_elems<F32Products<Zmm>>(skv, dv);
}

}  // namespace peregrine::cpu::avx512
