// peregrine compare-precision MODEL --precision P: how far a reduced precision moves a model's
// outputs. Runs the model at fp32 and at P on the same inputs and reports, per float32 output,
// the cosine similarity, the largest absolute and relative errors and the signal-to-noise ratio.
// With --per-layer, each node that P applies to is run at P alone (every other node fp32) and
// the nodes are listed by the SNR of the outputs, worst first: the ones to keep with
// --keep-fp32.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "cli_common.h"
#include "model_inputs.h"
#include "peregrine/session.h"

namespace peregrine::cli {

namespace {

struct Deviation {
  double cosine = 1.0, max_abs = 0.0, max_rel = 0.0;
  double snr_db = std::numeric_limits<double>::infinity();
};

// `got` against `want` (same shape, float32). max_rel over elements whose reference is at
// least 1e-3 of the largest reference magnitude (smaller ones make relative error noise).
Deviation deviation(const Tensor& got, const Tensor& want) {
  Deviation d;
  const float* g = got.data<float>();
  const float* w = want.data<float>();
  double dot = 0, gg = 0, ww = 0, err = 0, peak = 0;
  for (int64_t i = 0; i < want.numel(); ++i) peak = std::max(peak, std::fabs(double{w[i]}));
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double a = g[i], b = w[i], e = a - b;
    dot += a * b, gg += a * a, ww += b * b, err += e * e;
    d.max_abs = std::max(d.max_abs, std::fabs(e));
    if (std::fabs(b) >= 1e-3 * peak && peak > 0) d.max_rel = std::max(d.max_rel, std::fabs(e / b));
  }
  d.cosine = gg > 0 && ww > 0 ? dot / std::sqrt(gg * ww) : (gg == ww ? 1.0 : 0.0);
  if (err > 0)
    d.snr_db = ww > 0 ? 10.0 * std::log10(ww / err) : -std::numeric_limits<double>::infinity();
  if (std::isnan(err)) d.snr_db = d.cosine = std::numeric_limits<double>::quiet_NaN();
  return d;
}

Expected<std::map<std::string, Tensor>> run_with(const std::string& model,
                                                 const SessionOptions& options,
                                                 const std::map<std::string, Tensor>& inputs) {
  PG_ASSIGN_OR_RETURN(auto session, Session::load(model, options));
  return session->run(inputs);
}

// Per float32 output (in `names` order) its deviation; the worst SNR in *worst.
std::vector<Deviation> compare_outputs(const std::vector<std::string>& names,
                                       const std::map<std::string, Tensor>& got,
                                       const std::map<std::string, Tensor>& want,
                                       Deviation* worst) {
  std::vector<Deviation> out;
  *worst = Deviation();
  for (const std::string& n : names) {
    const Tensor& w = want.at(n);
    if (w.dtype() != DType::kFloat32) {
      out.emplace_back();
      continue;
    }
    out.push_back(deviation(got.at(n), w));
    const Deviation& d = out.back();
    if (!(d.snr_db >= worst->snr_db)) *worst = d;  // NaN counts as worst
  }
  return out;
}

std::string db(double v) {
  char buf[32];
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace

int cmd_compare_precision(int argc, char** argv) {
  Args args("compare-precision", "MODEL --precision P [options]");
  add_model_input_flags(&args);
  add_engine_flags(&args);
  args.toggle("per-layer", "also run each reduced-precision node alone at P, worst SNR first");
  args.flag("top", "with --per-layer: how many nodes to list (default 10; 0: all)");
  Status st = args.parse(argc, argv);
  if (!st.is_ok()) return print_error(st);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (args.positional().size() != 1)
    return print_error(invalid_input("peregrine compare-precision: expected exactly one MODEL"));
  const std::string model = args.positional()[0];
  SessionOptions reduced;
  uint64_t seed = 0;
  std::map<std::string, Tensor> given;
  st = parse_model_input_flags(args, &reduced, &given, &seed);
  if (st.is_ok()) st = parse_engine_flags(args, &reduced);
  if (!st.is_ok()) return print_error(st);
  if (reduced.precision == Precision::kFloat32)
    return print_error(invalid_input("compare-precision: give --precision bf16 (the precision "
                                     "to compare with fp32)"));
  int64_t top = 10;
  if (args.has("top")) {
    auto v = parse_int(args.get("top"), "top");
    if (!v.is_ok()) return print_error(v.status());
    top = *v;
  }
  SessionOptions full = reduced;
  full.precision = Precision::kFloat32;
  full.keep_fp32.clear();

  auto reduced_session = Session::load(model, reduced);
  if (!reduced_session.is_ok()) return print_error(reduced_session.status());
  auto inputs = make_model_inputs(**reduced_session, given, seed);
  if (!inputs.is_ok()) return print_error(inputs.status());
  auto want = run_with(model, full, *inputs);
  if (!want.is_ok()) return print_error(want.status());
  auto got = (*reduced_session)->run(*inputs);
  if (!got.is_ok()) return print_error(got.status());

  std::vector<std::string> names;
  for (const auto& info : (*reduced_session)->outputs()) names.push_back(info.name);
  Deviation worst;
  const std::vector<Deviation> per_output = compare_outputs(names, *got, *want, &worst);
  const char* p = precision_name(reduced.precision);
  std::printf("model:     %s\n", model.c_str());
  std::printf("precision: %s against fp32, the same inputs (%s)\n", p,
              describe_input_shapes(*inputs).c_str());
  int width = 6;
  for (const std::string& n : names) width = std::max(width, static_cast<int>(n.size()));
  std::printf("\n%-*s %10s %11s %11s %8s\n", width, "output", "cosine", "max_abs", "max_rel",
              "snr_db");
  for (size_t i = 0; i < names.size(); ++i) {
    if (want->at(names[i]).dtype() != DType::kFloat32) {
      std::printf("%-*s (not float32: not compared)\n", width, names[i].c_str());
      continue;
    }
    const Deviation& d = per_output[i];
    std::printf("%-*s %10.6f %11.3e %11.3e %8s\n", width, names[i].c_str(), d.cosine, d.max_abs,
                d.max_rel, db(d.snr_db).c_str());
  }
  if (!args.is_set("per-layer")) return 0;

  // The nodes P applies to: those whose kernel runs at P (its name says so).
  std::vector<NodeKernel> reduced_nodes;
  for (const NodeKernel& k : (*reduced_session)->node_kernels())
    if (k.kernel.find(p) != std::string::npos) reduced_nodes.push_back(k);
  struct Row {
    NodeKernel node;
    Deviation worst;
  };
  std::vector<Row> rows;
  for (const NodeKernel& node : reduced_nodes) {
    SessionOptions alone = reduced;
    for (const NodeKernel& other : reduced_nodes)
      if (other.node != node.node) alone.keep_fp32.push_back(other.node);
    auto out = run_with(model, alone, *inputs);
    if (!out.is_ok()) return print_error(out.status().with_context("node '" + node.node + "'"));
    Row row{node, {}};
    compare_outputs(names, *out, *want, &row.worst);
    rows.push_back(row);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.worst.snr_db < b.worst.snr_db ||
           (std::isnan(a.worst.snr_db) && !std::isnan(b.worst.snr_db));
  });
  std::printf("\nper layer: each of the %zu %s nodes alone at %s, the rest fp32; the worst output "
              "(lowest SNR) first\n",
              rows.size(), p, p);
  const size_t shown = top > 0 ? std::min(rows.size(), static_cast<size_t>(top)) : rows.size();
  int node_width = 4;
  for (size_t i = 0; i < shown; ++i)
    node_width = std::max(node_width, static_cast<int>(rows[i].node.node.size()));
  std::printf("%-*s %-22s %8s %10s %11s\n", node_width, "node", "op", "snr_db", "cosine",
              "max_abs");
  for (size_t i = 0; i < shown; ++i)
    std::printf("%-*s %-22s %8s %10.6f %11.3e\n", node_width, rows[i].node.node.c_str(),
                rows[i].node.op_type.c_str(), db(rows[i].worst.snr_db).c_str(),
                rows[i].worst.cosine, rows[i].worst.max_abs);
  return 0;
}

}  // namespace peregrine::cli
