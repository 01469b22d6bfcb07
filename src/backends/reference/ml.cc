// Reference kernels of the ml family (ai.onnx.ml): Binarizer, ArrayFeatureExtractor,
// LabelEncoder and TreeEnsemble.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

namespace {

Status binarizer(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  PG_ASSIGN_OR_RETURN(float threshold, ctx.attrs().get_float("threshold", 0.0f));
  return visit_numeric(x.dtype(), [&]<typename T>() {
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i)
      out[i] = static_cast<double>(in[i]) > static_cast<double>(threshold) ? T(1) : T(0);
  });
}

Status array_feature_extractor(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  Tensor& y = ctx.output(0);
  const int64_t last = x.dim(x.rank() - 1);
  const int64_t rows = last == 0 ? 0 : x.numel() / last;
  const int64_t count = indices.numel();
  const int64_t* idx = indices.data<int64_t>();
  for (int64_t j = 0; j < count; ++j)
    if (idx[j] < 0 || idx[j] >= last)
      return ctx.error("index " + std::to_string(idx[j]) + " is out of range for the last "
                       "dimension of size " + std::to_string(last));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < count; ++j) copy_element(x, r * last + idx[j], y, r * count + j);
  return Status::ok();
}

// ---- LabelEncoder ----------------------------------------------------------

// The keys of a LabelEncoder, in the kind the input is looked up by.
struct LabelKeys {
  std::map<std::string, int64_t> strings;
  std::map<int64_t, int64_t> integers;
  std::map<double, int64_t> floats;  // NaN keys live in nan_index
  int64_t nan_index = -1;
  size_t size = 0;
};

bool is_integral_type(DType t) { return dtype_is_integer(t); }

Expected<LabelKeys> label_keys(KernelContext& ctx, DType input) {
  const ir::AttrView& a = ctx.attrs();
  LabelKeys keys;
  PG_ASSIGN_OR_RETURN(std::vector<std::string> key_strings, a.get_strings("keys_strings"));
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> key_ints, a.get_ints("keys_int64s"));
  PG_ASSIGN_OR_RETURN(std::vector<float> key_floats, a.get_floats("keys_floats"));
  std::vector<double> key_doubles(key_floats.begin(), key_floats.end());
  if (const Tensor* t = a.get_tensor("keys_tensor")) {
    if (t->dtype() == DType::kString) {
      key_strings = t->strings();
    } else if (is_integral_type(t->dtype())) {
      key_ints = t->to_int64_vector();
    } else {
      for (int64_t i = 0; i < t->numel(); ++i) key_doubles.push_back(t->get_as_double(i));
    }
  }
  auto add_float = [&](double k, int64_t i) {
    if (std::isnan(k)) {
      if (keys.nan_index < 0) keys.nan_index = i;
    } else {
      keys.floats.emplace(k, i);
    }
  };
  if (input == DType::kString) {
    for (size_t i = 0; i < key_strings.size(); ++i) keys.strings.emplace(key_strings[i], i);
    keys.size = key_strings.size();
  } else if (is_integral_type(input) && !key_ints.empty()) {
    for (size_t i = 0; i < key_ints.size(); ++i) keys.integers.emplace(key_ints[i], i);
    keys.size = key_ints.size();
  } else {
    for (size_t i = 0; i < key_ints.size(); ++i) add_float(static_cast<double>(key_ints[i]), i);
    for (size_t i = 0; i < key_doubles.size(); ++i) add_float(key_doubles[i], i);
    keys.size = key_ints.size() + key_doubles.size();
  }
  if (keys.size == 0) return ctx.error("LabelEncoder has no keys matching the input type");
  return keys;
}

// The values (1-D) and the default (one element), in the output's element type.
Status label_values(KernelContext& ctx, DType out, Tensor& values, Tensor& fallback) {
  const ir::AttrView& a = ctx.attrs();
  if (const Tensor* t = a.get_tensor("values_tensor")) {
    values = t->reshaped({t->numel()});
  } else if (out == DType::kString) {
    PG_ASSIGN_OR_RETURN(std::vector<std::string> v, a.get_strings("values_strings"));
    values = Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
  } else if (out == DType::kInt64) {
    PG_ASSIGN_OR_RETURN(std::vector<int64_t> v, a.get_ints("values_int64s"));
    values = Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
  } else {
    PG_ASSIGN_OR_RETURN(std::vector<float> v, a.get_floats("values_floats"));
    values = Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
  }
  if (values.dtype() != out) return ctx.error("values have an unexpected element type");
  if (const Tensor* t = a.get_tensor("default_tensor")) {
    if (t->numel() != 1 || t->dtype() != out)
      return ctx.error("attribute 'default_tensor' must hold one value of the output type");
    fallback = *t;
    return Status::ok();
  }
  if (out == DType::kString) {
    PG_ASSIGN_OR_RETURN(std::string d, a.get_string("default_string", "_Unused"));
    fallback = Tensor::scalar(d);
  } else if (out == DType::kInt64) {
    PG_ASSIGN_OR_RETURN(int64_t d, a.get_int("default_int64", -1));
    fallback = Tensor::scalar(d);
  } else if (out == DType::kFloat32) {
    PG_ASSIGN_OR_RETURN(float d, a.get_float("default_float", -0.0f));
    fallback = Tensor::scalar(d);
  } else if (dtype_is_integer(out)) {  // integer values_tensor without default: -1
    fallback = Tensor::zeros(out, {});
    PG_RETURN_IF_ERROR(visit_integer(out, [&]<typename T>() { fallback.data<T>()[0] = T(-1); }));
  } else {  // float values_tensor without default: -0.0
    fallback = Tensor::zeros(out, {});
    PG_RETURN_IF_ERROR(visit_float(out, [&]<typename T>() { fallback.data<T>()[0] = T(-0.0f); }));
  }
  return Status::ok();
}

// ai.onnx.ml LabelEncoder-1: strings to their index in classes_strings, or back.
Status label_encoder_v1(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  PG_ASSIGN_OR_RETURN(std::vector<std::string> classes, ctx.attrs().get_strings("classes_strings"));
  if (x.dtype() == DType::kString) {
    PG_ASSIGN_OR_RETURN(int64_t fallback, ctx.attrs().get_int("default_int64", -1));
    std::map<std::string, int64_t> index;
    for (size_t i = 0; i < classes.size(); ++i) index.emplace(classes[i], i);
    for (int64_t i = 0; i < x.numel(); ++i) {
      auto it = index.find(x.strings()[i]);
      y.data<int64_t>()[i] = it == index.end() ? fallback : it->second;
    }
    return Status::ok();
  }
  PG_ASSIGN_OR_RETURN(std::string fallback, ctx.attrs().get_string("default_string", "_Unused"));
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t k = x.data<int64_t>()[i];
    y.strings()[i] = k >= 0 && k < static_cast<int64_t>(classes.size()) ? classes[k] : fallback;
  }
  return Status::ok();
}

Status label_encoder(KernelContext& ctx) {
  if (ctx.opset() < 2) return label_encoder_v1(ctx);
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  PG_ASSIGN_OR_RETURN(LabelKeys keys, label_keys(ctx, x.dtype()));
  Tensor values, fallback;
  PG_RETURN_IF_ERROR(label_values(ctx, y.dtype(), values, fallback));
  if (static_cast<size_t>(values.numel()) != keys.size)
    return ctx.error("keys and values have different lengths (" + std::to_string(keys.size) +
                     " vs " + std::to_string(values.numel()) + ")");
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t found = -1;
    if (x.dtype() == DType::kString) {
      auto it = keys.strings.find(x.strings()[i]);
      if (it != keys.strings.end()) found = it->second;
    } else if (!keys.integers.empty()) {
      auto it = keys.integers.find(x.get_as_int64(i));
      if (it != keys.integers.end()) found = it->second;
    } else {
      double k = x.get_as_double(i);
      if (std::isnan(k)) {
        found = keys.nan_index;
      } else {
        auto it = keys.floats.find(k);
        if (it != keys.floats.end()) found = it->second;
      }
    }
    if (found >= 0) copy_element(values, found, y, i);
    else copy_element(fallback, 0, y, i);
  }
  return Status::ok();
}

// ---- TreeEnsemble (ai.onnx.ml opset 5) -------------------------------------

enum class TreeMode { kLeq = 0, kLt, kGte, kGt, kEq, kNeq, kMember };

struct TreeEnsembleModel {
  std::vector<double> splits;
  std::vector<int64_t> features, modes, true_ids, false_ids, true_leafs, false_leafs;
  std::vector<int64_t> missing_tracks_true;
  std::vector<std::set<double>> members;  // per node, for kMember
  std::vector<int64_t> leaf_targets;
  std::vector<double> leaf_weights;
  std::vector<int64_t> roots;
};

std::vector<double> tensor_doubles(const Tensor* t) {
  std::vector<double> v;
  if (!t) return v;
  for (int64_t i = 0; i < t->numel(); ++i) v.push_back(t->get_as_double(i));
  return v;
}

Expected<TreeEnsembleModel> load_tree_ensemble(KernelContext& ctx, int64_t n_features,
                                               int64_t n_targets) {
  const ir::AttrView& a = ctx.attrs();
  TreeEnsembleModel m;
  m.splits = tensor_doubles(a.get_tensor("nodes_splits"));
  PG_ASSIGN_OR_RETURN(m.features, a.get_ints("nodes_featureids"));
  const Tensor* modes = a.get_tensor("nodes_modes");
  if (modes) m.modes = modes->to_int64_vector();
  PG_ASSIGN_OR_RETURN(m.true_ids, a.get_ints("nodes_truenodeids"));
  PG_ASSIGN_OR_RETURN(m.false_ids, a.get_ints("nodes_falsenodeids"));
  PG_ASSIGN_OR_RETURN(m.true_leafs, a.get_ints("nodes_trueleafs"));
  PG_ASSIGN_OR_RETURN(m.false_leafs, a.get_ints("nodes_falseleafs"));
  PG_ASSIGN_OR_RETURN(m.missing_tracks_true, a.get_ints("nodes_missing_value_tracks_true"));
  PG_ASSIGN_OR_RETURN(m.leaf_targets, a.get_ints("leaf_targetids"));
  m.leaf_weights = tensor_doubles(a.get_tensor("leaf_weights"));
  PG_ASSIGN_OR_RETURN(m.roots, a.get_ints("tree_roots"));
  const size_t nodes = m.splits.size();
  if (m.features.size() != nodes || m.modes.size() != nodes || m.true_ids.size() != nodes ||
      m.false_ids.size() != nodes || m.true_leafs.size() != nodes ||
      m.false_leafs.size() != nodes ||
      (!m.missing_tracks_true.empty() && m.missing_tracks_true.size() != nodes))
    return ctx.error("the nodes_* attributes must all have one entry per node");
  const size_t leaves = m.leaf_weights.size();
  if (m.leaf_targets.size() != leaves)
    return ctx.error("leaf_targetids and leaf_weights differ in length");
  for (int64_t t : m.leaf_targets)
    if (t < 0 || t >= n_targets) return ctx.error("leaf target id out of range");
  for (size_t i = 0; i < nodes; ++i) {
    if (m.features[i] < 0 || m.features[i] >= n_features)
      return ctx.error("node feature id out of range");
    if (m.modes[i] < 0 || m.modes[i] > static_cast<int64_t>(TreeMode::kMember))
      return ctx.error("unknown node mode " + std::to_string(m.modes[i]));
    for (auto [id, leaf] : {std::pair{m.true_ids[i], m.true_leafs[i]},
                            std::pair{m.false_ids[i], m.false_leafs[i]}}) {
      size_t limit = leaf ? leaves : nodes;
      if (id < 0 || static_cast<size_t>(id) >= limit)
        return ctx.error("node child id out of range");
    }
  }
  for (int64_t r : m.roots)
    if (r < 0 || static_cast<size_t>(r) >= nodes) return ctx.error("tree root out of range");
  // Set members: consecutive runs in membership_values, one per kMember node, NaN-separated.
  m.members.resize(nodes);
  std::vector<double> membership = tensor_doubles(a.get_tensor("membership_values"));
  size_t pos = 0;
  for (size_t i = 0; i < nodes; ++i) {
    if (m.modes[i] != static_cast<int64_t>(TreeMode::kMember)) continue;
    if (pos >= membership.size()) return ctx.error("membership_values has too few sets");
    while (pos < membership.size() && !std::isnan(membership[pos]))
      m.members[i].insert(membership[pos++]);
    ++pos;  // the NaN separator
  }
  return m;
}

bool tree_condition(const TreeEnsembleModel& m, size_t node, double x) {
  if (std::isnan(x) && !m.missing_tracks_true.empty() && m.missing_tracks_true[node]) return true;
  double s = m.splits[node];
  switch (static_cast<TreeMode>(m.modes[node])) {
    case TreeMode::kLeq: return x <= s;
    case TreeMode::kLt: return x < s;
    case TreeMode::kGte: return x >= s;
    case TreeMode::kGt: return x > s;
    case TreeMode::kEq: return x == s;
    case TreeMode::kNeq: return x != s;
    case TreeMode::kMember: return m.members[node].count(x) > 0;
  }
  return false;
}

Status tree_ensemble(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t rows = x.dim(0), features = x.dim(1), targets = y.dim(1);
  PG_ASSIGN_OR_RETURN(TreeEnsembleModel m, load_tree_ensemble(ctx, features, targets));
  PG_ASSIGN_OR_RETURN(int64_t aggregate, ctx.attrs().get_int("aggregate_function", 1));
  PG_ASSIGN_OR_RETURN(int64_t post_transform, ctx.attrs().get_int("post_transform", 0));
  if (aggregate < 0 || aggregate > 3) return ctx.error("unknown aggregate_function");
  if (post_transform < 0 || post_transform > 3)
    return ctx.error("post_transform " + std::to_string(post_transform) + " is not supported");
  const size_t nodes = m.splits.size();
  std::vector<double> result(static_cast<size_t>(targets));
  for (int64_t r = 0; r < rows; ++r) {
    const double init = aggregate == 2   ? std::numeric_limits<double>::max()
                        : aggregate == 3 ? std::numeric_limits<double>::lowest()
                                         : 0.0;
    std::fill(result.begin(), result.end(), init);
    for (int64_t root : m.roots) {
      // A root whose branches are the same leaf is a single-leaf tree.
      bool leaf = m.true_leafs[root] && m.false_leafs[root] &&
                  m.true_ids[root] == m.false_ids[root];
      int64_t id = leaf ? m.true_ids[root] : root;
      for (size_t steps = 0; !leaf; ++steps) {
        if (steps > nodes) return ctx.error("tree has a cycle");
        bool go_true = tree_condition(m, id, x.get_as_double(r * features + m.features[id]));
        leaf = go_true ? m.true_leafs[id] : m.false_leafs[id];
        id = go_true ? m.true_ids[id] : m.false_ids[id];
      }
      double w = m.leaf_weights[id];
      double& out = result[m.leaf_targets[id]];
      switch (aggregate) {
        case 0: out += w / static_cast<double>(m.roots.size()); break;
        case 1: out += w; break;
        case 2: out = std::min(out, w); break;
        default: out = std::max(out, w); break;
      }
    }
    if (post_transform == 1 || post_transform == 3) {  // softmax (3: zeros stay zero)
      double top = *std::max_element(result.begin(), result.end()), total = 0;
      for (double& v : result) total += (v = (post_transform == 3 && v == 0) ? 0 : std::exp(v - top));
      for (double& v : result) v = total > 0 ? v / total : v;
    } else if (post_transform == 2) {  // logistic
      for (double& v : result) v = 1.0 / (1.0 + std::exp(-v));
    }
    PG_RETURN_IF_ERROR(visit_float(y.dtype(), [&]<typename T>() {
      for (int64_t t = 0; t < targets; ++t) {
        // MIN/MAX targets no tree reached keep the type's extreme, as onnx's reference does.
        using Limits = std::numeric_limits<std::conditional_t<std::is_floating_point_v<T>, T, float>>;
        double v = result[t];
        if (v == std::numeric_limits<double>::max()) v = Limits::max();
        if (v == std::numeric_limits<double>::lowest()) v = Limits::lowest();
        y.data<T>()[r * targets + t] = static_cast<T>(v);
      }
    }));
  }
  return Status::ok();
}

}  // namespace

void register_ml_kernels(KernelRegistry& r) {
  r.add(kMlDomain, "Binarizer", binarizer);
  r.add(kMlDomain, "ArrayFeatureExtractor", array_feature_extractor);
  r.add(kMlDomain, "LabelEncoder", label_encoder);
  r.add(kMlDomain, "TreeEnsemble", tree_ensemble);
}

}  // namespace peregrine
