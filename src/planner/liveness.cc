#include "planner/liveness.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/checked_math.h"
#include "ir/verifier.h"

namespace peregrine::planner {

std::vector<ValueLifetime> compute_liveness(const ir::Graph& graph) {
  std::set<std::string> excluded(graph.outputs.begin(), graph.outputs.end());
  excluded.insert(graph.inputs.begin(), graph.inputs.end());
  std::vector<ValueLifetime> out;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& n = *graph.nodes[i];
    auto read = [&](const std::string& name) {
      auto it = index.find(name);
      if (it != index.end()) out[it->second].last = static_cast<int>(i);
    };
    for (const auto& in : n.inputs)
      if (!in.empty()) read(in);
    for (const auto& [key, a] : n.attributes) {
      std::vector<const ir::Graph*> subs;
      if (a.g) subs.push_back(a.g.get());
      for (const auto& sg : a.graphs) subs.push_back(sg.get());
      for (const ir::Graph* sg : subs)
        for (const auto& fv : ir::free_variables(*sg)) read(fv);
    }
    for (const auto& o : n.outputs) {
      if (o.empty() || excluded.count(o) || graph.is_initializer(o) || index.count(o)) continue;
      ValueLifetime v;
      v.name = o;
      v.first = v.last = static_cast<int>(i);
      const ir::Value* val = graph.find_value(o);
      if (val && val->type.is_static() && val->type.dtype != DType::kString &&
          val->type.dtype != DType::kUndefined && dtype_size(val->type.dtype) > 0) {
        auto n_el = checked_product(val->type.dims);
        auto b = n_el ? checked_mul(*n_el, static_cast<int64_t>(dtype_size(val->type.dtype)))
                      : std::nullopt;
        if (b && *b <= kMaxTensorBytes) {
          v.bytes = *b;
          v.dtype = val->type.dtype;
          v.dims = val->type.dims;
        }
      }
      index[o] = out.size();
      out.push_back(std::move(v));
    }
  }
  return out;
}

}  // namespace peregrine::planner
