#include "importer/onnx/onnx_importer.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "ir/verifier.h"
#include "onnx/onnx-data.pb.h"
#include "onnx/onnx-ml.pb.h"

namespace peregrine {
namespace {

using FunctionMap = std::map<std::pair<std::string, std::string>, const onnx::FunctionProto*>;

// The size of `path`, a regular file of at most `limit` bytes.
Expected<int64_t> regular_file_size(const std::string& path, int64_t limit) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return invalid_input("cannot open '" + path + "': no such file");
  if (!S_ISREG(st.st_mode)) return invalid_input("'" + path + "' is not a regular file");
  if (st.st_size > limit)
    return invalid_model("'" + path + "' is " + std::to_string(st.st_size) +
                         " bytes, over the limit of " + std::to_string(limit));
  return static_cast<int64_t>(st.st_size);
}

Status read_file_limited(const std::string& path, int64_t limit, std::string* out) {
  PG_ASSIGN_OR_RETURN(int64_t size, regular_file_size(path, limit));
  std::ifstream f(path, std::ios::binary);
  if (!f) return invalid_input("cannot open '" + path + "'");
  out->assign(static_cast<size_t>(size), '\0');
  f.read(out->data(), size);
  if (!f) return invalid_input("cannot read '" + path + "'");
  return Status::ok();
}

// Parses `raw` into `m` with the nesting limit; `what` names the source in errors.
template <typename Message>
Status parse_stream(google::protobuf::io::ZeroCopyInputStream* raw, int nesting,
                    const std::string& what, Message* m) {
  google::protobuf::io::CodedInputStream coded(raw);
  coded.SetRecursionLimit(nesting);
  coded.SetTotalBytesLimit(INT_MAX);
  if (!m->ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
    return invalid_model(what + ": not a valid ONNX protobuf (truncated, corrupt, or nested deeper than " +
                         std::to_string(nesting) + " levels)");
  return Status::ok();
}

template <typename Message>
Status parse_limited(const std::string& bytes, int nesting, const std::string& what, Message* m) {
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  return parse_stream(&raw, nesting, what, m);
}

// The model file parsed straight from its descriptor, so the file's bytes are never held
// next to the parsed message (for a model of large weights that would double peak memory).
Status parse_model_file(const std::string& path, const ImportLimits& limits,
                        onnx::ModelProto* mp) {
  PG_RETURN_IF_ERROR(regular_file_size(path, limits.max_file_bytes).status());
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return invalid_input("cannot open '" + path + "'");
  google::protobuf::io::FileInputStream raw(fd);
  raw.SetCloseOnDelete(true);
  Status parsed = parse_stream(&raw, limits.max_proto_nesting, path, mp);
  if (parsed.is_ok() && raw.GetErrno() != 0) return invalid_input("cannot read '" + path + "'");
  return parsed;
}

class Importer {
 public:
  Importer(std::string model_dir, const ImportLimits& limits, FunctionMap functions)
      : model_dir_(std::move(model_dir)), limits_(limits), functions_(std::move(functions)) {}

  Status convert_graph(const onnx::GraphProto& gp, const std::map<std::string, int>& opsets,
                       int depth, ir::Graph* g);

 private:
  Status convert_node(const onnx::NodeProto& np, const std::map<std::string, int>& opsets,
                      int depth, ir::Graph* g, std::vector<std::unique_ptr<ir::Node>>* out,
                      int function_depth);
  Status convert_attribute(const onnx::AttributeProto& ap, const ir::Node& node,
                           const std::map<std::string, int>& opsets, int depth, ir::Attribute* a);
  Status inline_function(const onnx::NodeProto& call, const onnx::FunctionProto& fn,
                         int depth, ir::Graph* g, std::vector<std::unique_ptr<ir::Node>>* out,
                         int function_depth);

  std::string model_dir_;
  ImportLimits limits_;
  FunctionMap functions_;
  int inline_counter_ = 0;
};

std::string node_label(const onnx::NodeProto& np) {
  return "node '" + (np.name().empty() ? (np.output_size() ? np.output(0) : std::string("?")) : np.name()) +
         "' (" + np.op_type() + ")";
}

Status Importer::convert_attribute(const onnx::AttributeProto& ap, const ir::Node& node,
                                   const std::map<std::string, int>& opsets, int depth,
                                   ir::Attribute* a) {
  using T = ir::Attribute::Type;
  a->name = ap.name();
  std::string ctx = node.describe() + ": attribute '" + ap.name() + "'";
  auto type = ap.type();
  if (type == onnx::AttributeProto::UNDEFINED) {
    // Old exporters leave type unset; infer it from the populated field.
    if (ap.has_f()) type = onnx::AttributeProto::FLOAT;
    else if (ap.has_i()) type = onnx::AttributeProto::INT;
    else if (ap.has_s()) type = onnx::AttributeProto::STRING;
    else if (ap.has_t()) type = onnx::AttributeProto::TENSOR;
    else if (ap.has_g()) type = onnx::AttributeProto::GRAPH;
    else if (ap.floats_size()) type = onnx::AttributeProto::FLOATS;
    else if (ap.ints_size()) type = onnx::AttributeProto::INTS;
    else if (ap.strings_size()) type = onnx::AttributeProto::STRINGS;
    else return invalid_model(ctx + " has no type and no value");
  }
  switch (type) {
    case onnx::AttributeProto::FLOAT: a->type = T::kFloat; a->f = ap.f(); break;
    case onnx::AttributeProto::INT: a->type = T::kInt; a->i = ap.i(); break;
    case onnx::AttributeProto::STRING: a->type = T::kString; a->s = ap.s(); break;
    case onnx::AttributeProto::FLOATS:
      a->type = T::kFloats;
      a->floats.assign(ap.floats().begin(), ap.floats().end());
      break;
    case onnx::AttributeProto::INTS:
      a->type = T::kInts;
      a->ints.assign(ap.ints().begin(), ap.ints().end());
      break;
    case onnx::AttributeProto::STRINGS:
      a->type = T::kStrings;
      a->strings.assign(ap.strings().begin(), ap.strings().end());
      break;
    case onnx::AttributeProto::TENSOR: {
      a->type = T::kTensor;
      auto t = tensor_from_proto(ap.t(), model_dir_);
      if (!t.is_ok()) return t.status().with_context(ctx);
      a->t = std::move(t).value();
      break;
    }
    case onnx::AttributeProto::TENSORS:
      a->type = T::kTensors;
      for (const auto& tp : ap.tensors()) {
        auto t = tensor_from_proto(tp, model_dir_);
        if (!t.is_ok()) return t.status().with_context(ctx);
        a->tensors.push_back(std::move(t).value());
      }
      break;
    case onnx::AttributeProto::GRAPH: {
      a->type = T::kGraph;
      if (depth + 1 > limits_.max_subgraph_depth)
        return invalid_model(ctx + ": subgraphs nested deeper than " +
                             std::to_string(limits_.max_subgraph_depth));
      a->g = std::make_shared<ir::Graph>();
      PG_RETURN_IF_ERROR(convert_graph(ap.g(), opsets, depth + 1, a->g.get()));
      break;
    }
    case onnx::AttributeProto::GRAPHS:
      a->type = T::kGraphs;
      for (const auto& gp : ap.graphs()) {
        if (depth + 1 > limits_.max_subgraph_depth)
          return invalid_model(ctx + ": subgraphs nested too deeply");
        auto sub = std::make_shared<ir::Graph>();
        PG_RETURN_IF_ERROR(convert_graph(gp, opsets, depth + 1, sub.get()));
        a->graphs.push_back(sub);
      }
      break;
    case onnx::AttributeProto::TYPE_PROTO:
      a->type = T::kTypeProto;
      a->type_proto = type_from_proto(ap.tp());
      break;
    default:
      return unsupported(ctx + ": attribute type " + std::to_string(type) + " is not supported");
  }
  return Status::ok();
}

Status Importer::inline_function(const onnx::NodeProto& call, const onnx::FunctionProto& fn,
                                 int depth, ir::Graph* g,
                                 std::vector<std::unique_ptr<ir::Node>>* out, int function_depth) {
  if (function_depth >= limits_.max_function_depth)
    return invalid_model(node_label(call) + ": function calls nested deeper than " +
                         std::to_string(limits_.max_function_depth) + " (recursive function?)");
  // Formal -> actual names; internal values get a unique prefix.
  std::map<std::string, std::string> rename;
  for (int i = 0; i < fn.input_size(); ++i)
    rename[fn.input(i)] = i < call.input_size() ? call.input(i) : "";
  for (int i = 0; i < fn.output_size(); ++i)
    rename[fn.output(i)] = i < call.output_size() ? call.output(i) : "";
  std::string prefix = "__" + fn.name() + "_" + std::to_string(inline_counter_++) + "__";
  auto map_name = [&](const std::string& n) -> std::string {
    if (n.empty()) return n;
    auto it = rename.find(n);
    return it != rename.end() ? it->second : prefix + n;
  };
  // Attribute values: the call's, else the function's defaults.
  std::map<std::string, const onnx::AttributeProto*> call_attrs;
  for (const auto& a : call.attribute()) call_attrs[a.name()] = &a;
  for (const auto& a : fn.attribute_proto())
    if (!call_attrs.count(a.name())) call_attrs[a.name()] = &a;
  std::map<std::string, int> fn_opsets;
  for (const auto& op : fn.opset_import()) fn_opsets[op.domain() == "ai.onnx" ? "" : op.domain()] = static_cast<int>(op.version());
  for (const auto& kv : g->opsets)
    if (!fn_opsets.count(kv.first)) fn_opsets[kv.first] = kv.second;

  for (const auto& body_node : fn.node()) {
    onnx::NodeProto np = body_node;
    for (auto& in : *np.mutable_input()) in = map_name(in);
    for (auto& o : *np.mutable_output()) o = map_name(o);
    np.set_name(prefix + np.name());
    // Substitute attribute references.
    onnx::NodeProto resolved = np;
    resolved.clear_attribute();
    for (const auto& a : np.attribute()) {
      if (!a.ref_attr_name().empty()) {
        auto it = call_attrs.find(a.ref_attr_name());
        if (it == call_attrs.end()) continue;  // unset optional attribute
        auto* na = resolved.add_attribute();
        *na = *it->second;
        na->set_name(a.name());
      } else {
        *resolved.add_attribute() = a;
      }
    }
    PG_RETURN_IF_ERROR(convert_node(resolved, fn_opsets, depth, g, out, function_depth + 1));
  }
  return Status::ok();
}

Status Importer::convert_node(const onnx::NodeProto& np, const std::map<std::string, int>& opsets,
                              int depth, ir::Graph* g, std::vector<std::unique_ptr<ir::Node>>* out,
                              int function_depth) {
  std::string domain = np.domain() == "ai.onnx" ? "" : np.domain();
  auto fit = functions_.find({domain, np.op_type()});
  if (fit != functions_.end()) return inline_function(np, *fit->second, depth, g, out, function_depth);

  auto node = std::make_unique<ir::Node>();
  node->name = np.name().empty() ? (np.output_size() ? np.output(0) : np.op_type()) : np.name();
  node->op_type = np.op_type();
  node->domain = domain;
  auto oit = opsets.find(domain);
  if (oit == opsets.end())
    return invalid_model(node->describe() + ": domain '" + domain + "' is not in the model's opset_import");
  node->opset = oit->second;
  node->inputs.assign(np.input().begin(), np.input().end());
  node->outputs.assign(np.output().begin(), np.output().end());
  for (const auto& ap : np.attribute()) {
    if (node->attributes.count(ap.name()))
      return invalid_model(node->describe() + ": attribute '" + ap.name() + "' appears twice");
    ir::Attribute a;
    PG_RETURN_IF_ERROR(convert_attribute(ap, *node, opsets, depth, &a));
    node->attributes[ap.name()] = std::move(a);
  }
  out->push_back(std::move(node));
  return Status::ok();
}

Status Importer::convert_graph(const onnx::GraphProto& gp, const std::map<std::string, int>& opsets,
                               int depth, ir::Graph* g) {
  g->name = gp.name();
  g->opsets = opsets;
  for (const auto& tp : gp.initializer()) {
    if (tp.name().empty()) return invalid_model("graph '" + gp.name() + "': an initializer has no name");
    auto t = tensor_from_proto(tp, model_dir_);
    if (!t.is_ok()) return t.status().with_context("initializer");
    ir::Value& v = g->value(tp.name());
    if (v.initializer) return invalid_model("initializer '" + tp.name() + "' is defined twice");
    v.type = ir::ValueType::tensor(t->dtype(), t->shape());
    v.initializer = std::move(t).value();
    // The payload now lives in the tensor; free the proto's copy at once so that peak memory
    // holds one copy of the weights, not two. The ModelProto belongs to this import (never a
    // const object) and nothing reads the payload again.
    std::string().swap(*const_cast<onnx::TensorProto&>(tp).mutable_raw_data());
  }
  if (gp.sparse_initializer_size())
    return unsupported("graph '" + gp.name() + "': sparse initializers are not supported");
  for (const auto& vi : gp.input()) {
    ir::Value& v = g->value(vi.name());
    if (v.initializer) continue;  // IR < 4 lists initializers as inputs too
    v.type = type_from_proto(vi.type());
    g->inputs.push_back(vi.name());
  }
  for (const auto& vi : gp.value_info()) {
    ir::Value& v = g->value(vi.name());
    if (v.type.kind == ir::ValueType::Kind::kUnknown) v.type = type_from_proto(vi.type());
  }
  for (const auto& vi : gp.output()) {
    ir::Value& v = g->value(vi.name());
    if (!v.initializer) v.type = type_from_proto(vi.type());
    g->outputs.push_back(vi.name());
  }
  std::vector<std::unique_ptr<ir::Node>> nodes;
  for (const auto& np : gp.node()) PG_RETURN_IF_ERROR(convert_node(np, opsets, depth, g, &nodes, 0));
  g->nodes = std::move(nodes);
  return Status::ok();
}

}  // namespace

namespace {

// Converts a parsed model; frees each initializer's payload as it is copied (see convert_graph).
Expected<ir::Model> import_model_proto(onnx::ModelProto& mp, const std::string& model_dir,
                                       const std::string& display_name,
                                       const ImportLimits& limits) {
  if (!mp.has_graph()) return invalid_model(display_name + ": the model has no graph");
  std::map<std::string, int> opsets;
  for (const auto& op : mp.opset_import()) {
    std::string d = op.domain() == "ai.onnx" ? "" : op.domain();
    opsets[d] = static_cast<int>(op.version());
  }
  if (mp.opset_import_size() == 0) opsets[""] = 1;  // IR v1/v2 models had no opset_import
  if (opsets.count("")) {
    int v = opsets[""];
    if (v < kMinOnnxOpset || v > kMaxOnnxOpset)
      return invalid_model(display_name + ": default-domain opset " + std::to_string(v) +
                           " is outside the supported range " + std::to_string(kMinOnnxOpset) +
                           ".." + std::to_string(kMaxOnnxOpset));
  }
  FunctionMap functions;
  for (const auto& fn : mp.functions()) {
    std::string d = fn.domain() == "ai.onnx" ? "" : fn.domain();
    functions[{d, fn.name()}] = &fn;
  }
  ir::Model model;
  model.ir_version = mp.ir_version();
  model.producer_name = mp.producer_name();
  model.producer_version = mp.producer_version();
  model.path = display_name;
  model.domain = mp.domain();
  model.model_version = mp.model_version();
  model.doc_string = mp.doc_string();
  model.graph_doc_string = mp.graph().doc_string();
  for (const auto& kv : mp.metadata_props()) model.metadata_props[kv.key()] = kv.value();
  Importer importer(model_dir, limits, std::move(functions));
  PG_RETURN_IF_ERROR(importer.convert_graph(mp.graph(), opsets, 0, &model.graph));
  PG_RETURN_IF_ERROR(ir::verify_and_sort(model.graph));
  return model;
}

}  // namespace

Expected<ir::Model> parse_onnx_model(const std::string& bytes, const std::string& model_dir,
                                     const std::string& display_name, const ImportLimits& limits) {
  onnx::ModelProto mp;
  PG_RETURN_IF_ERROR(parse_limited(bytes, limits.max_proto_nesting, display_name, &mp));
  return import_model_proto(mp, model_dir, display_name, limits);
}

Expected<ir::Model> load_onnx_model(const std::string& path, const ImportLimits& limits) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  onnx::ModelProto mp;
  PG_RETURN_IF_ERROR(parse_model_file(path, limits, &mp));
  return import_model_proto(mp, dir, path, limits);
}

namespace {

Expected<RuntimeValue> value_from_tensor_proto(const onnx::TensorProto& tp) {
  auto t = tensor_from_proto(tp, "");
  if (!t.is_ok()) return t.status();
  return RuntimeValue::of(std::move(t).value());
}

Expected<RuntimeValue> value_from_sequence_proto(const onnx::SequenceProto& sp,
                                                 const ir::ValueType& type) {
  std::vector<Tensor> items;
  for (const auto& tp : sp.tensor_values()) {
    auto t = tensor_from_proto(tp, "");
    if (!t.is_ok()) return t.status();
    items.push_back(std::move(t).value());
  }
  DType elem = type.elem ? type.elem->dtype : DType::kUndefined;
  return RuntimeValue::of_sequence(std::move(items), elem);
}

}  // namespace

Expected<RuntimeValue> load_value_proto_file(const std::string& path, const ir::ValueType& type) {
  std::string bytes;
  PG_RETURN_IF_ERROR(read_file_limited(path, int64_t{2} << 30, &bytes));
  const int nesting = 100;
  using Kind = ir::ValueType::Kind;
  if (type.kind == Kind::kSequence) {
    onnx::SequenceProto sp;
    PG_RETURN_IF_ERROR(parse_limited(bytes, nesting, path, &sp));
    return value_from_sequence_proto(sp, type);
  }
  if (type.kind == Kind::kOptional) {
    onnx::OptionalProto op;
    PG_RETURN_IF_ERROR(parse_limited(bytes, nesting, path, &op));
    RuntimeValue v = RuntimeValue::none();
    if (op.has_tensor_value()) {
      PG_ASSIGN_OR_RETURN(v, value_from_tensor_proto(op.tensor_value()));
    } else if (op.has_sequence_value()) {
      ir::ValueType seq_type = type.elem ? *type.elem : ir::ValueType{};
      PG_ASSIGN_OR_RETURN(v, value_from_sequence_proto(op.sequence_value(), seq_type));
    }
    v.is_optional = true;
    return v;
  }
  onnx::TensorProto tp;
  PG_RETURN_IF_ERROR(parse_limited(bytes, nesting, path, &tp));
  auto v = value_from_tensor_proto(tp);
  if (!v.is_ok()) return v.status().with_context(path);
  return v;
}

}  // namespace peregrine
