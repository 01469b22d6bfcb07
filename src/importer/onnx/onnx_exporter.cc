#include "importer/onnx/onnx_exporter.h"

#include <filesystem>
#include <fstream>
#include <set>

#include "core/file_io.h"
#include "importer/onnx/onnx_importer.h"
#include "onnx/onnx-ml.pb.h"

namespace peregrine {

namespace {

void type_to_proto(const ir::ValueType& t, onnx::TypeProto* p) {
  using Kind = ir::ValueType::Kind;
  switch (t.kind) {
    case Kind::kTensor: {
      auto* tt = p->mutable_tensor_type();
      tt->set_elem_type(static_cast<int32_t>(t.dtype));
      if (!t.has_shape) break;
      auto* shape = tt->mutable_shape();
      for (size_t i = 0; i < t.dims.size(); ++i) {
        auto* d = shape->add_dim();
        if (t.dims[i] >= 0) d->set_dim_value(t.dims[i]);
        else if (i < t.dim_names.size() && !t.dim_names[i].empty()) d->set_dim_param(t.dim_names[i]);
      }
      break;
    }
    case Kind::kSequence:
      if (t.elem) type_to_proto(*t.elem, p->mutable_sequence_type()->mutable_elem_type());
      else p->mutable_sequence_type();
      break;
    case Kind::kOptional:
      if (t.elem) type_to_proto(*t.elem, p->mutable_optional_type()->mutable_elem_type());
      else p->mutable_optional_type();
      break;
    case Kind::kUnknown: break;
  }
}

void value_info(const ir::Graph& g, const std::string& name, onnx::ValueInfoProto* vi) {
  vi->set_name(name);
  const ir::Value* v = g.find_value(name);
  if (v && v->type.kind != ir::ValueType::Kind::kUnknown &&
      !(v->type.is_tensor() && v->type.dtype == DType::kUndefined))
    type_to_proto(v->type, vi->mutable_type());
}

void graph_to_proto(const ir::Graph& g, onnx::GraphProto* gp, std::set<std::string>* domains);

void attribute_to_proto(const ir::Attribute& a, onnx::AttributeProto* p,
                        std::set<std::string>* domains) {
  using T = ir::Attribute::Type;
  p->set_name(a.name);
  switch (a.type) {
    case T::kFloat: p->set_type(onnx::AttributeProto::FLOAT); p->set_f(a.f); break;
    case T::kInt: p->set_type(onnx::AttributeProto::INT); p->set_i(a.i); break;
    case T::kString: p->set_type(onnx::AttributeProto::STRING); p->set_s(a.s); break;
    case T::kTensor: p->set_type(onnx::AttributeProto::TENSOR); tensor_to_proto(a.t, p->mutable_t()); break;
    case T::kGraph:
      p->set_type(onnx::AttributeProto::GRAPH);
      graph_to_proto(*a.g, p->mutable_g(), domains);
      break;
    case T::kFloats:
      p->set_type(onnx::AttributeProto::FLOATS);
      for (float f : a.floats) p->add_floats(f);
      break;
    case T::kInts:
      p->set_type(onnx::AttributeProto::INTS);
      for (int64_t i : a.ints) p->add_ints(i);
      break;
    case T::kStrings:
      p->set_type(onnx::AttributeProto::STRINGS);
      for (const auto& s : a.strings) p->add_strings(s);
      break;
    case T::kTensors:
      p->set_type(onnx::AttributeProto::TENSORS);
      for (const auto& t : a.tensors) tensor_to_proto(t, p->add_tensors());
      break;
    case T::kGraphs:
      p->set_type(onnx::AttributeProto::GRAPHS);
      for (const auto& sg : a.graphs) graph_to_proto(*sg, p->add_graphs(), domains);
      break;
    case T::kTypeProto:
      p->set_type(onnx::AttributeProto::TYPE_PROTO);
      type_to_proto(a.type_proto, p->mutable_tp());
      break;
  }
}

void graph_to_proto(const ir::Graph& g, onnx::GraphProto* gp, std::set<std::string>* domains) {
  gp->set_name(g.name.empty() ? "graph" : g.name);
  std::set<std::string> listed(g.inputs.begin(), g.inputs.end());
  listed.insert(g.outputs.begin(), g.outputs.end());
  for (const auto& [name, v] : g.values) {
    if (!v.initializer) continue;
    onnx::TensorProto* tp = gp->add_initializer();
    tensor_to_proto(*v.initializer, tp);
    tp->set_name(name);
    listed.insert(name);
  }
  for (const auto& in : g.inputs) value_info(g, in, gp->add_input());
  for (const auto& out : g.outputs) value_info(g, out, gp->add_output());
  for (const auto& n : g.nodes) {
    onnx::NodeProto* np = gp->add_node();
    np->set_name(n->name);
    np->set_op_type(n->op_type);
    if (!n->domain.empty()) np->set_domain(n->domain);
    domains->insert(n->domain);
    for (const auto& in : n->inputs) np->add_input(in);
    for (const auto& out : n->outputs) np->add_output(out);
    for (const auto& [key, a] : n->attributes) attribute_to_proto(a, np->add_attribute(), domains);
    // Intermediate values with a known type: value_info (Netron shows shapes).
    for (const auto& out : n->outputs) {
      if (out.empty() || listed.count(out)) continue;
      const ir::Value* v = g.find_value(out);
      if (!v || v->type.kind == ir::ValueType::Kind::kUnknown) continue;
      value_info(g, out, gp->add_value_info());
    }
  }
}

}  // namespace

Expected<std::string> serialize_onnx_model(const ir::Model& model) {
  onnx::ModelProto mp;
  // IR 7 at least: initializers need not be listed as graph inputs.
  mp.set_ir_version(std::max<int64_t>(model.ir_version, 7));
  mp.set_producer_name("peregrine");
  std::set<std::string> domains;
  graph_to_proto(model.graph, mp.mutable_graph(), &domains);
  std::map<std::string, int> opsets = model.graph.opsets;
  for (const auto& d : domains)
    if (!opsets.count(d)) opsets[d] = 1;
  for (const auto& [domain, version] : opsets) {
    auto* op = mp.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }
  std::string bytes;
  if (mp.ByteSizeLong() > (size_t{2} << 30) - 1)
    return unsupported("the optimized model exceeds protobuf's 2 GiB limit");
  if (!mp.SerializeToString(&bytes)) return internal_error("cannot serialize the model");
  return bytes;
}

Status save_onnx_model(const ir::Model& model, const std::string& path, bool overwrite) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!overwrite && fs::exists(path, ec))
    return invalid_input("'" + path + "' already exists (pass --overwrite to replace it)");
  PG_ASSIGN_OR_RETURN(std::string bytes, serialize_onnx_model(model));
  return write_file_atomically(path, bytes);
}

}  // namespace peregrine
