#include "quantization/insert_qdq.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "ir/attributes.h"
#include "ir/verifier.h"
#include "passes/pass_util.h"

namespace peregrine::quantization {

namespace {

using passes::add_initializer;
using passes::add_node;
using passes::constant_of;
using passes::fresh_name;
using passes::GraphIndex;
using passes::int_attr;

constexpr int kMinQdqOpset = 13;  // per-axis DequantizeLinear

// An attribute's value, or `malformed` when it has the wrong type (the node then stays float).
template <typename T>
T value_or(Expected<T> e, T malformed) {
  return e.is_ok() ? *e : malformed;
}

bool excluded(const ir::Node& n, const QuantizeOptions& options) {
  for (const auto& e : options.exclude)
    if (e == n.name || e == n.op_type) return true;
  return false;
}

bool is_activation(const ir::Graph& g, const std::string& v) {
  return !v.empty() && passes::is_float32(g, v) && !constant_of(g, v);
}

bool static_shape(const ir::Graph& g, const std::string& v, Shape* shape) {
  const ir::Value* val = g.find_value(v);
  if (!val || !val->type.is_tensor() || !val->type.has_shape) return false;
  for (int64_t d : val->type.dims)
    if (d < 0) return false;
  *shape = val->type.dims;
  return true;
}

// Why `n` stays float32 ("" when it is quantized); only called for candidate op types.
std::string reject_reason(const ir::Graph& g, const ir::Node& n) {
  const ir::AttrView attrs(n);
  if (n.op_type == "Add") {
    Shape a, b;
    if (n.inputs.size() != 2 || !is_activation(g, n.inputs[0]) || !is_activation(g, n.inputs[1]))
      return "not an addition of two float32 activations";
    if (!static_shape(g, n.inputs[0], &a) || !static_shape(g, n.inputs[1], &b) || a != b)
      return "its inputs' shapes are not known and equal";
    return "";
  }
  if (n.inputs.size() < 2 || !is_activation(g, n.inputs[0])) return "its input is not a float32 activation";
  const Tensor* w = constant_of(g, n.inputs[1]);
  if (!w || w->dtype() != DType::kFloat32) return "its weight is not a float32 initializer";
  const Tensor* bias = n.inputs.size() > 2 && !n.inputs[2].empty() ? constant_of(g, n.inputs[2]) : nullptr;
  if (n.inputs.size() > 2 && !n.inputs[2].empty() && (!bias || bias->dtype() != DType::kFloat32))
    return "its bias is not a float32 initializer";
  if (n.op_type == "Conv") {
    if (w->rank() != 4) return "not a 2-D convolution";
    return "";
  }
  if (w->rank() != 2) return "its weight is not 2-D";
  if (n.op_type == "Gemm") {
    if (value_or<int64_t>(attrs.get_int("transA", 0), 1) != 0) return "transA is set";
    if (value_or<float>(attrs.get_float("alpha", 1.0f), 0) != 1.0f ||
        value_or<float>(attrs.get_float("beta", 1.0f), 0) != 1.0f)
      return "alpha or beta is not 1";
    const int64_t n_cols = value_or<int64_t>(attrs.get_int("transB", 0), 0) ? w->dim(0) : w->dim(1);
    if (bias && (bias->rank() != 1 || bias->dim(0) != n_cols))
      return "its bias is not one value per output column";
  }
  return "";
}

// The uint8 grid of a calibrated range: it always holds 0 exactly.
std::pair<float, uint8_t> activation_grid(Range r) {
  const float lo = std::min(r.min, 0.0f), hi = std::max(r.max, 0.0f);
  float scale = (hi - lo) / 255.0f;
  if (!(scale > 0) || !std::isfinite(scale)) scale = 1.0f;
  const float zp = std::nearbyint(-lo / scale);
  return {scale, static_cast<uint8_t>(std::clamp(zp, 0.0f, 255.0f))};
}

// Symmetric int8 per-channel (or per-tensor) quantization of a constant weight along `axis`.
struct QuantizedWeight {
  Tensor values;             // int8, the weight's shape
  std::vector<float> scale;  // one per channel, or one
};

QuantizedWeight quantize_weight(const Tensor& w, int64_t axis, bool per_channel) {
  const int64_t channels = per_channel ? w.dim(axis) : 1;
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < w.rank(); ++d) inner *= w.dim(d);
  auto channel_of = [&](int64_t i) { return per_channel ? (i / inner) % w.dim(axis) : 0; };
  std::vector<float> amax(static_cast<size_t>(channels), 0.0f);
  const float* x = w.data<float>();
  for (int64_t i = 0; i < w.numel(); ++i) {
    float& m = amax[static_cast<size_t>(channel_of(i))];
    m = std::max(m, std::fabs(x[i]));
  }
  QuantizedWeight q;
  q.values = Tensor::zeros(DType::kInt8, w.shape());
  for (float m : amax) q.scale.push_back(m > 0 ? m / 127.0f : 1.0f);
  int8_t* out = q.values.data<int8_t>();
  for (int64_t i = 0; i < w.numel(); ++i) {
    const float v = std::nearbyint(x[i] / q.scale[static_cast<size_t>(channel_of(i))]);
    out[i] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
  }
  return q;
}

Tensor vector_or_scalar(const std::vector<float>& v) {
  return v.size() == 1 ? Tensor::scalar<float>(v[0])
                       : Tensor::from_vector<float>(v, {static_cast<int64_t>(v.size())});
}

// The weight's output-channel axis: Conv [Cout, ...] 0; MatMul [K, N] 1; Gemm 0 with transB.
int64_t weight_axis(const ir::Node& n) {
  if (n.op_type == "Conv") return 0;
  if (n.op_type == "Gemm") return value_or<int64_t>(ir::AttrView(n).get_int("transB", 0), 0) ? 0 : 1;
  return 1;
}

void quantize_weight_and_bias(ir::Graph& g, ir::Node& n, float x_scale, bool per_channel) {
  const std::string w_name = n.inputs[1];
  const int64_t axis = weight_axis(n);
  QuantizedWeight q = quantize_weight(*constant_of(g, w_name), axis, per_channel);
  const bool per_axis = q.scale.size() > 1;
  const int64_t channels = static_cast<int64_t>(q.scale.size());
  const std::string base = n.name.empty() ? w_name : n.name;
  const std::string wq = add_initializer(g, w_name + "_quantized", std::move(q.values));
  const std::string ws = add_initializer(g, w_name + "_scale", vector_or_scalar(q.scale));
  const std::string wz = add_initializer(
      g, w_name + "_zero_point",
      per_axis ? Tensor::zeros(DType::kInt8, {channels}) : Tensor::scalar<int8_t>(0));
  const std::string w_dq = fresh_name(g, w_name + "_dequantized");
  ir::Node* dq = add_node(g, "DequantizeLinear", {wq, ws, wz}, {w_dq}, base + "_weight_DequantizeLinear");
  if (per_axis) dq->attributes["axis"] = int_attr("axis", axis);
  g.value(w_dq).type = ir::ValueType::tensor(DType::kFloat32, g.values[w_name].type.dims);
  n.inputs[1] = w_dq;

  if (n.inputs.size() < 3 || n.inputs[2].empty()) return;
  const std::string b_name = n.inputs[2];
  const Tensor& b = *constant_of(g, b_name);
  Tensor bq = Tensor::zeros(DType::kInt32, b.shape());
  std::vector<float> b_scale;
  for (int64_t c = 0; c < b.numel(); ++c) {
    const float s = x_scale * q.scale[per_axis ? static_cast<size_t>(c) : 0];
    if (per_axis || c == 0) b_scale.push_back(s);
    const double v = std::nearbyint(static_cast<double>(b.data<float>()[c]) / s);
    bq.data<int32_t>()[c] = static_cast<int32_t>(
        std::clamp(v, double{std::numeric_limits<int32_t>::min()}, double{std::numeric_limits<int32_t>::max()}));
  }
  const std::string bqn = add_initializer(g, b_name + "_quantized", std::move(bq));
  const std::string bs = add_initializer(g, b_name + "_scale", vector_or_scalar(b_scale));
  const std::string bz = add_initializer(
      g, b_name + "_zero_point",
      per_axis ? Tensor::zeros(DType::kInt32, {channels}) : Tensor::scalar<int32_t>(0));
  const std::string b_dq = fresh_name(g, b_name + "_dequantized");
  ir::Node* bdq = add_node(g, "DequantizeLinear", {bqn, bs, bz}, {b_dq}, base + "_bias_DequantizeLinear");
  if (per_axis) bdq->attributes["axis"] = int_attr("axis", 0);
  g.value(b_dq).type = ir::ValueType::tensor(DType::kFloat32, g.values[b_name].type.dims);
  n.inputs[2] = b_dq;
}

// Q / DQ after tensor `t`: every reader (and the graph output) then sees the dequantized value.
void quantize_activation(ir::Graph& g, const std::string& t, float scale, uint8_t zero_point) {
  const std::string sn = add_initializer(g, t + "_scale", Tensor::scalar<float>(scale));
  const std::string zn = add_initializer(g, t + "_zero_point", Tensor::scalar<uint8_t>(zero_point));
  const ir::ValueType type = g.values[t].type;
  const std::string q = fresh_name(g, t + "_quantized");
  g.value(q).type = ir::ValueType::tensor(DType::kUInt8, type.dims);
  const bool is_input = std::find(g.inputs.begin(), g.inputs.end(), t) != g.inputs.end();
  if (is_input) {
    const std::string dq = fresh_name(g, t + "_dequantized");
    g.value(dq).type = type;
    passes::replace_uses(g, t, dq);
    add_node(g, "QuantizeLinear", {t, sn, zn}, {q}, t + "_QuantizeLinear");
    add_node(g, "DequantizeLinear", {q, sn, zn}, {dq}, t + "_DequantizeLinear");
    return;
  }
  // The producer writes the float value under a new name; the DQ takes over `t`.
  const std::string pre = fresh_name(g, t + "_float");
  g.value(pre).type = type;
  for (auto& n : g.nodes)
    for (auto& out : n->outputs)
      if (out == t) out = pre;
  add_node(g, "QuantizeLinear", {pre, sn, zn}, {q}, t + "_QuantizeLinear");
  add_node(g, "DequantizeLinear", {q, sn, zn}, {t}, t + "_DequantizeLinear");
}

}  // namespace

Expected<QuantizationPlan> plan_quantization(const ir::Graph& g, const QuantizeOptions& options) {
  auto opset = g.opsets.find("");
  const int version = opset == g.opsets.end() ? 1 : opset->second;
  if (version < kMinQdqOpset)
    return unsupported("quantize: the model imports default-domain opset " + std::to_string(version) +
                       "; QDQ needs " + std::to_string(kMinQdqOpset) +
                       " or newer (per-channel DequantizeLinear): export it again at opset >= 13");
  const GraphIndex index(g);
  QuantizationPlan plan;
  std::set<std::string> chosen;
  auto want = [&](const std::string& t) {
    if (chosen.insert(t).second) plan.activations.push_back(t);
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = *g.nodes[i];
    if (!n.domain.empty()) continue;
    if (n.op_type != "Conv" && n.op_type != "MatMul" && n.op_type != "Gemm" && n.op_type != "Add")
      continue;
    if (excluded(n, options)) {
      plan.skipped.push_back(n.describe() + ": excluded");
      continue;
    }
    const std::string why = reject_reason(g, n);
    if (!why.empty()) {
      plan.skipped.push_back(n.describe() + ": " + why);
      continue;
    }
    plan.nodes.push_back(i);
    want(n.inputs[0]);
    if (n.op_type == "Add") want(n.inputs[1]);
    // A Relu that alone reads the output is quantized after instead (int8 kernels fold it).
    std::string out = n.outputs[0];
    const ir::Node* next = index.sole_consumer(out);
    if (next && passes::is_op(next, "Relu")) out = next->outputs[0];
    if (passes::is_float32(g, out)) want(out);
  }
  return plan;
}

Status insert_qdq(ir::Graph& g, const QuantizationPlan& plan,
                  const std::map<std::string, Range>& ranges, const QuantizeOptions& options) {
  std::map<std::string, std::pair<float, uint8_t>> grids;
  for (const auto& t : plan.activations) {
    auto it = ranges.find(t);
    if (it == ranges.end()) return internal_error("quantize: tensor '" + t + "' has no calibrated range");
    grids[t] = activation_grid(it->second);
  }
  // Weights first, while the nodes still read their activations under the planned names.
  std::vector<ir::Node*> nodes;
  std::vector<std::string> originals;  // the float weights and biases the rewrite replaces
  for (size_t i : plan.nodes) {
    ir::Node* n = g.nodes.at(i).get();
    nodes.push_back(n);
    if (n->op_type == "Add") continue;
    for (size_t k = 1; k < n->inputs.size() && k < 3; ++k) originals.push_back(n->inputs[k]);
  }
  for (ir::Node* n : nodes)
    if (n->op_type != "Add") quantize_weight_and_bias(g, *n, grids.at(n->inputs[0]).first, options.per_channel);
  for (const auto& t : plan.activations) quantize_activation(g, t, grids[t].first, grids[t].second);
  // The float weights and biases nothing reads any more leave the file (subgraph bodies may
  // read any outer name, so with subgraphs they stay).
  std::set<std::string> read(g.outputs.begin(), g.outputs.end());
  bool subgraphs = false;
  for (const auto& n : g.nodes) {
    read.insert(n->inputs.begin(), n->inputs.end());
    subgraphs |= passes::has_subgraph(*n);
  }
  for (const auto& original : originals)
    if (!subgraphs && !original.empty() && !read.count(original)) g.values.erase(original);
  return ir::verify_and_sort(g);
}

}  // namespace peregrine::quantization
