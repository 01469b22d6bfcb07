// Which ops may write an output over an input's memory. A small table kept here, not in
// every schema: only the planner asks, and only for ops whose kernels (reference and cpu)
// read element i of the input before they write element i of the output.
#pragma once

#include <cstddef>

#include "ir/graph.h"

namespace peregrine::planner {

// May output 0 of `node` reuse the block of input `k` (an elementwise op; the caller still
// checks same shape and dtype and that the input dies at this node)?
bool may_run_in_place(const ir::Node& node, size_t k);

// Is output 0 of `node` the bytes of input 0 under another shape (Reshape, Flatten, Squeeze,
// Unsqueeze, Identity)? Such an output shares its input's block, which then lives as long as
// either does, so the kernel's zero-copy view stays valid.
bool is_view_of_input(const ir::Node& node);

// Where the planner may place the inputs of a Concat as slices of its output, so that their
// producers write straight into it and the Concat copies nothing for them: a Concat whose output
// is `out_dims` laid out so each input is one contiguous run (every dim before the axis is 1).
// Returns the axis, or -1.
int64_t concat_slice_axis(const ir::Node& node, const Shape& out_dims);

}  // namespace peregrine::planner
