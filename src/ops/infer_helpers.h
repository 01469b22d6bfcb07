// Small building blocks that most schemas' inference functions are made of.
#pragma once

#include "ops/op_schema.h"

namespace peregrine {

// Multidirectional (numpy) broadcasting of two shapes; dims of -1 stay unknown.
Expected<Shape> broadcast_shapes(const Shape& a, const Shape& b);
// Broadcast over all tensor inputs present; error names the node.
Status infer_broadcast_output(InferContext& ctx, DType out_dtype, size_t output = 0);
// Output 0 has input 0's type (unary elementwise ops).
Status infer_same_as_input(InferContext& ctx);
// Maps axis in [-rank, rank) to [0, rank), or an error naming the node and attribute.
Expected<int64_t> normalize_axis(const InferContext& ctx, int64_t axis, int64_t rank,
                                 const char* what = "axis");
// Input i must be a tensor whose rank (if known) is in [lo, hi].
Status require_rank(const InferContext& ctx, size_t i, int64_t lo, int64_t hi);
// Input i, present and a tensor; else an error naming the input.
Status require_tensor_input(const InferContext& ctx, size_t i);
// Elementwise cost: `flops_per_element` times the output size.
CostFn elementwise_cost(double flops_per_element);

}  // namespace peregrine
