// Broadcasting over up to three operands for the CPU elementwise kernels
// (kernels/elementwise.cc, kernels/elementwise_map.cc): the output's dims merge into groups
// where every operand is full or broadcast alike (size-1 output dims dropped); the innermost
// group is one row call with each operand's step 1 (full) or 0 (broadcast), the outer groups an
// odometer over rows. So [N,C,H,W] + [C,1,1] is N*C rows of H*W against one scalar each, and
// equal shapes are one row of everything. Tasks are runs of whole rows, or pieces of one long
// row, of about kElementsPerTask elements.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backends/cpu/kernels/vector_ops.h"
#include "backends/cpu/thread_pool.h"
#include "peregrine/tensor.h"

namespace peregrine::cpu {

inline constexpr int kMaxBroadcastGroups = 8;
inline constexpr int kMaxBroadcastOperands = 3;

struct Broadcast {
  int operands = 0, groups = 0;
  int64_t size[kMaxBroadcastGroups];
  bool full[kMaxBroadcastOperands][kMaxBroadcastGroups];
  int64_t stride[kMaxBroadcastOperands][kMaxBroadcastGroups];  // element strides (0 where broadcast)
};

// Groups of out's dims; false when an operand does not broadcast to out or there are too many
// groups. Requires numel(out) > 0.
inline bool group_broadcast(const Shape* in[], int operands, const Shape& out, Broadcast* b) {
  const size_t r = out.size();
  b->operands = operands;
  b->groups = 0;
  for (int k = 0; k < operands; ++k)
    if (in[k]->size() > r) return false;
  for (size_t d = 0; d < r; ++d) {
    const int64_t od = out[d];
    bool f[kMaxBroadcastOperands];
    for (int k = 0; k < operands; ++k) {
      const Shape& s = *in[k];
      const int64_t dim = d + s.size() >= r ? s[d + s.size() - r] : 1;
      if (dim != od && dim != 1) return false;
      f[k] = dim == od;
    }
    if (od == 1) continue;
    bool same = b->groups > 0;
    for (int k = 0; k < operands && same; ++k) same = b->full[k][b->groups - 1] == f[k];
    if (same) {
      b->size[b->groups - 1] *= od;
      continue;
    }
    if (b->groups == kMaxBroadcastGroups) return false;
    b->size[b->groups] = od;
    for (int k = 0; k < operands; ++k) b->full[k][b->groups] = f[k];
    ++b->groups;
  }
  if (b->groups == 0) {
    b->groups = 1;
    b->size[0] = 1;
    for (int k = 0; k < operands; ++k) b->full[k][0] = true;
  }
  for (int k = 0; k < operands; ++k) {
    int64_t s = 1;
    for (int i = b->groups - 1; i >= 0; --i) {
      b->stride[k][i] = b->full[k][i] ? s : 0;
      if (b->full[k][i]) s *= b->size[i];
    }
  }
  return true;
}

// Calls row(offsets[operands], out_offset, len, steps[operands]) over the whole output, split
// into thread-pool tasks.
template <typename Row>
inline void for_each_row(const Broadcast& b, int64_t numel, int threads, Row row) {
  const int last = b.groups - 1;
  const int64_t inner = b.size[last];
  const int64_t rows = numel / inner;
  int64_t steps[kMaxBroadcastOperands];
  for (int k = 0; k < b.operands; ++k) steps[k] = b.full[k][last] ? 1 : 0;
  const int64_t pieces = std::max<int64_t>(1, inner / kElementsPerTask);
  const int64_t piece = (inner + pieces - 1) / pieces;
  const int64_t rows_per_task = std::max<int64_t>(1, kElementsPerTask / inner);
  const int64_t tasks = pieces > 1 ? rows * pieces : (rows + rows_per_task - 1) / rows_per_task;
  cpu_thread_pool().parallel_for(tasks, threads, [&](int64_t t, int) {
    int64_t r0, r1, j0 = 0, len = inner;
    if (pieces > 1) {
      r0 = t / pieces;
      r1 = r0 + 1;
      j0 = (t % pieces) * piece;
      len = std::min(piece, inner - j0);
    } else {
      r0 = t * rows_per_task;
      r1 = std::min(rows, r0 + rows_per_task);
    }
    for (int64_t r = r0; r < r1; ++r) {
      int64_t off[kMaxBroadcastOperands] = {0, 0, 0};
      int64_t rem = r;
      for (int i = last - 1; i >= 0 && rem > 0; --i) {
        const int64_t idx = rem % b.size[i];
        rem /= b.size[i];
        for (int k = 0; k < b.operands; ++k) off[k] += idx * b.stride[k][i];
      }
      for (int k = 0; k < b.operands; ++k) off[k] += j0 * steps[k];
      row(off, r * inner + j0, len, steps);
    }
  });
}

}  // namespace peregrine::cpu
