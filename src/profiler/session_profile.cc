#include "profiler/session_profile.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "core/json_text.h"
#include "ir/graph.h"
#include "ops/op_schema.h"
#include "peregrine/session.h"
#include "runtime/executor.h"
#include "runtime/session_internals.h"

namespace peregrine::profiler {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string op_label(const ir::Node& n) {
  return (n.domain.empty() ? "" : n.domain + ".") + n.op_type;
}

// Static types of a node's inputs/outputs as the cost model wants them, and whether
// all of them were known (otherwise FLOPs/bytes undercount).
struct StaticTypes {
  std::vector<ir::ValueType> inputs, outputs;
  bool all_static = true;
};

StaticTypes static_types(const ir::Graph& g, const ir::Node& n) {
  StaticTypes t;
  auto collect = [&](const std::vector<std::string>& names, std::vector<ir::ValueType>* out) {
    for (const auto& name : names) {
      const ir::Value* v = name.empty() ? nullptr : g.find_value(name);
      out->push_back(v ? v->type : ir::ValueType{});
      if (!name.empty() && (!v || (v->type.is_tensor() && !v->type.is_static())))
        t.all_static = false;
    }
  };
  collect(n.inputs, &t.inputs);
  collect(n.outputs, &t.outputs);
  return t;
}

std::string types_text(const std::vector<ir::ValueType>& types,
                       const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < types.size(); ++i) {
    if (i) s += ", ";
    s += names[i].empty() ? "-" : types[i].to_string();
  }
  return s;
}

}  // namespace

Expected<SessionProfile> profile_session(Session& session,
                                         const std::map<std::string, RuntimeValue>& inputs,
                                         int iterations, const PrecisionRoofs& roofs,
                                         size_t bottleneck_count) {
  const ir::Graph& graph = session_model(session).graph;
  // Warm-up (first-touch allocation, caches), then interleaved untimed / timed runs.
  {
    auto warm = session.run_values(inputs);
    if (!warm.is_ok()) return warm.status();
  }
  using Clock = std::chrono::steady_clock;
  const auto origin = Clock::now();
  SessionProfile p;
  p.pid = current_process_id();
  p.tid = current_thread_id();
  p.node_samples_us.resize(graph.nodes.size());
  std::vector<std::string> node_kernel(graph.nodes.size());
  std::vector<double> untimed_ms;
  std::vector<NodeTiming> timings;
  const auto micros = [](Clock::duration d) {
    return std::chrono::duration<double, std::micro>(d).count();
  };
  for (int it = 0; it < iterations; ++it) {
    for (int half = 0; half < 2; ++half) {
      const bool timed = (half == 0) == (it % 2 == 1);
      timings.clear();
      const auto start = Clock::now();
      auto out = session.run_values(inputs, timed ? &timings : nullptr);
      const auto end = Clock::now();
      if (!out.is_ok()) return out.status();
      (timed ? p.timed_ms : untimed_ms).push_back(micros(end - start) / 1e3);
      if (!timed) continue;
      const double run_start_us = micros(start - origin);
      p.run_spans.push_back({run_start_us, micros(end - start)});
      for (const NodeTiming& t : timings) {
        if (t.node >= graph.nodes.size()) continue;
        p.node_samples_us[t.node].push_back(t.duration_us);
        node_kernel[t.node] = t.kernel;
        p.node_spans.push_back({t.node, {run_start_us + t.start_us, t.duration_us}});
      }
    }
  }

  // Per-node results.
  const SchemaRegistry& schemas = SchemaRegistry::global();
  ProfileReport& report = p.report;
  report.iterations = iterations;
  report.roofs = roofs.fp32;
  report.latency_median_ms = median(p.timed_ms);
  report.latency_untimed_median_ms = median(untimed_ms);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& node = *graph.nodes[i];
    const std::vector<double>& samples = p.node_samples_us[i];
    if (samples.empty()) continue;  // never ran: nothing to profile
    const StaticTypes types = static_types(graph, node);
    const OpSchema* schema = schemas.find(node.domain, node.op_type);
    const OpCost cost = schema && schema->cost ? schema->cost(node, types.inputs, types.outputs)
                                               : default_cost(types.inputs, types.outputs);
    NodeProfile n;
    n.index = i;
    n.name = node.name;
    n.op_type = op_label(node);
    n.kernel = node_kernel[i];
    n.input_shapes = types_text(types.inputs, node.inputs);
    n.output_shapes = types_text(types.outputs, node.outputs);
    n.median_us = median(samples);
    n.min_us = *std::min_element(samples.begin(), samples.end());
    n.cost_known = types.all_static;
    // A node whose kernel computes in bf16 or on 8-bit integers has that dot product's peak
    // as its roof (the kernel's name says which).
    const Roofs& node_roofs =
        n.kernel.find("bf16") != std::string::npos && roofs.bf16.peak_gflops > 0 ? roofs.bf16
        : is_int8_kernel(n.kernel) && roofs.int8.peak_gflops > 0                 ? roofs.int8
                                                                                 : roofs.fp32;
    n.roof =
        analyze(cost.flops, cost.bytes_read + cost.bytes_written, n.median_us / 1e6, node_roofs);
    n.reason = bottleneck_reason(n.roof, node_roofs);
    report.nodes.push_back(std::move(n));
  }
  report.op_totals = totals_by_op_type(report.nodes);
  report.bottlenecks = top_bottlenecks(report.nodes, bottleneck_count);
  p.overhead_percent = report.latency_untimed_median_ms > 0
                           ? 100 * (report.latency_median_ms - report.latency_untimed_median_ms) /
                                 report.latency_untimed_median_ms
                           : 0;
  return p;
}

Trace session_trace(const SessionProfile& p, const std::string& process_name,
                    std::vector<TraceArg> metadata) {
  Trace trace;
  trace.pid = p.pid;
  trace.process_name = process_name;
  trace.threads.push_back({p.tid, "executor"});
  std::unordered_map<size_t, const NodeProfile*> by_index;
  for (const auto& n : p.report.nodes) by_index[n.index] = &n;
  for (size_t k = 0; k < p.run_spans.size(); ++k)
    trace.events.push_back({"run " + std::to_string(k),
                            "run",
                            p.run_spans[k].start_us,
                            p.run_spans[k].dur_us,
                            p.pid,
                            p.tid,
                            {{"iteration", std::to_string(k)}}});
  for (const auto& [i, span] : p.node_spans) {
    const NodeProfile& n = *by_index.at(i);
    trace.events.push_back({n.name.empty() ? n.op_type : n.name,
                            "node",
                            span.start_us,
                            span.dur_us,
                            p.pid,
                            p.tid,
                            {{"op_type", json_string(n.op_type)},
                             {"kernel", json_string(n.kernel)},
                             {"inputs", json_string(n.input_shapes)},
                             {"outputs", json_string(n.output_shapes)},
                             {"flops", json_number(n.roof.flops)},
                             {"bytes", json_number(n.roof.bytes)}}});
  }
  trace.metadata = std::move(metadata);
  return trace;
}

}  // namespace peregrine::profiler
