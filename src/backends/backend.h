// The backend interface. A backend says which nodes it can run, prepares a
// kernel for each (packing weights, choosing an algorithm) once per plan, and
// runs it. The reference backend claims every op it knows; faster backends
// claim what they do well and the rest falls back.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status_error.h"
#include "ir/attributes.h"
#include "ir/graph.h"
#include "peregrine/runtime_value.h"

namespace peregrine {

class KernelContext;

// Runs a subgraph (If/Loop/Scan bodies) with the given graph inputs; the outer
// scope is whatever the node running it sees.
using SubgraphRunner = std::function<Expected<std::vector<RuntimeValue>>(
    const ir::Graph&, const std::vector<RuntimeValue>&)>;

// Computes output types at run time from the real inputs (the op's schema).
using OutputTypeFn = std::function<Status(KernelContext&)>;

// What a kernel sees of one node during a run.
class KernelContext {
 public:
  KernelContext(const ir::Node& node, std::vector<const RuntimeValue*> inputs,
                std::vector<ir::ValueType> output_types, SubgraphRunner subgraph_runner,
                int num_threads)
      : node_(node), attrs_(node), inputs_(std::move(inputs)),
        output_types_(std::move(output_types)), outputs_(node.outputs.size()),
        bound_(node.outputs.size(), kUnbound), subgraph_runner_(std::move(subgraph_runner)),
        num_threads_(num_threads) {}

  const ir::Node& node() const { return node_; }
  int opset() const { return node_.opset; }
  const ir::AttrView& attrs() const { return attrs_; }
  int num_threads() const { return num_threads_; }

  size_t num_inputs() const { return inputs_.size(); }
  bool has_input(size_t i) const {
    return i < inputs_.size() && inputs_[i] != nullptr && !inputs_[i]->is_none();
  }
  // Input i as a tensor (callers check has_input for optional inputs).
  const Tensor& input(size_t i) const { return input_value(i).tensor; }
  // A required input the node omits is the model's error, not a null read.
  const RuntimeValue& input_value(size_t i) const {
    if (i >= inputs_.size() || inputs_[i] == nullptr) throw_missing_input(node_.describe(), i);
    return *inputs_[i];
  }
  bool input_present_slot(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }

  size_t num_outputs() const { return outputs_.size(); }
  bool wants_output(size_t i) const { return i < node_.outputs.size() && !node_.outputs[i].empty(); }
  // Output i, allocated on first use from the type inferred for this run.
  // Requires a static inferred shape; ops with data-dependent shapes use allocate_output.
  Tensor& output(size_t i);
  // Output i for a kernel that writes every element of it: output(i) without the zero fill of
  // a bound block (a later output(i) call, e.g. a fallback to the reference, still zero-fills).
  // PEREGRINE_POISON_OUTPUTS=1 fills such blocks with NaN instead, so tests catch a kernel that
  // leaves elements unwritten.
  Tensor& output_for_overwrite(size_t i);
  Tensor& allocate_output(size_t i, DType dtype, const Shape& shape);
  // allocate_output for a kernel that writes every element (as output_for_overwrite).
  Tensor& allocate_output_for_overwrite(size_t i, DType dtype, const Shape& shape);
  void set_output(size_t i, Tensor t) {
    outputs_[i] = RuntimeValue::of(std::move(t));
    bound_[i] = kUnbound;
  }
  void set_output_value(size_t i, RuntimeValue v) {
    outputs_[i] = std::move(v);
    bound_[i] = kUnbound;
  }
  const ir::ValueType& output_type(size_t i) const { return output_types_[i]; }

  // Executor side: one context per node is reused across runs, so nothing here allocates.
  // Pre-sets output i to `t` (a block of the memory plan's arena, a caller's output buffer):
  // output(i) returns it, zero-filled on first use when `zero_fill` (kernels may accumulate
  // into a fresh output); allocate_output(i, ...) reuses it when dtype and shape match and
  // zero_fill is set; set_output()/set_output_value() replace it, and the executor keeps or
  // copies whatever the kernel left. Without zero_fill the block may hold an input's data (an
  // in-place step), which output() hands over unchanged.
  void bind_output(size_t i, Tensor&& t, bool zero_fill) {
    outputs_[i].kind = RuntimeValue::Kind::kTensor;
    outputs_[i].tensor = std::move(t);
    bound_[i] = zero_fill ? kBoundNeedsZero : kBoundReady;
  }
  // A prepared kernel that met a case it has no path for and ran the reference kernel of its
  // op says so here, so profiles name the reference as what ran (cleared every run).
  void mark_reference_fallback() { reference_fallback_ = true; }
  bool reference_fallback() const { return reference_fallback_; }

  // Forgets last run's outputs and bindings (outputs become none).
  void reset_outputs() {
    reference_fallback_ = false;
    for (size_t i = 0; i < outputs_.size(); ++i) {
      if (!outputs_[i].is_none()) outputs_[i] = RuntimeValue();
      bound_[i] = kUnbound;
    }
  }
  void set_input(size_t i, const RuntimeValue* v) { inputs_[i] = v; }
  std::vector<ir::ValueType>& mutable_output_types() { return output_types_; }

  Expected<std::vector<RuntimeValue>> run_subgraph(const ir::Graph& g,
                                                   const std::vector<RuntimeValue>& inputs) {
    return subgraph_runner_(g, inputs);
  }

  Status error(const std::string& message) const {
    return invalid_input(node_.describe() + ": " + message);
  }

  std::vector<RuntimeValue>& outputs() { return outputs_; }

 private:
  const ir::Node& node_;
  ir::AttrView attrs_;
  std::vector<const RuntimeValue*> inputs_;
  std::vector<ir::ValueType> output_types_;
  std::vector<RuntimeValue> outputs_;
  enum : uint8_t { kUnbound, kBoundNeedsZero, kBoundReady };
  std::vector<uint8_t> bound_;  // per output: was it pre-set by bind_output()?
  SubgraphRunner subgraph_runner_;
  int num_threads_;
  bool reference_fallback_ = false;
};

using KernelFn = std::function<Status(KernelContext&)>;

// A kernel bound to one node of one plan.
class PreparedKernel {
 public:
  virtual ~PreparedKernel() = default;
  virtual Status run(KernelContext& ctx) = 0;
  virtual std::string name() const = 0;  // "reference", "cpu/gemm-avx512", ... for profiles
  // False when the kernel computes from its own packed copy of constant input `input` and
  // never reads that input's data at run time (a fallback restores the data itself); the
  // executor may then free the original. Its dtype and shape stay readable.
  virtual bool reads_constant_data(size_t input) const { return true; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual bool supports(const ir::Node& node) const = 0;
  // Called once per node per plan, with static input types when known.
  virtual Expected<std::unique_ptr<PreparedKernel>> prepare(
      const ir::Node& node, const std::vector<ir::ValueType>& input_types) const = 0;
  // Like prepare(), also given the values of inputs that stay constant for the plan's life
  // (initializers; nullptr elsewhere, same length as the node's inputs), so a backend can
  // pack weights once. The executor calls this one; the default ignores the constants.
  virtual Expected<std::unique_ptr<PreparedKernel>> prepare_with_constants(
      const ir::Node& node, const std::vector<ir::ValueType>& input_types,
      const std::vector<const Tensor*>& constant_inputs) const {
    return prepare(node, input_types);
  }
};

}  // namespace peregrine
