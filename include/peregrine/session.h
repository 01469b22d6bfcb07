// Peregrine's public C++ API: load an ONNX model, run it.
//
//   auto session = peregrine::Session::load("model.onnx", {});
//   auto outputs = (*session)->run({{"input", tensor}});
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "peregrine/precision.h"
#include "peregrine/profile.h"
#include "peregrine/runtime_value.h"
#include "peregrine/status.h"
#include "peregrine/tensor.h"

namespace peregrine {

namespace ir {
struct Model;
struct ValueType;
}  // namespace ir
class GraphExecutor;
class KernelCache;

// Prepared kernels (packed weights) shared by sessions of one model compiled for different
// input shapes: give each session's options the same cache, and a node that matches one
// prepared before reuses its kernel instead of packing the weights again.
std::shared_ptr<KernelCache> make_kernel_cache();

// The shapes an input may take, like TensorRT's optimization profiles: every run's shape lies
// within [min, max] dim by dim, and `opt` is the shape the caller expects most (the CLI runs it
// when no --shape is given; the Python API compiles plans for min, opt and max up front).
struct ShapeProfile {
  Shape min, opt, max;
};

struct SessionOptions {
  int num_threads = 1;  // worker threads for kernels that parallelize
  // Kernel backends: "cpu" (optimized CPU kernels, reference for the rest) or "reference"
  // (reference kernels only). Empty: the PEREGRINE_BACKEND environment variable, else "cpu".
  std::string backend;
  // Overrides for input shapes (fixes symbolic dims): name -> dims.
  std::map<std::string, Shape> input_shapes;
  // Values for symbolic dims of the graph inputs, by the dim's name ("batch" -> 1); applied
  // before input_shapes. A name no input uses is an error.
  std::map<std::string, int64_t> dim_values;
  // Graph optimization level: 0 none, 1 cleanup, 2 cleanup + fusion (default), 3 = 2 for now.
  int opt_level = 2;
  // Passes to skip by name (see src/passes/pipelines.cc).
  std::vector<std::string> disabled_passes;
  // Static memory plan: intermediates with static shapes share one arena (src/planner/).
  bool memory_plan = true;
  // The most memory the model's static tensors (activation arena, graph inputs and outputs,
  // weights) may need; a model over it fails to load with the numbers. 0: the default, three
  // quarters of physical memory (core/memory_budget.h); negative: no limit.
  int64_t memory_limit_bytes = 0;
  // Compute precision of GEMM-class nodes (Conv, ConvTranspose, MatMul, Gemm and their fused
  // forms); the rest computes in float32. kBFloat16 needs the cpu backend on a CPU with
  // AVX512_BF16, else loading fails with the reason.
  Precision precision = Precision::kFloat32;
  // Nodes (by name) or op types ("Conv", "peregrine.FusedConv") kept in float32.
  std::vector<std::string> keep_fp32;
  // Shape ranges of inputs, by name: checked against the model when the session is created
  // (ranks, min <= opt <= max, fixed dims and input_shapes inside), and against every run's
  // inputs (a shape outside is an error naming the input, the dim and the range).
  std::map<std::string, ShapeProfile> shape_profiles;
  // Kernels shared with other sessions of the same model (make_kernel_cache()); null: none.
  std::shared_ptr<KernelCache> kernel_cache;
};

// The static memory plan's sizes (all zero without a plan).
struct MemoryPlanStats {
  int64_t arena_bytes = 0;        // the arena the session allocated
  int64_t lower_bound_bytes = 0;  // the largest sum of planned bytes live at one step
  int64_t unshared_bytes = 0;     // every planned tensor in its own buffer
  int64_t planned_values = 0;
  int64_t in_place_steps = 0;     // outputs written over (or viewing) an input's block
  int64_t concat_slices = 0;      // values written straight into a Concat's output (no copy)
};

// One graph input or output as a user sees it.
struct IoInfo {
  std::string name;
  std::string type;     // "float32[1,3,224,224]", "sequence<...>", ...
  DType dtype = DType::kUndefined;
  Shape shape;          // -1 for dims not known until run time
  std::vector<std::string> dim_names;  // per dim: its symbolic name, "" where it has none
  bool is_tensor = true;
};

// Which kernel runs one top-level node of the optimized graph, and where it is defined.
struct NodeKernel {
  std::string node;     // node name
  std::string op_type;  // "Conv", "peregrine.FusedConv", ...
  std::string kernel;   // "cpu/conv-tapwise-f32_gemm_ukernel_14x32__avx512", "reference", ...
  std::string source;   // the CPU kernel table's file for the op, "" when no row claims it
};

class Session {
 public:
  ~Session();
  // load -> infer shapes -> passes (options.opt_level) -> plan -> ready to run.
  static Expected<std::unique_ptr<Session>> load(const std::string& path,
                                                 const SessionOptions& options);
  // The same from a serialized ModelProto held in memory; external data is refused (there is
  // no folder to read it from).
  static Expected<std::unique_ptr<Session>> load_from_bytes(const std::string& bytes,
                                                            const SessionOptions& options);

  const std::vector<IoInfo>& inputs() const { return inputs_; }
  const std::vector<IoInfo>& outputs() const { return outputs_; }
  const SessionOptions& options() const { return options_; }

  // Inputs by name (all graph inputs required); outputs in graph order.
  // With `timings`, records each node of the optimized graph: its start, duration and kernel.
  Expected<std::vector<RuntimeValue>> run_values(const std::map<std::string, RuntimeValue>& inputs,
                                                 std::vector<NodeTiming>* timings = nullptr);
  Expected<std::map<std::string, Tensor>> run(const std::map<std::string, Tensor>& inputs);
  // For static models: inputs in graph order; outputs written into caller-provided tensors of
  // the outputs' dtypes and shapes. Once warm, allocates nothing when the kernels don't.
  Status run_into(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);
  MemoryPlanStats memory_plan_stats() const;
  // Per node, its kernel (after a run, the algorithm the shapes chose).
  std::vector<NodeKernel> node_kernels() const;

 private:
  // The layers above the runtime reach the optimized model through runtime/session_internals.h.
  friend Expected<std::unique_ptr<Session>> session_from_model(ir::Model&& model,
                                                               const SessionOptions& options);
  friend const ir::Model& session_model(const Session& session);
  Session() = default;
  static Expected<std::unique_ptr<Session>> compile(ir::Model model, const SessionOptions& options);
  // An executor no run is using (a replica of executor_ when every one is busy), and its return.
  Expected<GraphExecutor*> acquire_executor();
  void release_executor(GraphExecutor* executor);
  SessionOptions options_;
  std::unique_ptr<ir::Model> model_;
  std::unique_ptr<GraphExecutor> executor_;
  // Concurrent runs: replicas of executor_ (shared kernels, own activation arenas), made on
  // demand and kept; idle_ holds the executors no run is using.
  std::mutex executors_mutex_;
  std::vector<std::unique_ptr<GraphExecutor>> replicas_;
  std::vector<GraphExecutor*> idle_;
  std::vector<IoInfo> inputs_, outputs_;
};

}  // namespace peregrine
