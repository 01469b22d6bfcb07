// A one-node graph run through the executor on a chosen backend (with the
// reference backend as fallback), for comparing CPU kernels with the reference kernels.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/reference/evaluate.h"
#include "backends/reference/reference_backend.h"
#include "cpu_test_util.h"
#include "ir/graph.h"
#include "ops/type_inference.h"
#include "passes/pass_util.h"
#include "runtime/executor.h"

namespace peregrine::cpu::testing {

inline Tensor random_tensor(const Shape& shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t = Tensor::zeros(DType::kFloat32, shape);
  std::vector<float> v = random_floats(static_cast<size_t>(t.numel()), seed, lo, hi);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

using peregrine::passes::float_attr;
using peregrine::passes::int_attr;
using peregrine::passes::ints_attr;
using peregrine::passes::string_attr;

// One node `op` (domain, opset) on graph inputs (or initializers where `constant`), output Y.
// An input named "" is an omitted optional input.
struct OneNodeGraph {
  ir::Graph graph;
  std::map<std::string, RuntimeValue> feeds;

  OneNodeGraph(const std::string& op, const std::vector<std::pair<std::string, Tensor>>& inputs,
               const std::vector<bool>& constant, std::vector<ir::Attribute> attrs,
               const std::string& domain = "", int opset = 17) {
    graph.opsets[""] = domain.empty() ? opset : 17;
    graph.opsets["peregrine"] = 1;
    auto node = std::make_unique<ir::Node>();
    node->op_type = op;
    node->domain = domain;
    node->opset = domain.empty() ? opset : 1;
    node->name = "n";
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto& [name, t] = inputs[i];
      node->inputs.push_back(name);
      if (name.empty()) continue;  // an omitted optional input
      ir::Value& v = graph.value(name);
      v.type = ir::ValueType::tensor(t.dtype(), t.shape());
      if (constant[i]) {
        v.initializer = t;
      } else {
        graph.inputs.push_back(name);
        feeds[name] = RuntimeValue::of(t);
      }
    }
    for (auto& a : attrs) node->attributes[a.name] = a;
    node->outputs = {"Y"};
    graph.value("Y");
    graph.outputs = {"Y"};
    graph.nodes.push_back(std::move(node));
  }

  Tensor run(const Backend& backend, int threads, std::string* kernel_name) {
    auto inferred = infer_graph_types(graph, reference_evaluator());
    EXPECT_TRUE(inferred.is_ok()) << inferred.status().message();
    auto ex = GraphExecutor::create(graph, {&backend, &reference_backend()}, threads);
    EXPECT_TRUE(ex.is_ok()) << ex.status().message();
    if (!ex.is_ok()) return Tensor();
    std::vector<NodeTiming> timings;
    auto out = ex.value()->run(feeds, nullptr, &timings);
    EXPECT_TRUE(out.is_ok()) << out.status().message();
    if (!out.is_ok()) return Tensor();
    if (kernel_name && !timings.empty()) *kernel_name = timings[0].kernel;
    return out.value()[0].tensor;
  }
};

// |got - want| <= atol + rtol * |want| elementwise, same shapes and dtypes (other dtypes than
// float32 compared as doubles).
inline void expect_close(const Tensor& got, const Tensor& want, float atol, float rtol = 0.0f) {
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.dtype(), want.dtype());
  if (got.dtype() != DType::kFloat32) {
    for (int64_t i = 0; i < got.numel(); ++i) {
      const double w = want.get_as_double(i);
      ASSERT_NEAR(got.get_as_double(i), w, atol + rtol * std::fabs(w)) << "at " << i;
    }
    return;
  }
  for (int64_t i = 0; i < got.numel(); ++i) {
    const float w = want.data<float>()[i];
    ASSERT_NEAR(got.data<float>()[i], w, atol + rtol * std::fabs(w)) << "at " << i;
  }
}

// Runs `g` (a OneNodeGraph, or any graph with its run(backend, threads, &kernel)) on `backend`
// at 1..3 threads and on the reference backend; compares, and checks the kernel name starts
// with `kernel_prefix` ("" checks nothing).
template <typename Graph>
void compare_with_reference(Graph& g, const Backend& backend, const std::string& kernel_prefix,
                            float atol, float rtol = 0.0f) {
  Tensor want = g.run(reference_backend(), 1, nullptr);
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE("threads=" + std::to_string(threads));
    std::string kernel;
    Tensor got = g.run(backend, threads, &kernel);
    EXPECT_EQ(kernel.rfind(kernel_prefix, 0), 0u) << kernel;
    expect_close(got, want, atol, rtol);
  }
}

}  // namespace peregrine::cpu::testing
