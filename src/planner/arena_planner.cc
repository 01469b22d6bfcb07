#include "planner/arena_planner.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <tuple>

#include "core/checked_math.h"
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

namespace {

struct ConcatSlice {
  int concat_step;
  int64_t byte_offset;  // in the Concat's output
  // The output of an earlier Concat whose parts all sit, in order, in this Concat's output: a
  // view of that range, already written when it is produced.
  bool written_by_parts = false;
};

// The Concat inputs that can be slices of their Concat's output: planned intermediates of the
// output's dtype, each read once by that Concat, starting on an arena alignment boundary
// within the output (kernels may store whole aligned vectors). A value read by several Concats
// goes to the last one; an earlier Concat all of whose parts it holds in the same order (a
// DenseNet block concatenates every feature map so far, layer after layer) then becomes a view
// of that range, and copies nothing either.
std::map<std::string, ConcatSlice> find_concat_slices(
    const ir::Graph& graph, const std::map<std::string, const ValueLifetime*>& by_name) {
  std::map<std::string, ConcatSlice> slices;
  // Per eligible Concat step: its parts' byte offsets in its output (-1: not a plannable part).
  std::map<int, std::vector<int64_t>> part_offsets;
  for (size_t step = graph.nodes.size(); step-- > 0;) {
    const ir::Node& node = *graph.nodes[step];
    if (node.outputs.size() != 1) continue;
    auto out = by_name.find(node.outputs[0]);
    if (out == by_name.end() || concat_slice_axis(node, out->second->dims) < 0) continue;
    const DType dtype = out->second->dtype;
    std::vector<int64_t>& offsets = part_offsets[static_cast<int>(step)];
    int64_t offset = 0;
    for (const std::string& in : node.inputs) {
      const ir::Value* v = in.empty() ? nullptr : graph.find_value(in);
      auto n = v && v->type.is_static() ? checked_product(v->type.dims) : std::nullopt;
      if (!n) break;  // the offsets of the later inputs are unknown
      auto it = by_name.find(in);
      const bool part = it != by_name.end() && it->second->dtype == dtype &&
                        offset % kArenaAlignment == 0 &&
                        std::count(node.inputs.begin(), node.inputs.end(), in) == 1;
      offsets.push_back(part ? offset : -1);
      if (part && !slices.count(in)) slices[in] = {static_cast<int>(step), offset};
      offset += *n * static_cast<int64_t>(dtype_size(dtype));
    }
  }
  for (const auto& [step, offsets] : part_offsets) {
    const ir::Node& node = *graph.nodes[static_cast<size_t>(step)];
    if (offsets.size() != node.inputs.size() || offsets.empty() ||
        slices.count(node.outputs[0]))
      continue;
    auto first = slices.find(node.inputs[0]);
    if (offsets[0] != 0 || first == slices.end() || first->second.concat_step == step) continue;
    const ConcatSlice& host = first->second;
    bool in_order = true;
    for (size_t i = 0; i < offsets.size() && in_order; ++i) {
      auto it = slices.find(node.inputs[i]);
      in_order = offsets[i] >= 0 && it != slices.end() &&
                 it->second.concat_step == host.concat_step &&
                 it->second.byte_offset == host.byte_offset + offsets[i];
    }
    if (in_order) slices[node.outputs[0]] = {host.concat_step, host.byte_offset, true};
  }
  return slices;
}

}  // namespace

MemoryPlan plan_memory(const ir::Graph& graph) {
  MemoryPlan plan;
  std::vector<ValueLifetime> lifetimes = compute_liveness(graph);
  std::map<std::string, const ValueLifetime*> by_name;
  for (const auto& v : lifetimes)
    if (v.bytes > 0) by_name[v.name] = &v;
  const std::map<std::string, ConcatSlice> slices = find_concat_slices(graph, by_name);
  std::map<int, int> concat_block;  // Concat step -> its output's block, once created
  for (size_t step = 0; step < graph.nodes.size(); ++step) {
    const ir::Node& node = *graph.nodes[step];
    const int s = static_cast<int>(step);
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      auto it = by_name.find(node.outputs[o]);
      if (it == by_name.end()) continue;
      const ValueLifetime& v = *it->second;
      PlannedValue pv{-1, 0, 0, v.bytes, v.dtype, v.dims, false};
      // The planned value input k of this node lives in, if any.
      auto input_entry = [&](size_t k) -> const PlannedValue* {
        if (k >= node.inputs.size()) return nullptr;
        auto p = plan.values.find(node.inputs[k]);
        return p == plan.values.end() ? nullptr : &p->second;
      };
      // A Concat input: a slice of the block its Concat's output will have (created by the
      // first of its inputs, sized for the output, live from here).
      if (auto slice = slices.find(v.name); slice != slices.end()) {
        auto [entry, created] = concat_block.try_emplace(slice->second.concat_step, -1);
        if (created) {
          const ir::Node& concat = *graph.nodes[static_cast<size_t>(slice->second.concat_step)];
          entry->second = static_cast<int>(plan.blocks.size());
          plan.blocks.push_back({by_name.at(concat.outputs[0])->bytes, s, v.last});
        }
        pv.block = entry->second;
        pv.block_offset = slice->second.byte_offset;
        pv.shares_input = slice->second.written_by_parts;
        Block& b = plan.blocks[pv.block];
        b.last = std::max(b.last, v.last);
        ++plan.concat_slices;
        plan.unshared_bytes += align_up(v.bytes);
        plan.values.emplace(v.name, std::move(pv));
        continue;
      }
      // A Concat's output, where inputs already sit in its block: the rest is copied in.
      if (auto group = concat_block.find(s); o == 0 && group != concat_block.end())
        pv.block = group->second;
      if (o == 0 && pv.block < 0 && is_view_of_input(node)) {
        const PlannedValue* in = input_entry(0);
        if (in && in->bytes == v.bytes) {
          pv.block = in->block;
          pv.block_offset = in->block_offset;
        }
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
        if (!clash) {
          pv.block = in->block;
          pv.block_offset = in->block_offset;
        }
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
  for (auto& [name, pv] : plan.values)
    pv.offset = plan.layout.offsets[pv.block] + pv.block_offset;
  plan.arena_bytes = plan.layout.arena_bytes;
  plan.lower_bound_bytes = peak_live_bytes(plan.blocks);
  return plan;
}

}  // namespace peregrine::planner
