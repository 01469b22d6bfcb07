// Static memory plan: every intermediate tensor with a static shape gets a byte offset in one
// arena, so that tensors alive at the same step never overlap. Elementwise steps may write
// over an input that dies there (in place), views (Reshape, ...) share their input's block,
// and the inputs of a Concat may be placed as slices of its output's block (their producers
// then write the concatenation; the Concat kernel skips a part already in place).
//
// Offsets come from a few greedy heuristics (by size, by first use, by size x duration, by
// duration), each placing a block in the smallest gap it fits among the blocks it overlaps in
// time; the smallest arena wins. The lower bound is the largest sum of bytes live at one step.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace peregrine::planner {

inline constexpr int64_t kArenaAlignment = 64;  // every block starts on a cache line

// One piece of memory needed over steps [first, last] (inclusive).
struct Block {
  int64_t bytes = 0;
  int first = 0;
  int last = 0;
};

struct ArenaLayout {
  std::vector<int64_t> offsets;  // per block, multiples of kArenaAlignment
  int64_t arena_bytes = 0;
  std::string heuristic;         // the one that won
};

int64_t align_up(int64_t bytes);
// Best of the heuristics above.
ArenaLayout place_blocks(const std::vector<Block>& blocks);
// Largest sum of (aligned) bytes alive at one step: no layout can be smaller.
int64_t peak_live_bytes(const std::vector<Block>& blocks);
// Do two blocks overlap in time?
inline bool live_together(const Block& a, const Block& b) {
  return a.first <= b.last && b.first <= a.last;
}

struct PlannedValue {
  int block = 0;
  int64_t offset = 0;   // in the arena
  int64_t block_offset = 0;  // within its block (a slice of a Concat's output), else 0
  int64_t bytes = 0;
  DType dtype = DType::kUndefined;
  Shape dims;
  bool shares_input = false;  // runs in place over (or is a view of) an input's block
};

struct MemoryPlan {
  std::map<std::string, PlannedValue> values;  // the planned intermediates by name
  std::vector<Block> blocks;
  ArenaLayout layout;
  int64_t arena_bytes = 0;
  int64_t lower_bound_bytes = 0;  // peak_live_bytes(blocks)
  int64_t unshared_bytes = 0;     // every planned value in its own (aligned) buffer
  int in_place_steps = 0;         // outputs that share their input's block
  int concat_slices = 0;          // values placed in a Concat's output (inputs, prefix views)
};

// Plans the intermediates of `graph` that have static shapes after load-time inference.
MemoryPlan plan_memory(const ir::Graph& graph);

}  // namespace peregrine::planner
