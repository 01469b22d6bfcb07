// libFuzzer target, structure-aware: a valid model with one meaning-bearing field changed, then
// the whole pipeline on it: import, verifier, shape inference, passes, memory plan, kernel
// preparation and one run on small inputs, under a memory budget.
//
// The custom mutator parses the input as a ModelProto and changes one field of it: a dim of a
// graph input, output or value_info; an attribute value or its type; an initializer's dtype, dims
// or data length; a node's input or output name or op type; an opset; an external-data entry;
// a node dropped or duplicated. Subgraphs (If / Loop / Scan bodies) are picked like the main
// graph. Inputs that do not parse fall back to libFuzzer's byte-level mutation, so the seed
// corpus (valid models) keeps most of the search on meaningful models.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fuzz_limits.h"
#include "onnx/onnx-ml.pb.h"
#include "peregrine/session.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using Rng = std::mt19937_64;

int64_t pick(Rng& rng, int64_t n) { return n <= 0 ? 0 : static_cast<int64_t>(rng() % n); }

// Values that sit on the edges of what kernels and checks expect.
int64_t interesting_int(Rng& rng) {
  static const int64_t kValues[] = {-1,
                                    0,
                                    1,
                                    2,
                                    3,
                                    7,
                                    16,
                                    255,
                                    65536,
                                    int64_t{1} << 31,
                                    int64_t{1} << 45,
                                    -(int64_t{1} << 62),
                                    INT64_MAX,
                                    INT64_MIN};
  return pick(rng, 4) == 0 ? static_cast<int64_t>(rng()) : kValues[pick(rng, std::size(kValues))];
}

// Every graph of the model: the main one and the bodies of control-flow attributes.
void collect_graphs(onnx::GraphProto* g, std::vector<onnx::GraphProto*>* out) {
  out->push_back(g);
  for (auto& node : *g->mutable_node())
    for (auto& a : *node.mutable_attribute()) {
      if (a.has_g()) collect_graphs(a.mutable_g(), out);
      for (auto& sg : *a.mutable_graphs()) collect_graphs(&sg, out);
    }
}

void mutate_type(onnx::TypeProto* type, Rng& rng) {
  if (!type->has_tensor_type()) return;
  auto* t = type->mutable_tensor_type();
  if (pick(rng, 4) == 0) {
    t->set_elem_type(static_cast<int32_t>(pick(rng, 26)));
    return;
  }
  auto* shape = t->mutable_shape();
  if (shape->dim_size() == 0 || pick(rng, 5) == 0) {
    shape->add_dim()->set_dim_value(interesting_int(rng));
    return;
  }
  auto* dim = shape->mutable_dim(static_cast<int>(pick(rng, shape->dim_size())));
  if (pick(rng, 4) == 0)
    dim->set_dim_param("n" + std::to_string(pick(rng, 3)));
  else
    dim->set_dim_value(interesting_int(rng));
}

void mutate_attribute(onnx::AttributeProto* a, Rng& rng) {
  switch (pick(rng, 6)) {
    case 0:
      a->set_i(interesting_int(rng));
      break;
    case 1:
      if (a->ints_size() > 0)
        a->set_ints(static_cast<int>(pick(rng, a->ints_size())), interesting_int(rng));
      else
        a->add_ints(interesting_int(rng));
      break;
    case 2:
      if (a->ints_size() > 0) a->mutable_ints()->RemoveLast();
      break;
    case 3:
      a->set_f(pick(rng, 2) ? -1.0f : 1e30f);
      break;
    case 4:
      a->set_type(static_cast<onnx::AttributeProto::AttributeType>(pick(rng, 15)));
      break;
    default:
      a->set_s(pick(rng, 2) ? "" : "bogus");
      break;
  }
}

void mutate_initializer(onnx::TensorProto* t, Rng& rng) {
  switch (pick(rng, 5)) {
    case 0:
      t->set_data_type(static_cast<int32_t>(pick(rng, 26)));
      break;
    case 1:
      if (t->dims_size() > 0)
        t->set_dims(static_cast<int>(pick(rng, t->dims_size())), interesting_int(rng));
      else
        t->add_dims(interesting_int(rng));
      break;
    case 2:
      if (!t->raw_data().empty())
        t->mutable_raw_data()->resize(static_cast<size_t>(pick(rng, t->raw_data().size())));
      break;
    case 3: {
      t->set_data_location(onnx::TensorProto::EXTERNAL);
      auto* e = t->add_external_data();
      e->set_key(pick(rng, 2) ? "location" : "offset");
      e->set_value(pick(rng, 2) ? "../../etc/passwd" : std::to_string(interesting_int(rng)));
      break;
    }
    default:
      t->add_dims(1);
      break;
  }
}

void mutate_node(onnx::GraphProto* g, Rng& rng) {
  if (g->node_size() == 0) return;
  const int index = static_cast<int>(pick(rng, g->node_size()));
  onnx::NodeProto* n = g->mutable_node(index);
  switch (pick(rng, 7)) {
    case 0:
    case 1:
      if (n->attribute_size() > 0)
        mutate_attribute(n->mutable_attribute(static_cast<int>(pick(rng, n->attribute_size()))),
                         rng);
      break;
    case 2: {  // an input renamed: another value of the graph, empty, or undefined
      if (n->input_size() == 0) break;
      std::string name = pick(rng, 3) == 0 ? "" : "undefined_value";
      const onnx::NodeProto& other = g->node(static_cast<int>(pick(rng, g->node_size())));
      if (pick(rng, 2) && other.output_size() > 0) name = other.output(0);
      n->set_input(static_cast<int>(pick(rng, n->input_size())), name);
      break;
    }
    case 3:
      if (n->input_size() > 0 && pick(rng, 2))
        n->mutable_input()->RemoveLast();
      else
        n->add_input(g->input_size() > 0 ? g->input(0).name() : "");
      break;
    case 4:
      if (n->output_size() > 0)
        n->set_output(static_cast<int>(pick(rng, n->output_size())), pick(rng, 2) ? ""
                                                                     : g->node(0).output_size()
                                                                         ? g->node(0).output(0)
                                                                         : "");
      break;
    case 5: {
      const onnx::NodeProto& other = g->node(static_cast<int>(pick(rng, g->node_size())));
      n->set_op_type(other.op_type());
      break;
    }
    default:
      if (pick(rng, 2))
        g->mutable_node()->DeleteSubrange(index, 1);
      else
        *g->add_node() = *n;
      break;
  }
}

void mutate_model(onnx::ModelProto* m, Rng& rng) {
  std::vector<onnx::GraphProto*> graphs;
  collect_graphs(m->mutable_graph(), &graphs);
  onnx::GraphProto* g = graphs[static_cast<size_t>(pick(rng, static_cast<int64_t>(graphs.size())))];
  switch (pick(rng, 7)) {
    case 0:
    case 1:
      mutate_node(g, rng);
      break;
    case 2: {
      auto* infos = pick(rng, 3) == 0 ? g->mutable_output()
                    : pick(rng, 2)    ? g->mutable_input()
                                      : g->mutable_value_info();
      if (!infos->empty())
        mutate_type((*infos)[static_cast<int>(pick(rng, infos->size()))].mutable_type(), rng);
      break;
    }
    case 3:
      if (g->initializer_size() > 0)
        mutate_initializer(
            g->mutable_initializer(static_cast<int>(pick(rng, g->initializer_size()))), rng);
      break;
    case 4:
      if (m->opset_import_size() > 0)
        m->mutable_opset_import(static_cast<int>(pick(rng, m->opset_import_size())))
            ->set_version(pick(rng, 2) ? pick(rng, 32) : interesting_int(rng));
      break;
    case 5:
      if (g->input_size() > 0 && pick(rng, 2))
        g->mutable_input()->RemoveLast();
      else if (g->output_size() > 0)
        g->mutable_output()->RemoveLast();
      break;
    default:
      m->set_ir_version(pick(rng, 12));
      break;
  }
}

// Zeros for every tensor input of the session (unknown dims 1), or false when an input is not a
// plain tensor or larger than kMaxInputElements.
bool make_inputs(const peregrine::Session& session, std::map<std::string, peregrine::Tensor>* out) {
  for (const peregrine::IoInfo& io : session.inputs()) {
    if (!io.is_tensor || io.dtype == peregrine::DType::kUndefined ||
        io.dtype == peregrine::DType::kString)
      return false;
    peregrine::Shape shape = io.shape;
    int64_t elements = 1;
    for (int64_t& d : shape) {
      if (d < 0) d = 1;
      if (d > peregrine::fuzz::kMaxInputElements) return false;
      elements *= d;
      if (elements > peregrine::fuzz::kMaxInputElements) return false;
    }
    auto t = peregrine::Tensor::make(io.dtype, shape);
    if (!t.is_ok()) return false;
    std::memset(t.value().raw(), 0, t.value().nbytes());
    (*out)[io.name] = std::move(t).value();
  }
  return true;
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  onnx::ModelProto model;
  Rng rng(seed);
  if (pick(rng, 8) == 0 || !model.ParseFromArray(data, static_cast<int>(size)))
    return LLVMFuzzerMutate(data, size, max_size);
  mutate_model(&model, rng);
  const std::string bytes = model.SerializeAsString();
  if (bytes.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  peregrine::SessionOptions options;
  options.num_threads = 1;
  options.backend = "cpu";
  options.memory_limit_bytes = peregrine::fuzz::kSessionMemoryLimitBytes;
  auto session = peregrine::Session::load_from_bytes(
      std::string(reinterpret_cast<const char*>(data), size), options);
  if (!session.is_ok()) return 0;
  std::map<std::string, peregrine::Tensor> inputs;
  if (make_inputs(*session.value(), &inputs)) (void)session.value()->run(inputs);
  return 0;
}
