// Typed, defaulted access to a node's attributes. A present attribute of the
// wrong type is an error (the model is malformed), not a silent default.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace peregrine::ir {

class AttrView {
 public:
  explicit AttrView(const Node& node) : node_(node) {}

  bool has(const std::string& name) const { return node_.attribute(name) != nullptr; }
  Expected<int64_t> get_int(const std::string& name, int64_t fallback) const;
  Expected<int64_t> get_int(const std::string& name) const;  // required
  Expected<float> get_float(const std::string& name, float fallback) const;
  Expected<float> get_float(const std::string& name) const;  // required
  Expected<std::string> get_string(const std::string& name, const std::string& fallback) const;
  Expected<std::string> get_string(const std::string& name) const;  // required
  Expected<std::vector<int64_t>> get_ints(const std::string& name,
                                          std::vector<int64_t> fallback = {}) const;
  Expected<std::vector<float>> get_floats(const std::string& name,
                                          std::vector<float> fallback = {}) const;
  Expected<std::vector<std::string>> get_strings(const std::string& name,
                                                 std::vector<std::string> fallback = {}) const;
  // nullptr when absent.
  const Tensor* get_tensor(const std::string& name) const;
  const Graph* get_graph(const std::string& name) const;

 private:
  Status wrong_type(const std::string& name, const char* expected) const;
  const Node& node_;
};

}  // namespace peregrine::ir
