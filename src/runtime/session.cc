#include "peregrine/session.h"

#include <functional>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm/bf16_gemm.h"
#include "backends/cpu/kernel_table.h"
#include "backends/reference/evaluate.h"
#include "backends/reference/reference_backend.h"
#include "core/memory_budget.h"
#include "core/status_error.h"
#include "importer/onnx/onnx_importer.h"
#include "ops/type_inference.h"
#include "passes/assign_precision.h"
#include "passes/pipelines.h"
#include "runtime/backend_registry.h"
#include "runtime/executor.h"
#include "runtime/kernel_cache.h"
#include "runtime/session_internals.h"

namespace peregrine {

Session::~Session() = default;

std::shared_ptr<KernelCache> make_kernel_cache() { return std::make_shared<KernelCache>(); }

namespace {

IoInfo io_info(const ir::Graph& g, const std::string& name) {
  IoInfo info;
  info.name = name;
  const ir::Value* v = g.find_value(name);
  if (!v) return info;
  info.type = v->type.to_string();
  info.is_tensor = v->type.is_tensor();
  info.dtype = v->type.dtype;
  if (v->type.has_shape) {
    info.shape = v->type.dims;
    info.dim_names = v->type.dim_names;
    info.dim_names.resize(info.shape.size());
  }
  return info;
}

// The graph compiler's pipeline for the chosen level, then the session's precision onto the
// nodes that have a kernel for it; plans see the result.
Status run_graph_passes(ir::Model& model, const SessionOptions& options) {
  PG_RETURN_IF_ERROR(passes::optimize_graph(model.graph, options.opt_level, reference_evaluator(),
                                            options.disabled_passes));
  return passes::assign_precision(model.graph, options.precision, options.keep_fp32).status();
}

// A reduced precision must be one the chosen backends and this CPU can compute in: never a
// silent float32 run.
Status check_precision(const SessionOptions& options, const std::vector<const Backend*>& backends) {
  if (options.precision == Precision::kFloat32) return Status::ok();
  const std::string name = precision_name(options.precision);
  if (backends.front() != &cpu_backend())
    return invalid_input("precision " + name +
                         ": the reference backend computes in float32 only (use the cpu backend)");
  if (options.precision == Precision::kBFloat16 && cpu::bf16_gemm_kernel() == nullptr)
    return unsupported("precision bf16 is not available here: " + cpu::bf16_unavailable_reason());
  return Status::ok();
}

std::string range_text(const ShapeProfile& p) {
  return shape_to_string(p.min) + ".." + shape_to_string(p.max);
}

// A shape profile must fit the input it names: same rank, min <= opt <= max, and every dim the
// model (or --shape) fixes inside the range.
Status check_shape_profile(const ir::Graph& g, const std::string& name, const ShapeProfile& p) {
  const std::string what = "shape profile of '" + name + "'";
  const ir::Value* v = g.find_value(name);
  if (!v || std::find(g.inputs.begin(), g.inputs.end(), name) == g.inputs.end())
    return invalid_input(what + ": '" + name + "' is not an input of the model");
  if (!v->type.is_tensor()) return invalid_input(what + ": the input is not a tensor");
  if (p.min.size() != p.opt.size() || p.opt.size() != p.max.size())
    return invalid_input(what + ": min, opt and max must have the same rank");
  if (v->type.has_shape && v->type.dims.size() != p.min.size())
    return invalid_input(what + ": the input has rank " + std::to_string(v->type.dims.size()) +
                         ", the profile " + std::to_string(p.min.size()));
  for (size_t i = 0; i < p.min.size(); ++i) {
    if (p.min[i] < 0) return invalid_input(what + ": dim " + std::to_string(i) + " is negative");
    if (!(p.min[i] <= p.opt[i] && p.opt[i] <= p.max[i]))
      return invalid_input(what + ": dim " + std::to_string(i) +
                           " needs min <= opt <= max, given " + std::to_string(p.min[i]) + ", " +
                           std::to_string(p.opt[i]) + ", " + std::to_string(p.max[i]));
    const int64_t fixed = v->type.has_shape ? v->type.dims[i] : -1;
    if (fixed >= 0 && (fixed < p.min[i] || fixed > p.max[i]))
      return invalid_input(what + ": dim " + std::to_string(i) + " is fixed at " +
                           std::to_string(fixed) + " (by the model or --shape), outside " +
                           range_text(p));
  }
  return Status::ok();
}

// A run's input against its profile: inside [min, max], dim by dim.
Status check_in_profile(const std::string& name, const Tensor& t, const ShapeProfile& p) {
  bool inside = static_cast<size_t>(t.rank()) == p.min.size();
  for (size_t i = 0; inside && i < p.min.size(); ++i) {
    const int64_t d = t.dim(static_cast<int64_t>(i));
    inside = d >= p.min[i] && d <= p.max[i];
  }
  if (inside) return Status::ok();
  return invalid_input("input '" + name + "' has shape " + shape_to_string(t.shape()) +
                       ", outside its shape profile " + range_text(p));
}

// An executor taken for one run, given back however the run ends.
using ExecutorLease = std::unique_ptr<GraphExecutor, std::function<void(GraphExecutor*)>>;

// The API boundary: `f()`'s result, or the Status of an exception it let out.
template <typename F>
auto guarded(const std::string& context, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (...) {
    return status_from_current_exception(context);
  }
}

}  // namespace

Expected<std::unique_ptr<Session>> Session::load(const std::string& path,
                                                 const SessionOptions& options) {
  return guarded(path, [&]() -> Expected<std::unique_ptr<Session>> {
    PG_ASSIGN_OR_RETURN(ir::Model model, load_onnx_model(path));
    return compile(std::move(model), options);
  });
}

Expected<std::unique_ptr<Session>> Session::load_from_bytes(const std::string& bytes,
                                                            const SessionOptions& options) {
  return guarded("<model bytes>", [&]() -> Expected<std::unique_ptr<Session>> {
    // No folder: a model given as bytes may not name external data files.
    PG_ASSIGN_OR_RETURN(ir::Model model, parse_onnx_model(bytes, "", "<model bytes>"));
    return compile(std::move(model), options);
  });
}

Expected<std::unique_ptr<Session>> session_from_model(ir::Model&& model,
                                                      const SessionOptions& options) {
  return guarded("model", [&] { return Session::compile(std::move(model), options); });
}

Expected<std::unique_ptr<Session>> Session::compile(ir::Model model,
                                                    const SessionOptions& options) {
  std::unique_ptr<Session> s(new Session());
  s->options_ = options;
  s->model_ = std::make_unique<ir::Model>(std::move(model));
  ir::Graph& g = s->model_->graph;
  for (const auto& [dim, value] : options.dim_values) {
    if (value < 0) return invalid_input("dim '" + dim + "': value " + std::to_string(value) + " is negative");
    bool used = false;
    for (const auto& name : g.inputs) {
      ir::ValueType& t = g.values[name].type;
      for (size_t i = 0; t.is_tensor() && t.has_shape && i < t.dims.size(); ++i)
        if (t.dims[i] < 0 && i < t.dim_names.size() && t.dim_names[i] == dim) {
          t.dims[i] = value;
          t.dim_names[i].clear();
          used = true;
        }
    }
    if (!used) return invalid_input("dim '" + dim + "' is not a symbolic dim of any model input");
  }
  // Profiles against the model as declared, then (below) against the shapes input_shapes fix:
  // the CLI turns a profile's OPT into an input shape, and a bad profile is the error to show.
  for (const auto& [name, profile] : options.shape_profiles)
    PG_RETURN_IF_ERROR(check_shape_profile(g, name, profile));
  for (const auto& [name, shape] : options.input_shapes) {
    ir::Value* v = g.values.count(name) ? &g.values[name] : nullptr;
    bool is_input = std::find(g.inputs.begin(), g.inputs.end(), name) != g.inputs.end();
    if (!v || !is_input) return invalid_input("--shape: '" + name + "' is not an input of the model");
    if (v->type.is_tensor() && v->type.has_shape && v->type.dims.size() != shape.size())
      return invalid_input("--shape: input '" + name + "' has rank " +
                           std::to_string(v->type.dims.size()) + ", given " + shape_to_string(shape));
    for (size_t i = 0; v->type.has_shape && i < shape.size(); ++i)
      if (v->type.dims[i] >= 0 && v->type.dims[i] != shape[i])
        return invalid_input("--shape: input '" + name + "' dim " + std::to_string(i) + " is fixed at " +
                             std::to_string(v->type.dims[i]) + ", given " + std::to_string(shape[i]));
    DType dtype = v->type.dtype;
    v->type = ir::ValueType::tensor(dtype, shape);
  }
  for (const auto& [name, profile] : options.shape_profiles)
    PG_RETURN_IF_ERROR(check_shape_profile(g, name, profile));
  PG_ASSIGN_OR_RETURN(std::vector<const Backend*> backends, backends_for(options.backend));
  PG_RETURN_IF_ERROR(check_precision(options, backends));
  // The outputs' symbolic dim names as the model declares them (inference may drop them).
  std::map<std::string, std::vector<std::string>> declared_dim_names;
  for (const auto& n : g.outputs)
    if (const ir::Value* v = g.find_value(n)) declared_dim_names[n] = v->type.dim_names;
  PG_RETURN_IF_ERROR(infer_graph_types(g, reference_evaluator()).status());
  PG_RETURN_IF_ERROR(run_graph_passes(*s->model_, options));
  // Weights the kernels hold packed are freed as they are packed (values keep dtype and shape:
  // inspect still counts them), so peak memory holds one copy of them.
  const int64_t budget =
      options.memory_limit_bytes == 0 ? default_memory_budget() : options.memory_limit_bytes;
  PG_ASSIGN_OR_RETURN(
      s->executor_, GraphExecutor::create(g, backends, options.num_threads, options.memory_plan, &g,
                                          budget, options.kernel_cache.get()));
  s->idle_.push_back(s->executor_.get());
  for (const auto& n : g.inputs) s->inputs_.push_back(io_info(g, n));
  for (const auto& n : g.outputs) {
    IoInfo info = io_info(g, n);
    const std::vector<std::string>& declared = declared_dim_names[n];
    for (size_t i = 0; i < info.shape.size() && i < declared.size(); ++i)
      if (info.shape[i] < 0 && info.dim_names[i].empty()) info.dim_names[i] = declared[i];
    s->outputs_.push_back(std::move(info));
  }
  return s;
}

Expected<std::vector<RuntimeValue>> Session::run_values(
    const std::map<std::string, RuntimeValue>& inputs, std::vector<NodeTiming>* timings) {
  for (const auto& info : inputs_) {
    auto it = inputs.find(info.name);
    if (it == inputs.end()) return invalid_input("input '" + info.name + "' was not given");
    const RuntimeValue& v = it->second;
    if (info.is_tensor && v.is_tensor()) {
      if (info.dtype != DType::kUndefined && v.tensor.dtype() != info.dtype)
        return invalid_input("input '" + info.name + "' has type " +
                             std::string(dtype_name(v.tensor.dtype())) + ", the model expects " +
                             std::string(dtype_name(info.dtype)));
      if (!info.shape.empty() || v.tensor.rank() == 0) {
        bool ok = info.shape.size() == static_cast<size_t>(v.tensor.rank());
        for (size_t i = 0; ok && i < info.shape.size(); ++i)
          ok = info.shape[i] < 0 || info.shape[i] == v.tensor.dim(static_cast<int64_t>(i));
        if (!ok)
          return invalid_input("input '" + info.name + "' has shape " +
                               shape_to_string(v.tensor.shape()) + ", the model expects " + info.type);
      }
    }
  }
  for (const auto& [name, v] : inputs) {
    bool known = false;
    for (const auto& info : inputs_) known |= info.name == name;
    if (!known) return invalid_input("'" + name + "' is not an input of the model");
    auto profile = options_.shape_profiles.find(name);
    if (profile != options_.shape_profiles.end() && v.is_tensor())
      PG_RETURN_IF_ERROR(check_in_profile(name, v.tensor, profile->second));
  }
  return guarded("run", [&]() -> Expected<std::vector<RuntimeValue>> {
    PG_ASSIGN_OR_RETURN(GraphExecutor * executor, acquire_executor());
    const ExecutorLease lease(executor, [this](GraphExecutor* e) { release_executor(e); });
    return executor->run(inputs, nullptr, timings);
  });
}

Expected<GraphExecutor*> Session::acquire_executor() {
  std::lock_guard<std::mutex> lock(executors_mutex_);
  if (idle_.empty()) {
    PG_ASSIGN_OR_RETURN(auto replica, executor_->replicate());
    replicas_.push_back(std::move(replica));
    return replicas_.back().get();
  }
  GraphExecutor* executor = idle_.back();
  idle_.pop_back();
  return executor;
}

void Session::release_executor(GraphExecutor* executor) {
  std::lock_guard<std::mutex> lock(executors_mutex_);
  idle_.push_back(executor);
}

Expected<std::map<std::string, Tensor>> Session::run(const std::map<std::string, Tensor>& inputs) {
  std::map<std::string, RuntimeValue> values;
  for (const auto& [k, t] : inputs) values[k] = RuntimeValue::of(t);
  PG_ASSIGN_OR_RETURN(auto outs, run_values(values));
  std::map<std::string, Tensor> result;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].is_tensor())
      return unsupported("output '" + outputs_[i].name + "' is not a tensor; use run_values");
    result[outputs_[i].name] = outs[i].tensor;
  }
  return result;
}

Status Session::run_into(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  for (size_t i = 0; !options_.shape_profiles.empty() && i < inputs.size() && i < inputs_.size();
       ++i) {
    auto profile = options_.shape_profiles.find(inputs_[i].name);
    if (profile != options_.shape_profiles.end())
      PG_RETURN_IF_ERROR(check_in_profile(inputs_[i].name, inputs[i], profile->second));
  }
  // The executor checks dtypes and shapes itself.
  return guarded("run", [&]() -> Status {
    PG_ASSIGN_OR_RETURN(GraphExecutor * executor, acquire_executor());
    const ExecutorLease lease(executor, [this](GraphExecutor* e) { release_executor(e); });
    return executor->run_into(inputs, outputs);
  });
}

std::vector<NodeKernel> Session::node_kernels() const {
  std::vector<NodeKernel> out;
  const std::vector<std::string> names = executor_->kernel_names();
  const ir::Graph& g = executor_->graph();
  for (size_t i = 0; i < g.nodes.size() && i < names.size(); ++i) {
    const ir::Node& n = *g.nodes[i];
    const cpu::CpuKernelEntry* e = cpu::find_cpu_kernel(n);
    out.push_back({n.name, (n.domain.empty() ? "" : n.domain + ".") + n.op_type, names[i],
                   e && names[i] != "reference" ? std::string(e->source) : std::string()});
  }
  return out;
}

MemoryPlanStats Session::memory_plan_stats() const {
  MemoryPlanStats stats;
  if (const planner::MemoryPlan* p = executor_->memory_plan()) {
    stats.arena_bytes = p->arena_bytes;
    stats.lower_bound_bytes = p->lower_bound_bytes;
    stats.unshared_bytes = p->unshared_bytes;
    stats.planned_values = static_cast<int64_t>(p->values.size());
    stats.in_place_steps = p->in_place_steps;
    stats.concat_slices = p->concat_slices;
  }
  return stats;
}

}  // namespace peregrine

namespace peregrine {

const ir::Model& session_model(const Session& session) { return *session.model_; }

}  // namespace peregrine
