#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <thread>

#include "core/checked_math.h"
#include "core/memory_budget.h"
#include "core/status_error.h"
#include "ir/verifier.h"
#include "ops/op_schema.h"
#include "ops/type_inference.h"
#include "runtime/kernel_cache.h"

namespace peregrine {

namespace {

constexpr int kNoInput = -1;     // an omitted optional input
constexpr int kOuterInput = -2;  // a name of an enclosing graph, looked up per run

std::vector<const ir::Graph*> subgraphs_of(const ir::Node& n) {
  std::vector<const ir::Graph*> subs;
  for (const auto& [key, a] : n.attributes) {
    if (a.g) subs.push_back(a.g.get());
    for (const auto& sg : a.graphs) subs.push_back(sg.get());
  }
  return subs;
}

}  // namespace

// Per node, what each run needs without recomputing it.
struct GraphExecutor::Step {
  std::vector<int> in_slots;             // slot per input, or kNoInput / kOuterInput
  std::vector<int> out_slots;            // slot per output, -1 where nobody wants it
  std::vector<int> release;              // unplanned slots dead after this step
  std::vector<const planner::PlannedValue*> planned;  // per output, null when not planned
  std::vector<int> graph_output;         // per output: index in graph outputs, or -1
  bool static_types = false;             // output types fixed at load time: skip inference
};

const RuntimeValue* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent) {
    if (!s->index) continue;
    auto it = s->index->find(name);
    if (it != s->index->end()) return &(*s->slots)[static_cast<size_t>(it->second)];
  }
  return nullptr;
}

GraphExecutor::GraphExecutor(const ir::Graph& graph, int num_threads)
    : graph_(graph), num_threads_(num_threads) {}

GraphExecutor::~GraphExecutor() { std::free(arena_); }

std::unique_ptr<KernelContext> GraphExecutor::make_context(size_t i) {
  const ir::Node& n = *graph_.nodes[i];
  std::vector<ir::ValueType> out_types(n.outputs.size());
  if (steps_[i].static_types) {
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (const ir::Value* v = n.outputs[k].empty() ? nullptr : graph_.find_value(n.outputs[k]))
        out_types[k] = v->type;
  }
  return std::make_unique<KernelContext>(
      n, std::vector<const RuntimeValue*>(n.inputs.size(), nullptr), std::move(out_types),
      [this](const ir::Graph& g, const std::vector<RuntimeValue>& sub_inputs) {
        return run_subgraph(g, sub_inputs, &scope_);
      },
      num_threads_);
}

Status GraphExecutor::init_run_state() {
  slots_.assign(slot_of_.size(), RuntimeValue());
  for (const auto& [name, v] : graph_.values)
    if (v.initializer)
      slots_[static_cast<size_t>(slot_of_.at(name))] = RuntimeValue::of(*v.initializer);
  if (plan_ && plan_->arena_bytes > 0) {
    arena_size_ = static_cast<size_t>(plan_->arena_bytes);
    arena_ = static_cast<uint8_t*>(std::aligned_alloc(planner::kArenaAlignment, arena_size_));
    if (!arena_)
      return invalid_model("out of memory allocating a " + format_bytes(plan_->arena_bytes) +
                           " activation arena");
  }
  // Planned slots hold their arena views from the start, so runs never rebuild them.
  if (plan_)
    for (const auto& [name, pv] : plan_->values)
      slots_[static_cast<size_t>(slot_of_.at(name))] =
          RuntimeValue::of(Tensor::view(pv.dtype, pv.dims, arena_ + pv.offset));
  contexts_.clear();
  for (size_t i = 0; i < steps_.size(); ++i) contexts_.push_back(make_context(i));
  output_views_.assign(graph_.outputs.size(), Tensor());
  recycled_outputs_.assign(graph_.outputs.size(), Tensor());
  return Status::ok();
}

Expected<std::unique_ptr<GraphExecutor>> GraphExecutor::replicate() const {
  std::unique_ptr<GraphExecutor> ex(new GraphExecutor(graph_, num_threads_));
  ex->backends_ = backends_;
  ex->kernels_ = kernels_;
  ex->kernel_mutexes_ = kernel_mutexes_;
  ex->steps_ = steps_;
  ex->slot_of_ = slot_of_;
  ex->input_slots_ = input_slots_;
  ex->output_slots_ = output_slots_;
  ex->initializer_slot_ = initializer_slot_;
  ex->plan_ = plan_;
  for (const auto& [g, sub] : subgraph_executors_) {
    PG_ASSIGN_OR_RETURN(auto copy, sub->replicate());
    ex->subgraph_executors_.emplace(g, std::move(copy));
  }
  PG_RETURN_IF_ERROR(ex->init_run_state());
  return ex;
}

namespace {

// The static tensors' memory against the budget: what the session will hold whatever the
// inputs (dynamic values are not counted; Tensor::make refuses the impossible ones at run time).
Status check_memory_budget(const ir::Graph& g, const planner::MemoryPlan& plan, int64_t budget) {
  // Sizes saturate (a declared dim of 2^63 - 1 must not overflow the sums).
  static constexpr int64_t kHuge = std::numeric_limits<int64_t>::max() / 4;
  auto add = [](int64_t a, int64_t b) {
    return std::min(kHuge, checked_add(a, b).value_or(kHuge));
  };
  auto static_bytes = [&](const std::string& name) -> int64_t {
    const ir::Value* v = g.find_value(name);
    if (!v || !v->type.is_static()) return 0;
    auto n = checked_product(v->type.dims);
    auto b = n ? checked_mul(*n, static_cast<int64_t>(std::max<size_t>(dtype_size(v->type.dtype), 1)))
               : std::nullopt;
    return b ? std::min(*b, kHuge) : kHuge;
  };
  int64_t inputs = 0, outputs = 0, weights = 0;
  for (const auto& n : g.inputs) inputs = add(inputs, static_bytes(n));
  for (const auto& n : g.outputs) outputs = add(outputs, static_bytes(n));
  for (const auto& [name, v] : g.values)
    if (v.initializer) weights = add(weights, static_cast<int64_t>(v.initializer->nbytes()));
  const int64_t total = add(add(plan.arena_bytes, inputs), add(outputs, weights));
  if (total <= budget) return Status::ok();
  return invalid_model("the model's static tensors need " + format_bytes(total) + " (activation arena " +
                       format_bytes(plan.arena_bytes) + ", inputs " + format_bytes(inputs) +
                       ", outputs " + format_bytes(outputs) + ", weights " + format_bytes(weights) +
                       "), over the memory budget of " + format_bytes(budget) +
                       " (--memory-limit sets it; the default is three quarters of physical memory)");
}

}  // namespace

Expected<std::unique_ptr<GraphExecutor>> GraphExecutor::create(
    const ir::Graph& graph, const std::vector<const Backend*>& backends, int num_threads,
    bool plan_memory, ir::Graph* free_packed_weights, int64_t memory_budget,
    KernelCache* kernel_cache) {
  std::unique_ptr<GraphExecutor> ex(new GraphExecutor(graph, num_threads));
  ex->backends_ = backends;
  PG_RETURN_IF_ERROR(
      ex->prepare_kernels(graph, backends, num_threads, free_packed_weights, kernel_cache));
  ex->assign_slots(graph);
  bool static_inputs = plan_memory;
  for (const auto& name : graph.inputs) {
    const ir::Value* v = graph.find_value(name);
    static_inputs &= v && v->type.is_static();
  }
  if (plan_memory) {
    ex->plan_ = std::make_shared<planner::MemoryPlan>(planner::plan_memory(graph));
    if (memory_budget > 0)
      PG_RETURN_IF_ERROR(check_memory_budget(graph, *ex->plan_, memory_budget));
  }

  ex->build_steps(graph, static_inputs);
  PG_RETURN_IF_ERROR(ex->init_run_state());
  return ex;
}

// One kernel per node from the first backend that supports it (or the kernel cache), and an
// executor per subgraph. With `free_packed_weights`, an initializer every reader packed into
// its own copy is dropped from that graph.
Status GraphExecutor::prepare_kernels(const ir::Graph& graph,
                                      const std::vector<const Backend*>& backends, int num_threads,
                                      ir::Graph* free_packed_weights, KernelCache* kernel_cache) {
  const SchemaRegistry& schemas = SchemaRegistry::global();
  // Per initializer: readers not yet prepared, and whether all prepared ones packed it.
  std::map<std::string, std::pair<int, bool>> weight_readers;
  if (free_packed_weights) {
    for (const auto& node : graph.nodes)
      if (!subgraphs_of(*node).empty()) free_packed_weights = nullptr;
  }
  if (free_packed_weights) {
    for (const auto& node : graph.nodes)
      for (const auto& in : node->inputs) {
        const ir::Value* v = in.empty() ? nullptr : graph.find_value(in);
        if (v && v->initializer) {
          auto& [left, packed] = weight_readers.try_emplace(in, 0, true).first->second;
          ++left;
        }
      }
    for (const auto& name : graph.outputs) weight_readers.erase(name);
    for (const auto& name : graph.inputs) weight_readers.erase(name);
  }
  for (const auto& node : graph.nodes) {
    if (!schemas.find(node->domain, node->op_type))
      return unsupported(node->describe() + ": op '" + node->op_type + "'" +
                         (node->domain.empty() ? "" : " of domain '" + node->domain + "'") +
                         " is not supported");
    std::vector<ir::ValueType> in_types;
    std::vector<const Tensor*> constants;  // initializers, for weight packing
    for (const auto& in : node->inputs) {
      const ir::Value* v = in.empty() ? nullptr : graph.find_value(in);
      in_types.push_back(v ? v->type : ir::ValueType{});
      // An initializer that is also a graph input can be overridden at run time.
      const bool constant = v && v->initializer &&
                            std::find(graph.inputs.begin(), graph.inputs.end(), in) ==
                                graph.inputs.end();
      constants.push_back(constant ? &*v->initializer : nullptr);
    }
    std::shared_ptr<PreparedKernel> kernel;
    std::shared_ptr<std::mutex> kernel_mutex;
    for (const Backend* b : backends) {
      if (!b->supports(*node)) continue;
      const std::optional<std::string> key =
          kernel_cache ? KernelCache::key_of(b->name(), *node, in_types, constants) : std::nullopt;
      if (key) {
        KernelCache::Entry cached = kernel_cache->find(*key);
        kernel = std::move(cached.kernel);
        kernel_mutex = std::move(cached.mutex);
      }
      if (!kernel) {
        auto k = b->prepare_with_constants(*node, in_types, constants);
        if (!k.is_ok()) return k.status();
        kernel = std::move(k).value();
        kernel_mutex = std::make_shared<std::mutex>();
        if (key) kernel_cache->insert(*key, {kernel, kernel_mutex});
      }
      break;
    }
    if (!kernel) return unsupported(node->describe() + ": no backend implements this op");
    for (size_t j = 0; j < node->inputs.size(); ++j) {
      auto it = weight_readers.find(node->inputs[j]);
      if (it == weight_readers.end()) continue;
      auto& [left, packed] = it->second;
      packed = packed && !kernel->reads_constant_data(j);
      if (--left == 0 && packed) {  // every reader holds its own copy: free the original
        std::optional<Tensor>& w = free_packed_weights->values.at(it->first).initializer;
        w = Tensor::view(w->dtype(), w->shape(), nullptr);
      }
    }
    kernels_.push_back(std::move(kernel));
    kernel_mutexes_.push_back(std::move(kernel_mutex));
    // Subgraphs are planned now too, so an unsupported op anywhere fails at load time.
    for (const ir::Graph* sg : subgraphs_of(*node)) {
      auto sub = create(*sg, backends, num_threads);
      if (!sub.is_ok()) return sub.status();
      subgraph_executors_.emplace(sg, std::move(sub).value());
    }
  }

  return Status::ok();
}

void GraphExecutor::assign_slots(const ir::Graph& graph) {
  // Slots: graph inputs, initializers, then node outputs; everything else is an outer name.
  auto slot = [&](const std::string& name) {
    return slot_of_.emplace(name, static_cast<int>(slot_of_.size())).first->second;
  };
  for (const auto& name : graph.inputs) input_slots_.push_back(slot(name));
  for (const auto& [name, v] : graph.values)
    if (v.initializer) slot(name);
  for (const auto& n : graph.nodes)
    for (const auto& o : n->outputs)
      if (!o.empty()) slot(o);
  initializer_slot_.assign(slot_of_.size(), 0);
  for (const auto& [name, v] : graph.values)
    if (v.initializer && !std::count(graph.inputs.begin(), graph.inputs.end(), name))
      initializer_slot_[slot_of_[name]] = 1;
  for (const auto& name : graph.outputs) {
    auto it = slot_of_.find(name);  // a subgraph may output an outer value (-1)
    output_slots_.push_back(it == slot_of_.end() ? -1 : it->second);
  }
}

// Each node's step: its input and output slots, planned blocks, graph outputs, and the
// unplanned values released after it.
void GraphExecutor::build_steps(const ir::Graph& graph, bool static_inputs) {
  // Liveness: release each unplanned local value after its last reader (graph outputs
  // never); a value nobody reads goes right after its producer.
  std::vector<int> last_use(slot_of_.size(), -1);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& n = *graph.nodes[i];
    auto read = [&](const std::string& name) {
      auto it = slot_of_.find(name);
      if (it != slot_of_.end()) last_use[it->second] = static_cast<int>(i);
    };
    for (const auto& in : n.inputs)
      if (!in.empty()) read(in);
    for (const ir::Graph* sg : subgraphs_of(n))
      for (const auto& fv : ir::free_variables(*sg)) read(fv);
    for (const auto& o : n.outputs)
      if (!o.empty()) {
        int& last = last_use[slot_of_[o]];
        last = std::max(last, static_cast<int>(i));
      }
  }
  std::set<std::string> keep(graph.outputs.begin(), graph.outputs.end());
  steps_.resize(graph.nodes.size());
  std::set<int> produced;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& n = *graph.nodes[i];
    Step& st = steps_[i];
    for (const auto& in : n.inputs) {
      auto it = in.empty() ? slot_of_.end() : slot_of_.find(in);
      st.in_slots.push_back(in.empty()             ? kNoInput
                            : it == slot_of_.end() ? kOuterInput
                                                   : it->second);
    }
    bool static_types = static_inputs && subgraphs_of(n).empty();
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const std::string& o = n.outputs[k];
      const ir::Value* v = o.empty() ? nullptr : graph.find_value(o);
      // An unnamed output has no load-time type, yet a kernel may still fill it.
      static_types &= v && v->type.is_static();
      st.out_slots.push_back(o.empty() ? -1 : slot_of_[o]);
      const planner::PlannedValue* pv = nullptr;
      if (plan_ && plan_->values.count(o)) pv = &plan_->values.at(o);
      st.planned.push_back(pv);
      auto g = std::find(graph.outputs.begin(), graph.outputs.end(), o);
      st.graph_output.push_back(o.empty() || g == graph.outputs.end()
                                    ? -1 : static_cast<int>(g - graph.outputs.begin()));
      if (!o.empty() && !keep.count(o) && !pv && produced.insert(slot_of_[o]).second)
        steps_[static_cast<size_t>(last_use[slot_of_[o]])].release.push_back(slot_of_[o]);
    }
    for (const auto& in : n.inputs) {
      const ir::Value* v = in.empty() ? nullptr : graph.find_value(in);
      static_types &= in.empty() || (v && v->type.is_static());
    }
    st.static_types = static_types;
  }
}

std::vector<std::string> GraphExecutor::kernel_names() const {
  std::vector<std::string> names;
  names.reserve(kernels_.size());
  for (const auto& k : kernels_) names.push_back(k->name());
  return names;
}

bool GraphExecutor::in_arena(const void* p) const {
  const auto* b = static_cast<const uint8_t*>(p);
  return arena_ && b >= arena_ && b < arena_ + arena_size_;
}

void GraphExecutor::detach_from_arena(RuntimeValue& v) const {
  if (!arena_) return;
  if (v.is_tensor() && in_arena(v.tensor.raw())) v.tensor = v.tensor.clone();
  for (Tensor& t : v.sequence)
    if (in_arena(t.raw())) t = t.clone();
}

Status GraphExecutor::check_static_inputs(bool always) const {
  // A plan or cached types assume the declared input shapes; the session checks them too.
  if (!plan_ && !always) return Status::ok();
  for (size_t j = 0; j < graph_.inputs.size(); ++j) {
    const ir::Value* v = graph_.find_value(graph_.inputs[j]);
    const RuntimeValue& rv = slots_[static_cast<size_t>(input_slots_[j])];
    if (!v || !v->type.is_static() || !rv.is_tensor()) continue;
    if (rv.tensor.dtype() != v->type.dtype || rv.tensor.shape() != v->type.dims)
      return invalid_input("input '" + graph_.inputs[j] + "' has " +
                           std::string(dtype_name(rv.tensor.dtype())) + " shape " +
                           shape_to_string(rv.tensor.shape()) + ", the plan expects " +
                           v->type.to_string());
  }
  return Status::ok();
}

Expected<std::vector<RuntimeValue>> GraphExecutor::run_subgraph(
    const ir::Graph& g, const std::vector<RuntimeValue>& inputs, const Scope* scope) {
  auto it = subgraph_executors_.find(&g);
  if (it == subgraph_executors_.end()) {
    PG_ASSIGN_OR_RETURN(auto ex, create(g, backends_, num_threads_));
    it = subgraph_executors_.emplace(&g, std::move(ex)).first;
  }
  if (inputs.size() != g.inputs.size())
    return invalid_model("subgraph '" + g.name + "' takes " + std::to_string(g.inputs.size()) +
                         " inputs, given " + std::to_string(inputs.size()));
  std::map<std::string, RuntimeValue> named;
  for (size_t i = 0; i < inputs.size(); ++i) named[g.inputs[i]] = inputs[i];
  return it->second->run(named, scope);
}

Expected<std::vector<RuntimeValue>> GraphExecutor::run(
    const std::map<std::string, RuntimeValue>& inputs, const Scope* outer,
    std::vector<NodeTiming>* timings) {
  std::lock_guard<std::mutex> lock(run_mutex_);
  for (size_t j = 0; j < graph_.inputs.size(); ++j) {
    auto it = inputs.find(graph_.inputs[j]);
    if (it == inputs.end())
      return invalid_input("graph input '" + graph_.inputs[j] + "' was not given");
    slots_[static_cast<size_t>(input_slots_[j])] = it->second;
  }
  Status st = execute(outer, timings, nullptr);
  std::vector<RuntimeValue> outputs;
  recycled_outputs_.assign(graph_.outputs.size(), Tensor());
  recycled_for_ = std::this_thread::get_id();
  for (size_t j = 0; st.is_ok() && j < graph_.outputs.size(); ++j) {
    const RuntimeValue* v = output_slots_[j] >= 0
                                ? &slots_[static_cast<size_t>(output_slots_[j])]
                                : scope_.find(graph_.outputs[j]);
    if (!v) {
      st = internal_error("graph output '" + graph_.outputs[j] + "' was not produced");
      break;
    }
    outputs.push_back(*v);
    const bool node_output =
        output_slots_[j] >= 0 && !initializer_slot_[static_cast<size_t>(output_slots_[j])];
    if (node_output && v->is_tensor() && v->tensor.dtype() != DType::kString &&
        v->tensor.quant() == nullptr)
      recycled_outputs_[j] = v->tensor;
  }
  if (!st.is_ok()) recycled_outputs_.assign(graph_.outputs.size(), Tensor());
  // Drop this run's inputs and outputs so the executor holds no user memory between runs
  // (besides recycled_outputs_, which is the caller's only while the caller holds it too).
  for (int s : input_slots_) slots_[static_cast<size_t>(s)] = RuntimeValue();
  for (int s : output_slots_)
    if (s >= 0 && !initializer_slot_[static_cast<size_t>(s)])
      slots_[static_cast<size_t>(s)] = RuntimeValue();
  if (!st.is_ok()) return st;
  return outputs;
}

Status GraphExecutor::run_into(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  std::lock_guard<std::mutex> lock(run_mutex_);
  if (inputs.size() != graph_.inputs.size() || outputs.size() != graph_.outputs.size())
    return invalid_input("run_into: the model takes " + std::to_string(graph_.inputs.size()) +
                         " inputs and gives " + std::to_string(graph_.outputs.size()) +
                         " outputs; given " + std::to_string(inputs.size()) + " and " +
                         std::to_string(outputs.size()));
  for (size_t j = 0; j < outputs.size(); ++j) {
    const ir::Value* v = graph_.find_value(graph_.outputs[j]);
    if (output_slots_[j] < 0 || !v || !v->type.is_static() || v->type.dtype == DType::kString)
      return unsupported("run_into: output '" + graph_.outputs[j] + "' has no static shape");
    const Tensor& t = outputs[j];
    if (t.dtype() != v->type.dtype || t.shape() != v->type.dims || !t.raw())
      return invalid_input("run_into: output '" + graph_.outputs[j] + "' must be a " +
                           v->type.to_string() + " tensor");
  }
  for (size_t j = 0; j < inputs.size(); ++j) {
    RuntimeValue& rv = slots_[static_cast<size_t>(input_slots_[j])];
    rv.kind = RuntimeValue::Kind::kTensor;
    rv.tensor = inputs[j];  // copy-assign: reuses the slot's shape storage
  }
  PG_RETURN_IF_ERROR(execute(nullptr, nullptr, &outputs));
  // Outputs a kernel did not write in place (it replaced the binding) are copied over.
  for (size_t j = 0; j < outputs.size(); ++j) {
    const RuntimeValue& rv = slots_[static_cast<size_t>(output_slots_[j])];
    Tensor& dst = outputs[j];
    if (!rv.is_tensor())
      return internal_error("graph output '" + graph_.outputs[j] + "' is not a tensor");
    if (rv.tensor.raw() == dst.raw()) continue;
    if (rv.tensor.dtype() != dst.dtype() || rv.tensor.nbytes() != dst.nbytes())
      return internal_error("graph output '" + graph_.outputs[j] + "' does not match its type");
    std::memcpy(dst.raw(), rv.tensor.raw(), dst.nbytes());
  }
  // Keep the views of the caller's buffers for the next run (the same buffers usually).
  for (size_t j = 0; j < outputs.size(); ++j) {
    const size_t s = static_cast<size_t>(output_slots_[j]);
    if (initializer_slot_[s]) continue;
    if (slots_[s].is_tensor() && slots_[s].tensor.raw() == outputs[j].raw())
      output_views_[j] = std::move(slots_[s].tensor);
    slots_[s] = RuntimeValue();
  }
  return Status::ok();
}

// Pre-binds node i's outputs: arena blocks, or the caller's buffers for graph outputs
// (run_into), or last run's storage of a graph output the caller has released.
void GraphExecutor::bind_outputs(size_t i, KernelContext& kctx, std::vector<Tensor>* out_buffers) {
  const ir::Node& node = *graph_.nodes[i];
  Step& step = steps_[i];
  kctx.reset_outputs();
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    if (const planner::PlannedValue* pv = step.planned[k]) {
      Tensor& t = slots_[static_cast<size_t>(step.out_slots[k])].tensor;
      void* p = arena_ + pv->offset;
      if (t.raw() != p || t.dtype() != pv->dtype || t.shape() != pv->dims)
        t = Tensor::view(pv->dtype, pv->dims, p);  // a kernel replaced it last run
      kctx.bind_output(k, std::move(t), /*zero_fill=*/!pv->shares_input);
    } else if (out_buffers && step.graph_output[k] >= 0) {
      Tensor& dst = (*out_buffers)[static_cast<size_t>(step.graph_output[k])];
      Tensor& t = output_views_[static_cast<size_t>(step.graph_output[k])];
      if (t.raw() != dst.raw() || t.dtype() != dst.dtype() || t.shape() != dst.shape())
        t = Tensor::view(dst.dtype(), dst.shape(), dst.raw());
      kctx.bind_output(k, std::move(t), /*zero_fill=*/true);
    } else if (step.graph_output[k] >= 0) {
      // Last run's storage of this graph output, if the caller has released it and this
      // run's inferred type is static and the same.
      // Only for the thread that was given it: that thread's release of it happened before
      // this run (another thread's drop of its reference would not order its reads before
      // our writes).
      Tensor& last = recycled_outputs_[static_cast<size_t>(step.graph_output[k])];
      const ir::ValueType& type = kctx.output_type(k);
      if (recycled_for_ == std::this_thread::get_id() && last.sole_owner() && type.is_static() &&
          last.dtype() == type.dtype && last.shape() == type.dims)
        kctx.bind_output(k, std::move(last), /*zero_fill=*/true);
      last = Tensor();
    }
  }
}

// Checks node i's outputs against their inferred types and moves them into their slots, each
// in its own planned block (a view of another block is copied in) or out of the arena.
Status GraphExecutor::store_outputs(size_t i, KernelContext& kctx) {
  const ir::Node& node = *graph_.nodes[i];
  const Step& step = steps_[i];
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    if (node.outputs[k].empty()) continue;
    RuntimeValue& out = kctx.outputs()[k];
    const ir::ValueType& expect = kctx.output_type(k);
    if (out.is_tensor() && expect.is_tensor()) {
      if (expect.dtype != DType::kUndefined && out.tensor.dtype() != expect.dtype)
        return internal_error(node.describe() + ": output " + std::to_string(k) + " has type " +
                              std::string(dtype_name(out.tensor.dtype())) + ", schema says " +
                              std::string(dtype_name(expect.dtype)));
      if (expect.is_static() && out.tensor.shape() != expect.dims)
        return internal_error(node.describe() + ": output " + std::to_string(k) + " has shape " +
                              shape_to_string(out.tensor.shape()) + ", schema says " +
                              shape_to_string(expect.dims));
    }
    const planner::PlannedValue* pv = step.planned[k];
    if (pv && out.is_tensor() && out.tensor.raw() != arena_ + pv->offset &&
        in_arena(out.tensor.raw())) {
      // Another block's bytes (a view of an input): they may be reused before this value
      // dies, so copy them into this value's own block.
      if (out.tensor.nbytes() != static_cast<size_t>(pv->bytes))
        return internal_error(node.describe() + ": output " + std::to_string(k) +
                              " does not match its planned size");
      Tensor own = Tensor::view(pv->dtype, pv->dims, arena_ + pv->offset);
      std::memmove(own.raw(), out.tensor.raw(), own.nbytes());
      out.tensor = std::move(own);
    } else if (!pv) {
      detach_from_arena(out);
    }
    slots_[static_cast<size_t>(step.out_slots[k])] = std::move(out);
  }
  return Status::ok();
}

Status GraphExecutor::execute(const Scope* outer, std::vector<NodeTiming>* timings,
                              std::vector<Tensor>* out_buffers) {
  scope_ = Scope{&slot_of_, &slots_, outer};
  PG_RETURN_IF_ERROR(check_static_inputs(/*always=*/out_buffers != nullptr));
  const SchemaRegistry& schemas = SchemaRegistry::global();
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();

  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    const ir::Node& node = *graph_.nodes[i];
    Step& step = steps_[i];
    KernelContext& kctx = *contexts_[i];
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const int s = step.in_slots[k];
      const RuntimeValue* v = s >= 0 ? &slots_[static_cast<size_t>(s)]
                              : s == kOuterInput ? scope_.find(node.inputs[k]) : nullptr;
      if (s == kOuterInput && !v)
        return internal_error(node.describe() + ": input '" + node.inputs[k] +
                              "' has no value at run time");
      kctx.set_input(k, v);
    }
    if (!step.static_types) {
      std::vector<ir::ValueType> in_types_store(node.inputs.size());
      std::vector<const ir::ValueType*> in_types(node.inputs.size(), nullptr);
      std::vector<const Tensor*> in_values(node.inputs.size(), nullptr);
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        if (!kctx.input_present_slot(k)) continue;
        const RuntimeValue& v = kctx.input_value(k);
        in_types_store[k] = type_of(v);
        in_types[k] = &in_types_store[k];
        in_values[k] = v.is_tensor() ? &v.tensor : nullptr;
      }
      const OpSchema* schema = schemas.find(node.domain, node.op_type);
      InferContext ictx(node, in_types, in_values);
      PG_RETURN_IF_ERROR(schema->infer(ictx));
      kctx.mutable_output_types() = ictx.output_types();
    }

    bind_outputs(i, kctx, out_buffers);

    const auto start = Clock::now();
    Status st;
    {
      // Executors replicated for concurrent runs share this node's kernel: one run in it at a
      // time (kernels keep per-node state, e.g. shape-dependent plans).
      std::lock_guard<std::mutex> kernel_lock(*kernel_mutexes_[i]);
      try {
        st = kernels_[i]->run(kctx);
      } catch (...) {
        st = status_from_current_exception(node.describe());
      }
    }
    const auto end = Clock::now();
    if (!st.is_ok()) {
      // Kernel errors are about this node; make sure the message names it.
      if (st.message().find(node.describe()) == std::string::npos)
        st = st.with_context(node.describe());
      return st;
    }
    if (timings) {
      timings->push_back({i, std::chrono::duration<double, std::micro>(start - t0).count(),
                          std::chrono::duration<double, std::micro>(end - start).count(),
                          kctx.reference_fallback()
                              ? "reference (fallback of " + kernels_[i]->name() + ")"
                              : kernels_[i]->name()});
    }
    PG_RETURN_IF_ERROR(store_outputs(i, kctx));
    for (int dead : step.release) slots_[static_cast<size_t>(dead)] = RuntimeValue();
  }
  return Status::ok();
}

}  // namespace peregrine
