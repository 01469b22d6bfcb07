// Runs a graph: a fixed list of (node, prepared kernel) steps in topological
// order. Before each step the schema recomputes output types from the real inputs
// (so data-dependent shapes work); after it the outputs are checked against them.
// Values are released after their last use.
//
// With a memory plan (top-level graphs, see planner/arena_planner.h) every intermediate with
// a static shape lives in one arena allocated at creation: its output slot is pre-bound to
// its block before the kernel runs. Nodes whose types are all static skip re-inference and
// reuse one KernelContext across runs, so a static graph whose kernels don't allocate runs
// without touching the heap (run_into). Invariants kept after every step: a planned value
// lives in its own block (copied there if a kernel returned other arena memory), and no
// unplanned value (graph outputs included) points into the arena (cloned out).
// One run at a time per executor: run() and run_into() serialize on a mutex. For concurrent
// runs, replicate() makes executors that share the prepared kernels (packed weights) and the
// plan, each with its own run state (slots, kernel contexts, arena); a node's kernel runs for
// one executor at a time (a mutex per node), so concurrent runs pipeline through the graph.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "ir/graph.h"
#include "peregrine/profile.h"
#include "planner/arena_planner.h"

namespace peregrine {

class KernelCache;

// Names visible to a graph: its own values (slots by name), then the enclosing graphs'.
struct Scope {
  const std::map<std::string, int>* index = nullptr;
  const std::vector<RuntimeValue>* slots = nullptr;
  const Scope* parent = nullptr;
  const RuntimeValue* find(const std::string& name) const;
};

class GraphExecutor {
 public:
  // Prepares a kernel for every node (backends tried in order, reference last). With
  // `plan_memory`, plans an arena for the static intermediates (only for graphs whose inputs
  // are checked against their declared types: the session's top-level graph).
  // `free_packed_weights`: the same graph, writable; each initializer that every kernel reading
  // it has packed a copy of (PreparedKernel::reads_constant_data) loses its data there as soon
  // as its last reader is prepared, keeping dtype and shape, so peak memory holds one copy of
  // the weights. Not done for a graph output, nor in a graph with subgraphs (their bodies may
  // read an initializer by name).
  // `memory_budget` (bytes, > 0): the arena plus the static graph inputs, outputs and weights
  // must fit, checked before the arena is allocated (a bad-model error with the numbers).
  // `kernel_cache`: kernels prepared by other executors of the same model, taken where a node
  // matches and added to where it does not (runtime/kernel_cache.h).
  static Expected<std::unique_ptr<GraphExecutor>> create(
      const ir::Graph& graph, const std::vector<const Backend*>& backends, int num_threads,
      bool plan_memory = false, ir::Graph* free_packed_weights = nullptr,
      int64_t memory_budget = -1, KernelCache* kernel_cache = nullptr);
  ~GraphExecutor();

  // `inputs` holds the graph inputs by name; returns the graph outputs in order.
  Expected<std::vector<RuntimeValue>> run(const std::map<std::string, RuntimeValue>& inputs,
                                          const Scope* outer,
                                          std::vector<NodeTiming>* timings = nullptr);
  // Graph inputs in graph order; outputs written into the caller's tensors, which must have
  // the graph outputs' static dtypes and shapes (kernels write into them directly). The
  // executor keeps a reference to the inputs until the next run. Requires static graph
  // inputs and outputs.
  Status run_into(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);

  // Another executor of the same graph for a concurrent caller: kernels and plan shared, run
  // state (slots, contexts, activation arena, subgraph executors) its own.
  Expected<std::unique_ptr<GraphExecutor>> replicate() const;

  const ir::Graph& graph() const { return graph_; }
  // Per node, the name of the kernel that runs it (PreparedKernel::name(): a kernel whose
  // algorithm depends on the input shapes names the one its last run took).
  std::vector<std::string> kernel_names() const;
  // The memory plan, or nullptr when the executor runs without one.
  const planner::MemoryPlan* memory_plan() const { return plan_.get(); }

 private:
  struct Step;
  GraphExecutor(const ir::Graph& graph, int num_threads);
  Expected<std::vector<RuntimeValue>> run_subgraph(const ir::Graph& g,
                                                   const std::vector<RuntimeValue>& inputs,
                                                   const Scope* scope);
  // Runs every step over slots_ (graph inputs already placed); `out_buffers`: run_into's.
  Status execute(const Scope* outer, std::vector<NodeTiming>* timings,
                 std::vector<Tensor>* out_buffers);
  // execute()'s steps around one node's kernel run.
  void bind_outputs(size_t node, KernelContext& kctx, std::vector<Tensor>* out_buffers);
  Status store_outputs(size_t node, KernelContext& kctx);
  Status check_static_inputs(bool always) const;
  bool in_arena(const void* p) const;
  // Slots, kernel contexts and the arena for runs (after create() or replicate() set the rest).
  Status init_run_state();
  // The parts of create(): kernels per node, value slots, steps with liveness.
  Status prepare_kernels(const ir::Graph& graph, const std::vector<const Backend*>& backends,
                         int num_threads, ir::Graph* free_packed_weights,
                         KernelCache* kernel_cache);
  void assign_slots(const ir::Graph& graph);
  void build_steps(const ir::Graph& graph, bool static_inputs);
  std::unique_ptr<KernelContext> make_context(size_t node);
  void detach_from_arena(RuntimeValue& v) const;

  const ir::Graph& graph_;
  int num_threads_;
  std::vector<const Backend*> backends_;
  // One per node, shared with replicas (and through a kernel cache with other executors of the
  // model), with a mutex each.
  std::vector<std::shared_ptr<PreparedKernel>> kernels_;
  std::vector<std::shared_ptr<std::mutex>> kernel_mutexes_;
  std::vector<Step> steps_;                               // one per node
  std::vector<std::unique_ptr<KernelContext>> contexts_;  // one per node, reused
  std::map<std::string, int> slot_of_;  // this graph's inputs, initializers, node outputs
  std::vector<RuntimeValue> slots_;
  std::vector<int> input_slots_, output_slots_;
  std::vector<char> initializer_slot_;  // per slot: holds an initializer for the executor's life
  std::vector<Tensor> output_views_;    // run_into: views of the caller's output buffers
  // run(): the last run's graph outputs. One the caller has let go of (sole_owner) is bound
  // again as the output of the node that produces it, so a steady loop of runs allocates no
  // output storage: fresh storage costs a page fault per 4 KiB and a zero fill on every run
  // (for a 1x1 conv with a 4.8 MB output, more than the conv itself; docs/DESIGN.md).
  std::vector<Tensor> recycled_outputs_;
  std::thread::id recycled_for_;  // the thread the last run's outputs went to
  std::shared_ptr<const planner::MemoryPlan> plan_;
  uint8_t* arena_ = nullptr;
  size_t arena_size_ = 0;
  Scope scope_;  // the current run's scope (subgraphs see it through the runner)
  std::mutex run_mutex_;
  std::map<const ir::Graph*, std::unique_ptr<GraphExecutor>> subgraph_executors_;
};

}  // namespace peregrine
