#include "planner/arena_planner.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <tuple>

#include "planner/in_place.h"
#include "planner/liveness.h"

namespace peregrine::planner {

int64_t align_up(int64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

namespace {

struct Placed {
  int64_t offset;
  int64_t end;
  int first;
  int last;
};

// Places blocks in `order`, each at the smallest gap (best fit) among the already placed
// blocks it overlaps in time, else on top of them.
ArenaLayout place_in_order(const std::vector<Block>& blocks, const std::vector<int>& order) {
  ArenaLayout layout;
  layout.offsets.assign(blocks.size(), 0);
  std::vector<Placed> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;  // (offset, end) of time-overlapping blocks
  placed.reserve(blocks.size());
  for (int i : order) {
    const Block& b = blocks[i];
    const int64_t size = align_up(b.bytes);
    busy.clear();
    for (const Placed& p : placed)
      if (p.first <= b.last && b.first <= p.last) busy.emplace_back(p.offset, p.end);
    std::sort(busy.begin(), busy.end());
    int64_t best = -1, best_gap = std::numeric_limits<int64_t>::max(), top = 0;
    for (const auto& [off, end] : busy) {
      const int64_t gap = off - top;
      if (gap >= size && gap < best_gap) {
        best = top;
        best_gap = gap;
      }
      top = std::max(top, end);
    }
    const int64_t offset = best >= 0 ? best : top;
    layout.offsets[i] = offset;
    placed.push_back({offset, offset + size, b.first, b.last});
    layout.arena_bytes = std::max(layout.arena_bytes, offset + size);
  }
  return layout;
}

}  // namespace

ArenaLayout place_blocks(const std::vector<Block>& blocks) {
  std::vector<int> base(blocks.size());
  std::iota(base.begin(), base.end(), 0);
  auto dur = [&](int i) { return static_cast<int64_t>(blocks[i].last - blocks[i].first + 1); };
  auto size = [&](int i) { return align_up(blocks[i].bytes); };
  struct Heuristic {
    const char* name;
    std::function<bool(int, int)> before;
  };
  // Ties broken by the next key, then by index, so plans are deterministic.
  const Heuristic heuristics[] = {
      {"size", [&](int a, int b) {
         return std::tuple(-size(a), blocks[a].first, a) < std::tuple(-size(b), blocks[b].first, b);
       }},
      {"first-use", [&](int a, int b) {
         return std::tuple(blocks[a].first, -size(a), a) < std::tuple(blocks[b].first, -size(b), b);
       }},
      {"size-x-duration", [&](int a, int b) {
         return std::tuple(-size(a) * dur(a), a) < std::tuple(-size(b) * dur(b), b);
       }},
      {"duration", [&](int a, int b) {
         return std::tuple(-dur(a), -size(a), a) < std::tuple(-dur(b), -size(b), b);
       }},
  };
  ArenaLayout best;
  for (const Heuristic& h : heuristics) {
    std::vector<int> order = base;
    std::sort(order.begin(), order.end(), h.before);
    ArenaLayout l = place_in_order(blocks, order);
    l.heuristic = h.name;
    if (best.heuristic.empty() || l.arena_bytes < best.arena_bytes) best = std::move(l);
  }
  return best;
}

int64_t peak_live_bytes(const std::vector<Block>& blocks) {
  // Sweep over steps: +bytes at first, -bytes after last.
  std::vector<std::pair<int, int64_t>> events;
  for (const Block& b : blocks) {
    events.emplace_back(b.first, align_up(b.bytes));
    events.emplace_back(b.last + 1, -align_up(b.bytes));
  }
  std::sort(events.begin(), events.end());  // at equal steps frees (negative) come first
  int64_t live = 0, peak = 0;
  for (const auto& [step, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return peak;
}

MemoryPlan plan_memory(const ir::Graph& graph) {
  MemoryPlan plan;
  std::vector<ValueLifetime> lifetimes = compute_liveness(graph);
  std::map<std::string, const ValueLifetime*> by_name;
  for (const auto& v : lifetimes)
    if (v.bytes > 0) by_name[v.name] = &v;
  for (size_t step = 0; step < graph.nodes.size(); ++step) {
    const ir::Node& node = *graph.nodes[step];
    const int s = static_cast<int>(step);
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      auto it = by_name.find(node.outputs[o]);
      if (it == by_name.end()) continue;
      const ValueLifetime& v = *it->second;
      PlannedValue pv{-1, 0, v.bytes, v.dtype, v.dims, false};
      // The planned value input k of this node lives in, if any.
      auto input_entry = [&](size_t k) -> const PlannedValue* {
        if (k >= node.inputs.size()) return nullptr;
        auto p = plan.values.find(node.inputs[k]);
        return p == plan.values.end() ? nullptr : &p->second;
      };
      if (o == 0 && is_view_of_input(node)) {
        const PlannedValue* in = input_entry(0);
        if (in && in->bytes == v.bytes) pv.block = in->block;
      }
      for (size_t k = 0; o == 0 && pv.block < 0 && k < node.inputs.size(); ++k) {
        const PlannedValue* in = input_entry(k);
        if (!in || !may_run_in_place(node, k) || in->dtype != v.dtype || in->dims != v.dims ||
            plan.blocks[in->block].last != s)
          continue;
        // Another operand in the same block (a view of this input) would be overwritten
        // while it is still being read.
        bool clash = false;
        for (size_t j = 0; j < node.inputs.size(); ++j) {
          const PlannedValue* other = input_entry(j);
          clash |= other && node.inputs[j] != node.inputs[k] && other->block == in->block;
        }
        if (!clash) pv.block = in->block;
      }
      if (pv.block >= 0) {
        Block& b = plan.blocks[pv.block];
        b.last = std::max(b.last, v.last);
        pv.shares_input = true;
        ++plan.in_place_steps;
      } else {
        pv.block = static_cast<int>(plan.blocks.size());
        plan.blocks.push_back({v.bytes, s, v.last});
      }
      plan.unshared_bytes += align_up(v.bytes);
      plan.values.emplace(v.name, std::move(pv));
    }
  }
  plan.layout = place_blocks(plan.blocks);
  for (auto& [name, pv] : plan.values) pv.offset = plan.layout.offsets[pv.block];
  plan.arena_bytes = plan.layout.arena_bytes;
  plan.lower_bound_bytes = peak_live_bytes(plan.blocks);
  return plan;
}

}  // namespace peregrine::planner
