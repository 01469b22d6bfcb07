// peregrine._peregrine: the C++ Session for Python. The ONNX Runtime-shaped API is written in
// Python (python/peregrine/); this module converts arrays (zero-copy both ways where the
// storage allows), releases the GIL while a model runs, turns Status errors into Python
// exceptions, and keeps compiled plans per input-shape signature (ShapePlans below).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "core/json_text.h"
#include "ir/graph.h"
#include "peregrine/precision.h"
#include "peregrine/session.h"
#include "profiler/trace.h"
#include "runtime/executor.h"
#include "runtime/kernel_cache.h"
#include "runtime/session_internals.h"

namespace nb = nanobind;

namespace peregrine::python {
namespace {

// One C++ exception type per Status code; each is registered as a Python exception class.
struct PeregrineError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct InvalidArgumentError : PeregrineError {
  using PeregrineError::PeregrineError;
};
struct InvalidGraphError : PeregrineError {
  using PeregrineError::PeregrineError;
};
struct NotImplementedError : PeregrineError {
  using PeregrineError::PeregrineError;
};

[[noreturn]] void raise(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidInput: throw InvalidArgumentError(s.message());
    case StatusCode::kInvalidModel: throw InvalidGraphError(s.message());
    case StatusCode::kUnsupported: throw NotImplementedError(s.message());
    default: throw PeregrineError(s.message());
  }
}

template <typename T>
T value_or_raise(Expected<T> e) {
  if (!e.is_ok()) raise(e.status());
  return std::move(*e);
}

// numpy (DLPack) element type <-> DType. kUndefined: no numpy equivalent.
DType dtype_of(nb::dlpack::dtype t) {
  using Code = nb::dlpack::dtype_code;
  if (t.lanes != 1) return DType::kUndefined;
  switch (static_cast<Code>(t.code)) {
    case Code::Float:
      return t.bits == 16 ? DType::kFloat16 : t.bits == 32 ? DType::kFloat32
                                              : t.bits == 64 ? DType::kFloat64 : DType::kUndefined;
    case Code::Int:
      return t.bits == 8 ? DType::kInt8 : t.bits == 16 ? DType::kInt16
                                        : t.bits == 32 ? DType::kInt32
                                        : t.bits == 64 ? DType::kInt64 : DType::kUndefined;
    case Code::UInt:
      return t.bits == 8 ? DType::kUInt8 : t.bits == 16 ? DType::kUInt16
                                         : t.bits == 32 ? DType::kUInt32
                                         : t.bits == 64 ? DType::kUInt64 : DType::kUndefined;
    case Code::Bool: return t.bits == 8 ? DType::kBool : DType::kUndefined;
    case Code::Complex:
      return t.bits == 64 ? DType::kComplex64 : t.bits == 128 ? DType::kComplex128
                                                              : DType::kUndefined;
    default: return DType::kUndefined;
  }
}

bool dlpack_of(DType d, nb::dlpack::dtype* out) {
  using Code = nb::dlpack::dtype_code;
  auto set = [&](Code c, int bits) {
    *out = nb::dlpack::dtype{static_cast<uint8_t>(c), static_cast<uint8_t>(bits), 1};
    return true;
  };
  switch (d) {
    case DType::kFloat16: return set(Code::Float, 16);
    case DType::kFloat32: return set(Code::Float, 32);
    case DType::kFloat64: return set(Code::Float, 64);
    case DType::kInt8: return set(Code::Int, 8);
    case DType::kInt16: return set(Code::Int, 16);
    case DType::kInt32: return set(Code::Int, 32);
    case DType::kInt64: return set(Code::Int, 64);
    case DType::kUInt8: return set(Code::UInt, 8);
    case DType::kUInt16: return set(Code::UInt, 16);
    case DType::kUInt32: return set(Code::UInt, 32);
    case DType::kUInt64: return set(Code::UInt, 64);
    case DType::kBool: return set(Code::Bool, 8);
    case DType::kComplex64: return set(Code::Complex, 64);
    case DType::kComplex128: return set(Code::Complex, 128);
    default: return false;
  }
}

using InputArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

// A C-contiguous numpy array as a Tensor over the same memory (no copy). The caller keeps the
// array alive for the run.
Tensor tensor_view_of(const std::string& name, const InputArray& a) {
  const DType d = dtype_of(a.dtype());
  if (d == DType::kUndefined)
    throw InvalidArgumentError("input '" + name + "': numpy element type has no ONNX equivalent");
  Shape shape(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) shape[i] = static_cast<int64_t>(a.shape(i));
  return Tensor::view(d, shape, const_cast<void*>(a.data()));
}

// A byte range [begin, end) of memory the caller or the session owns.
struct Range {
  const uint8_t* begin;
  const uint8_t* end;
  bool overlaps(const Tensor& t) const {
    const auto* p = static_cast<const uint8_t*>(t.raw());
    return p && p < end && p + t.nbytes() > begin;
  }
};

Range range_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw());
  return {p, p + t.nbytes()};
}

// One output tensor as a numpy array that owns a reference to the tensor's storage (no copy).
// `must_copy`: the storage belongs to someone else (an input array, a weight of the session).
nb::object to_numpy(const std::string& name, Tensor t, bool must_copy) {
  if (t.dtype() == DType::kString) {
    nb::list items;
    for (const auto& s : t.strings()) items.append(nb::bytes(s.data(), s.size()));
    return nb::make_tuple(items, nb::cast(t.shape()));  // the Python side makes the array
  }
  if (t.dtype() == DType::kBFloat16) {  // numpy has no bfloat16: widen
    Tensor f = Tensor::zeros(DType::kFloat32, t.shape());
    const auto* src = t.data<uint16_t>();
    float* dst = f.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      const uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
      std::memcpy(&dst[i], &bits, 4);
    }
    t = f;
    must_copy = false;
  }
  nb::dlpack::dtype dt;
  if (!dlpack_of(t.dtype(), &dt))
    throw NotImplementedError("output '" + name + "' has type " +
                              std::string(dtype_name(t.dtype())) + ", which numpy cannot hold");
  if (must_copy) t = t.clone();
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  auto* owned = new Tensor(t);
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  nb::ndarray<nb::numpy> array(owned->raw(), shape.size(), shape.data(), owner, nullptr, dt);
  return array.cast();
}

using Signature = std::vector<Shape>;

// A session for Python: the model compiled as declared (symbolic dims stay dynamic), plus up to
// `max_plans` sessions compiled for input shapes that came back (a shape seen a second time is
// compiled with those shapes fixed: constant shape subgraphs fold and the arena is planned).
// A shape seen once runs on the dynamic session, so inputs whose size changes on every call
// (an OCR crop per word) never pay a compile. Every plan takes its kernels from one kernel
// cache (runtime/kernel_cache.h): the weights are packed once, by the first plan that needs them.
class PySession {
 public:
  PySession(nb::object model, const SessionOptions& options, int max_plans)
      : options_(options), max_plans_(max_plans) {
    if (!options_.kernel_cache) options_.kernel_cache = make_kernel_cache();
    if (nb::isinstance<nb::bytes>(model)) {
      nb::bytes b = nb::borrow<nb::bytes>(model);
      bytes_.assign(b.c_str(), b.size());
      from_bytes_ = true;
    } else {
      path_ = nb::cast<std::string>(model);
    }
    nb::gil_scoped_release release;
    base_ = value_or_raise(compile(options_));
    for (const auto& io : base_->inputs())
      dynamic_ |= io.is_tensor && std::any_of(io.shape.begin(), io.shape.end(),
                                               [](int64_t d) { return d < 0; });
    for (const auto& [name, v] : session_model(*base_).graph.values)
      if (v.initializer && v.initializer->raw() && v.initializer->dtype() != DType::kString)
        weights_.push_back(range_of(*v.initializer));
    compile_profile_plans();
  }

  const Session& base() const { return *base_; }

  // arrays: name -> C-contiguous array; strings: name -> (list of str, shape); sequences:
  // name -> list of arrays; absent: names of optional inputs given as None.
  // Returns every graph output in order.
  nb::list run(const std::map<std::string, InputArray>& arrays,
               const std::map<std::string, std::pair<std::vector<std::string>, Shape>>& strings,
               const std::map<std::string, std::vector<InputArray>>& sequences,
               const std::vector<std::string>& absent) {
    std::map<std::string, RuntimeValue> inputs;
    std::vector<Range> input_ranges;
    for (const auto& [name, a] : arrays) {
      Tensor t = tensor_view_of(name, a);
      input_ranges.push_back(range_of(t));
      inputs[name] = RuntimeValue::of(std::move(t));
    }
    for (const auto& [name, s] : strings) {
      Tensor t = value_or_raise(Tensor::make(DType::kString, s.second));
      if (static_cast<size_t>(t.numel()) != s.first.size())
        throw InvalidArgumentError("input '" + name + "': string count does not match its shape");
      t.strings() = s.first;
      inputs[name] = RuntimeValue::of(std::move(t));
    }
    for (const auto& [name, items] : sequences) {
      std::vector<Tensor> tensors;
      for (const auto& a : items) {
        tensors.push_back(tensor_view_of(name, a));
        input_ranges.push_back(range_of(tensors.back()));
      }
      inputs[name] = RuntimeValue::of_sequence(std::move(tensors));
    }
    for (const auto& name : absent) {
      RuntimeValue none = RuntimeValue::none();
      none.is_optional = true;
      inputs[name] = none;
    }
    std::vector<RuntimeValue> outputs;
    {
      nb::gil_scoped_release release;
      // Shared: another thread may evict the plan while this run is on it.
      std::shared_ptr<Session> s = session_for(inputs);
      std::vector<NodeTiming> timings;
      const auto start = Clock::now();
      auto result = s->run_values(inputs, profiling_ ? &timings : nullptr);
      if (!result.is_ok()) raise(result.status());
      outputs = std::move(*result);
      if (profiling_) record_trace(*s, start, Clock::now(), timings);
    }
    nb::list out;
    const auto& infos = base_->outputs();
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::string& name = infos[i].name;
      RuntimeValue& v = outputs[i];
      if (v.is_none()) {
        out.append(nb::none());
      } else if (v.is_sequence()) {
        nb::list items;
        for (Tensor& t : v.sequence) items.append(to_numpy(name, t, must_copy(t, input_ranges)));
        out.append(items);
      } else {
        out.append(to_numpy(name, v.tensor, must_copy(v.tensor, input_ranges)));
      }
    }
    return out;
  }

  void start_profiling() {
    std::lock_guard<std::mutex> lock(mutex_);
    profiling_ = true;
    trace_ = profiler::Trace{};
    trace_origin_ = Clock::now();
  }

  // Stops profiling and writes the Chrome trace to `path` (never over an existing file).
  std::string end_profiling(const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!profiling_) return "";
    profiling_ = false;
    trace_.process_name = "peregrine " + (from_bytes_ ? std::string("<model bytes>") : path_);
    trace_.threads.push_back({0, "run"});
    Status w = write_file_atomically(path, profiler::trace_to_json(trace_));
    if (!w.is_ok()) raise(w);
    return path;
  }

  nb::dict plan_stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    nb::dict d;
    size_t compiled = 0;
    for (const Plan& p : plans_) compiled += p.session != nullptr;
    d["plans"] = compiled;
    d["signatures"] = plans_.size();
    d["compiles"] = compiles_;
    d["dynamic_runs"] = dynamic_runs_;
    d["planned_runs"] = planned_runs_;
    d["max_plans"] = max_plans_;
    d["shared_kernels"] = options_.kernel_cache->hits();  // nodes that reused a kernel
    d["cached_kernels"] = options_.kernel_cache->kernels();
    return d;
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Plan {
    Signature signature;
    int sightings = 0;
    bool compile_failed = false;       // stays on the dynamic plan
    std::shared_ptr<Session> session;  // null until seen twice (or after eviction)
  };

  Expected<std::unique_ptr<Session>> compile(const SessionOptions& options) const {
    return from_bytes_ ? Session::load_from_bytes(bytes_, options) : Session::load(path_, options);
  }

  // The plan of one input-shape signature: the model compiled with those shapes fixed.
  Expected<std::unique_ptr<Session>> compile_plan(const Signature& sig) {
    SessionOptions fixed = options_;
    for (size_t i = 0; i < sig.size(); ++i) fixed.input_shapes[base_->inputs()[i].name] = sig[i];
    ++compiles_;
    return compile(fixed);
  }

  bool must_copy(const Tensor& t, const std::vector<Range>& inputs) const {
    for (const Range& r : inputs)
      if (r.overlaps(t)) return true;
    for (const Range& r : weights_)
      if (r.overlaps(t)) return true;
    return false;
  }

  // Shape profiles: the plans of their min, opt and max shapes, compiled now (opt last, so it
  // is the most recently used), where every input of unknown shape has a profile.
  void compile_profile_plans() {
    if (!dynamic_ || max_plans_ <= 0 || options_.shape_profiles.empty()) return;
    std::vector<Signature> signatures(3);
    for (const auto& io : base_->inputs()) {
      auto p = options_.shape_profiles.find(io.name);
      const bool known = io.is_tensor && std::all_of(io.shape.begin(), io.shape.end(),
                                                     [](int64_t d) { return d >= 0; });
      if (p == options_.shape_profiles.end() && !known) return;
      for (int k = 0; k < 3; ++k)
        signatures[static_cast<size_t>(k)].push_back(p == options_.shape_profiles.end() ? io.shape
                                                     : k == 0 ? p->second.max
                                                     : k == 1 ? p->second.min
                                                              : p->second.opt);
    }
    for (const Signature& sig : signatures) {
      if (std::any_of(plans_.begin(), plans_.end(),
                      [&](const Plan& p) { return p.signature == sig; }))
        continue;
      std::shared_ptr<Session> s = value_or_raise(compile_plan(sig));
      plans_.push_front(Plan{sig, 2, false, std::move(s)});
      if (plans_.size() > static_cast<size_t>(max_plans_)) plans_.pop_back();
    }
  }

  // The session to run these inputs on (GIL released; plans_ guarded by mutex_).
  std::shared_ptr<Session> session_for(const std::map<std::string, RuntimeValue>& inputs) {
    if (!dynamic_ || max_plans_ <= 0) return base_;
    Signature sig;
    for (const auto& io : base_->inputs()) {
      auto it = inputs.find(io.name);
      if (it == inputs.end() || !it->second.is_tensor()) return base_;  // run() reports it
      sig.push_back(it->second.tensor.shape());
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = std::find_if(plans_.begin(), plans_.end(),
                           [&](const Plan& p) { return p.signature == sig; });
    if (it == plans_.end()) {
      plans_.push_front(Plan{sig, 0, false, nullptr});
      it = plans_.begin();
      // Bounded: the least recently used signature goes (with its compiled session).
      if (plans_.size() > static_cast<size_t>(2 * max_plans_)) plans_.pop_back();
    } else {
      plans_.splice(plans_.begin(), plans_, it);  // most recently used first
      it = plans_.begin();
    }
    if (++it->sightings >= 2 && !it->session && !it->compile_failed) {
      auto s = compile_plan(sig);
      if (s.is_ok()) it->session = std::move(*s);
      else it->compile_failed = true;
      size_t compiled = 0;
      for (auto& p : plans_)
        if (p.session && ++compiled > static_cast<size_t>(max_plans_)) p.session.reset();
    }
    if (it->session) {
      ++planned_runs_;
      return it->session;
    }
    ++dynamic_runs_;
    return base_;
  }

  void record_trace(const Session& session, Clock::time_point start, Clock::time_point end,
                    const std::vector<NodeTiming>& timings) {
    const auto& nodes = session_model(session).graph.nodes;
    std::lock_guard<std::mutex> lock(mutex_);
    auto micros = [](Clock::duration d) {
      return std::chrono::duration<double, std::micro>(d).count();
    };
    const double run_us = micros(start - trace_origin_);
    trace_.events.push_back({"run", "run", run_us, micros(end - start), 0, 0, {}});
    for (const NodeTiming& t : timings) {
      if (t.node >= nodes.size()) continue;
      const ir::Node& n = *nodes[t.node];
      trace_.events.push_back(
          {n.name.empty() ? n.op_type : n.name,
           "node",
           run_us + t.start_us,
           t.duration_us,
           0,
           0,
           {{"op_type", json_string(n.op_type)}, {"kernel", json_string(t.kernel)}}});
    }
  }

  SessionOptions options_;
  int max_plans_;
  std::string path_, bytes_;
  bool from_bytes_ = false;
  bool dynamic_ = false;
  std::shared_ptr<Session> base_;
  std::vector<Range> weights_;  // initializers still holding data: outputs there are copied
  mutable std::mutex mutex_;
  std::list<Plan> plans_;
  int64_t compiles_ = 0, dynamic_runs_ = 0, planned_runs_ = 0;
  std::atomic<bool> profiling_{false};
  profiler::Trace trace_;
  Clock::time_point trace_origin_;
};

nb::dict io_dict(const IoInfo& io) {
  nb::dict d;
  d["name"] = io.name;
  d["type"] = io.type;
  d["dtype"] = std::string(dtype_name(io.dtype));
  d["is_tensor"] = io.is_tensor;
  d["shape"] = io.shape;
  d["dim_names"] = io.dim_names;
  return d;
}

}  // namespace
}  // namespace peregrine::python

NB_MODULE(_peregrine, m) {
  using namespace peregrine;
  using namespace peregrine::python;
  m.doc() = "Peregrine's C++ engine (use the peregrine package, not this module).";

  nb::object base = nb::exception<PeregrineError>(m, "PeregrineError", PyExc_RuntimeError);
  nb::exception<InvalidArgumentError>(m, "InvalidArgument",
                                      nb::make_tuple(base, nb::handle(PyExc_ValueError)));
  nb::exception<InvalidGraphError>(m, "InvalidGraph", base);
  nb::exception<NotImplementedError>(
      m, "NotImplemented", nb::make_tuple(base, nb::handle(PyExc_NotImplementedError)));

  nb::class_<SessionOptions>(m, "_Options")
      .def(nb::init<>())
      .def_rw("num_threads", &SessionOptions::num_threads)
      .def_rw("backend", &SessionOptions::backend)
      .def_rw("opt_level", &SessionOptions::opt_level)
      .def_rw("disabled_passes", &SessionOptions::disabled_passes)
      .def_rw("memory_plan", &SessionOptions::memory_plan)
      .def_rw("keep_fp32", &SessionOptions::keep_fp32)
      .def_rw("input_shapes", &SessionOptions::input_shapes)
      .def_rw("dim_values", &SessionOptions::dim_values)
      .def_rw("memory_limit_bytes", &SessionOptions::memory_limit_bytes)
      .def("set_shape_profile",
           [](SessionOptions& o, const std::string& name, const Shape& min, const Shape& opt,
              const Shape& max) {
             o.shape_profiles[name] = ShapeProfile{min, opt, max};
           })
      .def("set_precision", [](SessionOptions& o, const std::string& p) {
        o.precision = value_or_raise(parse_precision(p));
      });

  nb::class_<PySession>(m, "_Session")
      .def(nb::init<nb::object, const SessionOptions&, int>(), nb::arg("model"), nb::arg("options"),
           nb::arg("max_plans"))
      .def("run", &PySession::run, nb::arg("arrays"), nb::arg("strings"), nb::arg("sequences"),
           nb::arg("absent"))
      .def("inputs",
           [](const PySession& s) {
             nb::list l;
             for (const auto& io : s.base().inputs()) l.append(io_dict(io));
             return l;
           })
      .def("outputs",
           [](const PySession& s) {
             nb::list l;
             for (const auto& io : s.base().outputs()) l.append(io_dict(io));
             return l;
           })
      .def("metadata",
           [](const PySession& s) {
             const ir::Model& m = session_model(s.base());
             nb::dict d;
             d["producer_name"] = m.producer_name;
             d["producer_version"] = m.producer_version;
             d["domain"] = m.domain;
             d["version"] = m.model_version;
             d["description"] = m.doc_string;
             d["graph_name"] = m.graph.name;
             d["graph_description"] = m.graph_doc_string;
             d["custom_metadata_map"] = m.metadata_props;
             return d;
           })
      .def("node_kernels",
           [](const PySession& s) {
             nb::list l;
             for (const auto& k : s.base().node_kernels())
               l.append(nb::make_tuple(k.node, k.op_type, k.kernel));
             return l;
           })
      .def("start_profiling", &PySession::start_profiling)
      .def("end_profiling", &PySession::end_profiling, nb::arg("path"))
      .def("plan_stats", &PySession::plan_stats);
}
