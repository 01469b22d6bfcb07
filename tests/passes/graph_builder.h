// A tiny builder for pass tests: graphs written as a few lines of C++, plus helpers
// that run a graph on the reference backend and count ops.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backends/reference/evaluate.h"
#include "backends/reference/reference_backend.h"
#include "ir/verifier.h"
#include "ops/type_inference.h"
#include "passes/pass_util.h"
#include "peregrine/float_types.h"
#include "runtime/executor.h"

namespace peregrine::testing {

class GraphBuilder {
 public:
  explicit GraphBuilder(int opset = 18) { g_.opsets[""] = opset; }

  std::string input(const std::string& name, Shape dims, DType dtype = DType::kFloat32) {
    g_.value(name).type = ir::ValueType::tensor(dtype, std::move(dims));
    g_.inputs.push_back(name);
    return name;
  }
  std::string constant(const std::string& name, Tensor t) {
    ir::Value& v = g_.value(name);
    v.type = ir::ValueType::tensor(t.dtype(), t.shape());
    v.initializer = std::move(t);
    return name;
  }
  std::string scalar(const std::string& name, float v) {
    return constant(name, Tensor::scalar<float>(v));
  }
  std::string ints(const std::string& name, std::vector<int64_t> v) {
    Shape s{static_cast<int64_t>(v.size())};
    return constant(name, Tensor::from_vector<int64_t>(v, s));
  }
  // Seeded values in [-1, 1).
  std::string random(const std::string& name, Shape dims, uint64_t seed = 1) {
    Tensor t = Tensor::zeros(DType::kFloat32, dims);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
    return constant(name, t);
  }
  // Adds a node; returns its first output ("<name>_out", or as given).
  ir::Node& node(const std::string& op, std::vector<std::string> inputs,
                 std::vector<std::string> outputs = {}, const std::string& domain = "") {
    auto n = std::make_unique<ir::Node>();
    n->name = op + std::to_string(g_.nodes.size());
    n->op_type = op;
    n->domain = domain;
    n->opset = g_.opsets[domain];
    n->inputs = std::move(inputs);
    if (outputs.empty()) outputs = {n->name + "_out"};
    n->outputs = std::move(outputs);
    g_.nodes.push_back(std::move(n));
    return *g_.nodes.back();
  }
  std::string op(const std::string& op_type, std::vector<std::string> inputs) {
    return node(op_type, std::move(inputs)).outputs[0];
  }
  void output(const std::string& name) { g_.outputs.push_back(name); }

  // Verified, sorted and typed.
  ir::Graph build() {
    Status st = ir::verify_and_sort(g_);
    EXPECT_TRUE(st.is_ok()) << st.message();
    auto r = infer_graph_types(g_, reference_evaluator());
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return std::move(g_);
  }

 private:
  ir::Graph g_;
};

using passes::float_attr;
using passes::int_attr;
using passes::ints_attr;
using passes::string_attr;

inline int count_op(const ir::Graph& g, const std::string& op) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(),
                                         [&](const auto& n) { return n->op_type == op; }));
}

// Seeded values in [-1, 1) (float32, float64, float16, bfloat16; bool: a fair coin).
inline Tensor random_tensor(Shape dims, uint64_t seed, DType dtype = DType::kFloat32) {
  Tensor t = Tensor::zeros(dtype, dims);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = u(rng);
    if (dtype == DType::kFloat32) t.data<float>()[i] = static_cast<float>(v);
    else if (dtype == DType::kFloat16) t.data<uint16_t>()[i] = Float16::from_float(static_cast<float>(v));
    else if (dtype == DType::kBFloat16) t.data<uint16_t>()[i] = BFloat16::from_float(static_cast<float>(v));
    else if (dtype == DType::kBool) t.data<bool>()[i] = v > 0;
    else t.data<double>()[i] = v;
  }
  return t;
}

// Runs the graph on `backend` (the reference backend taking what it does not claim) with
// seeded random inputs.
inline std::vector<Tensor> run_graph_on(const Backend& backend, const ir::Graph& g,
                                        uint64_t seed = 7) {
  std::map<std::string, RuntimeValue> inputs;
  for (const auto& name : g.inputs) {
    const ir::ValueType& t = g.find_value(name)->type;
    inputs[name] = RuntimeValue::of(random_tensor(t.dims, seed++, t.dtype));
  }
  auto ex = GraphExecutor::create(g, {&backend, &reference_backend()}, 1);
  EXPECT_TRUE(ex.is_ok()) << ex.status().message();
  if (!ex.is_ok()) return {};
  auto outs = (*ex)->run(inputs, nullptr);
  EXPECT_TRUE(outs.is_ok()) << outs.status().message();
  std::vector<Tensor> result;
  if (outs.is_ok())
    for (auto& v : *outs) result.push_back(v.tensor);
  return result;
}

// Runs the graph on the reference backend with seeded random inputs.
inline std::vector<Tensor> run_graph(const ir::Graph& g, uint64_t seed = 7) {
  return run_graph_on(reference_backend(), g, seed);
}

inline void expect_close(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                         double tol = 1e-5) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].shape(), b[i].shape()) << "output " << i;
    for (int64_t k = 0; k < a[i].numel(); ++k) {
      double x = a[i].get_as_double(k), y = b[i].get_as_double(k);
      ASSERT_NEAR(x, y, tol * std::max(1.0, std::fabs(x))) << "output " << i << " element " << k;
    }
  }
}

}  // namespace peregrine::testing
