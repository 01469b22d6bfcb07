// Helpers shared by the passes: who produces and who reads each value, constant
// lookups and small rewriting tools (fresh names, new initializers, node removal).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/verifier.h"

namespace peregrine::passes {

// Producers and readers of every value of one graph. Reads by nested subgraphs
// (outer-scope references) count as uses, so such values never look single-use.
class GraphIndex {
 public:
  struct Use {
    ir::Node* node;
    int input;  // index into node->inputs; -1 for a read from inside a subgraph of node
  };
  explicit GraphIndex(const ir::Graph& graph);

  ir::Node* producer(const std::string& value) const;
  const std::vector<Use>& uses(const std::string& value) const;
  bool is_graph_output(const std::string& value) const { return outputs_.count(value) > 0; }
  bool is_graph_input(const std::string& value) const { return inputs_.count(value) > 0; }
  // The one node reading `value` through a plain input, when it is the only reader
  // (counting each input slot) and the value is not a graph output; else nullptr.
  ir::Node* sole_consumer(const std::string& value) const;
  // Read only by nodes of this graph (not by subgraphs, not a graph output).
  bool only_local_uses(const std::string& value) const;

 private:
  std::map<std::string, ir::Node*> producer_;
  std::map<std::string, std::vector<Use>> uses_;
  std::set<std::string> outputs_, inputs_;
};

// Rewrites one match at a time until no node matches: a rewrite invalidates the index,
// so the graph is indexed again after each. `match(graph, index, node)` returns an
// optional match; `rewrite(graph, match)` applies it. Returns the number of rewrites.
template <typename MatchFn, typename RewriteFn>
int rewrite_each_match(ir::Graph& graph, MatchFn&& match, RewriteFn&& rewrite) {
  int rewrites = 0;
  for (bool again = true; again;) {
    again = false;
    GraphIndex index(graph);
    for (auto& node : graph.nodes) {
      auto m = match(graph, index, *node);
      if (!m) continue;
      rewrite(graph, *m);
      ++rewrites;
      again = true;
      break;
    }
  }
  return rewrites;
}

bool has_subgraph(const ir::Node& node);
// Initializer tensor of `value` in this graph, nullptr if not a constant.
const Tensor* constant_of(const ir::Graph& graph, const std::string& value);
// A constant with one element, as double.
std::optional<double> scalar_constant(const ir::Graph& graph, const std::string& value);
// Static type of `value` if it is a float32 tensor (maybe without shape); nullptr otherwise.
const ir::ValueType* float32_type(const ir::Graph& graph, const std::string& value);
bool is_float32(const ir::Graph& graph, const std::string& value);
// Node is in the default domain and has this op type.
bool is_op(const ir::Node* node, const char* op_type);

// A value name not yet used in `graph`, derived from `base`.
std::string fresh_name(ir::Graph& graph, const std::string& base);
// Adds an initializer under a fresh name; returns the name.
std::string add_initializer(ir::Graph& graph, const std::string& base, Tensor tensor);
// A new node in the default domain at the graph's opset (appended; the manager re-sorts).
ir::Node* add_node(ir::Graph& graph, const std::string& op_type, std::vector<std::string> inputs,
                   std::vector<std::string> outputs, const std::string& name);
// Drops nodes (by identity) from the graph's list.
void remove_nodes(ir::Graph& graph, const std::set<const ir::Node*>& dead);
// Points every node input reading `from` at `to` (this graph only; callers check
// that no subgraph reads `from`).
void replace_uses(ir::Graph& graph, const std::string& from, const std::string& to);
// Makes the peregrine domain importable from this graph.
void import_peregrine_domain(ir::Graph& graph);

bool attributes_equal(const ir::Attribute& a, const ir::Attribute& b);
bool tensors_equal(const Tensor& a, const Tensor& b);

ir::Attribute int_attr(const std::string& name, int64_t v);
ir::Attribute float_attr(const std::string& name, float v);
ir::Attribute string_attr(const std::string& name, const std::string& v);
ir::Attribute ints_attr(const std::string& name, std::vector<int64_t> v);
ir::Attribute floats_attr(const std::string& name, std::vector<float> v);

}  // namespace peregrine::passes
