#include "ir/verifier.h"

#include <map>
#include <queue>

namespace peregrine::ir {

namespace {

void collect_defined(const Graph& g, std::set<std::string>* defined) {
  for (const auto& in : g.inputs) defined->insert(in);
  for (const auto& [name, v] : g.values)
    if (v.initializer) defined->insert(name);
  for (const auto& n : g.nodes)
    for (const auto& o : n->outputs)
      if (!o.empty()) defined->insert(o);
}

// Inputs a node reads, including those its subgraphs read from outside.
std::set<std::string> node_reads(const Node& n) {
  std::set<std::string> reads;
  for (const auto& in : n.inputs)
    if (!in.empty()) reads.insert(in);
  for (const auto& [key, a] : n.attributes) {
    if (a.g) {
      auto fv = free_variables(*a.g);
      reads.insert(fv.begin(), fv.end());
    }
    for (const auto& sg : a.graphs) {
      auto fv = free_variables(*sg);
      reads.insert(fv.begin(), fv.end());
    }
  }
  return reads;
}

}  // namespace

std::set<std::string> free_variables(const Graph& g) {
  std::set<std::string> defined;
  collect_defined(g, &defined);
  std::set<std::string> free;
  for (const auto& n : g.nodes)
    for (const auto& r : node_reads(*n))
      if (!defined.count(r)) free.insert(r);
  for (const auto& o : g.outputs)
    if (!defined.count(o)) free.insert(o);
  return free;
}

Status verify_and_sort(Graph& g, const std::set<std::string>& outer) {
  const std::string where = g.name.empty() ? "graph" : "graph '" + g.name + "'";
  // One producer per value.
  std::map<std::string, size_t> producer;
  std::set<std::string> graph_defined;
  for (const auto& in : g.inputs) graph_defined.insert(in);
  for (const auto& [name, v] : g.values)
    if (v.initializer) graph_defined.insert(name);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = *g.nodes[i];
    if (n.op_type.empty()) return invalid_model(where + ": a node has no op_type");
    for (const auto& o : n.outputs) {
      if (o.empty()) continue;
      if (producer.count(o) || graph_defined.count(o))
        return invalid_model(n.describe() + ": output '" + o +
                             "' is already defined (values must have a single producer)");
      producer[o] = i;
    }
  }
  // Every read is defined somewhere visible.
  std::vector<std::set<size_t>> deps(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = *g.nodes[i];
    for (const auto& r : node_reads(n)) {
      auto it = producer.find(r);
      if (it != producer.end()) {
        if (it->second == i)
          return invalid_model(n.describe() + ": reads its own output '" + r + "' (a cycle)");
        deps[i].insert(it->second);
      } else if (!graph_defined.count(r) && !outer.count(r)) {
        return invalid_model(n.describe() + ": input '" + r +
                             "' is not a graph input, an initializer or the output of any node");
      }
    }
  }
  for (const auto& o : g.outputs)
    if (!producer.count(o) && !graph_defined.count(o) && !outer.count(o))
      return invalid_model(where + ": output '" + o + "' is never produced");

  // Kahn's algorithm, stable: ready nodes keep their file order.
  std::vector<size_t> indegree(g.nodes.size());
  std::vector<std::vector<size_t>> users(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    indegree[i] = deps[i].size();
    for (size_t d : deps[i]) users[d].push_back(i);
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!indegree[i]) ready.push(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t u : users[i])
      if (--indegree[u] == 0) ready.push(u);
  }
  if (order.size() != g.nodes.size()) {
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (indegree[i]) return invalid_model(g.nodes[i]->describe() + ": is part of a cycle");
  }
  std::vector<std::unique_ptr<Node>> sorted;
  for (size_t i : order) sorted.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(sorted);

  // Subgraphs see everything defined here plus the outer scope.
  std::set<std::string> visible = outer;
  collect_defined(g, &visible);
  for (auto& n : g.nodes)
    for (auto& [key, a] : n->attributes) {
      if (a.g) PG_RETURN_IF_ERROR(verify_and_sort(*a.g, visible));
      for (auto& sg : a.graphs) PG_RETURN_IF_ERROR(verify_and_sort(*sg, visible));
    }
  return Status::ok();
}

}  // namespace peregrine::ir
