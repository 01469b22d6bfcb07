// The ONNX loader: dtypes, external data, symbolic dims, functions, opsets, limits;
// the verifier; and static shape inference with constant propagation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "backends/reference/evaluate.h"
#include "importer/onnx/onnx_importer.h"
#include "ir/printer.h"
#include "onnx/onnx-ml.pb.h"
#include "ops/type_inference.h"
#include "peregrine/session.h"

namespace peregrine {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/peregrine_test_XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void add_value_info(onnx::ValueInfoProto* vi, const std::string& name, int elem,
                    const std::vector<std::string>& dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (const auto& d : dims) {
    auto* dim = shape->add_dim();
    if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0])))
      dim->set_dim_value(std::stoll(d));
    else
      dim->set_dim_param(d);
  }
}

onnx::ModelProto model_with(int opset) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                          std::vector<std::string> out, const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? out[0] : name);
  for (auto& i : in) n->add_input(i);
  for (auto& o : out) n->add_output(o);
  return n;
}

Expected<ir::Model> parse(const onnx::ModelProto& m, const std::string& dir = "") {
  return parse_onnx_model(m.SerializeAsString(), dir, "test.onnx");
}

TEST(Importer, Float16AndBFloat16Initializers) {
  auto m = model_with(17);
  auto* g = m.mutable_graph();
  auto* h = g->add_initializer();
  h->set_name("h");
  h->set_data_type(onnx::TensorProto::FLOAT16);
  h->add_dims(2);
  h->add_int32_data(Float16(1.5f).bits);
  h->add_int32_data(Float16(-2.f).bits);
  auto* b = g->add_initializer();
  b->set_name("b");
  b->set_data_type(onnx::TensorProto::BFLOAT16);
  b->add_dims(1);
  uint16_t bits = BFloat16(3.f).bits;
  b->set_raw_data(std::string(reinterpret_cast<const char*>(&bits), 2));
  add_value_info(g->add_output(), "h", onnx::TensorProto::FLOAT16, {"2"});
  add_value_info(g->add_output(), "b", onnx::TensorProto::BFLOAT16, {"1"});
  auto model = parse(m);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const Tensor& ht = *model->graph.find_value("h")->initializer;
  EXPECT_EQ(static_cast<float>(ht.data<Float16>()[0]), 1.5f);
  EXPECT_EQ(static_cast<float>(ht.data<Float16>()[1]), -2.f);
  EXPECT_EQ(static_cast<float>(model->graph.find_value("b")->initializer->data<BFloat16>()[0]),
            3.f);
}

TEST(Importer, RawDataLengthMustMatchDims) {
  auto m = model_with(17);
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(3);
  t->set_raw_data(std::string(8, '\0'));
  auto model = parse(m);
  ASSERT_FALSE(model.is_ok());
  EXPECT_NE(model.status().message().find("tensor 'w': raw_data has 8 bytes"), std::string::npos);
  EXPECT_EQ(model.status().exit_code(), 2);
}

// Found by fuzz_tensor_proto: dims of billions of elements with a few typed values are refused
// by the count check, before a tensor that size is allocated (an 11 GB allocation before).
TEST(Importer, TypedDataCountIsCheckedBeforeAllocating) {
  onnx::TensorProto t;
  t.set_name("w");
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(50000);
  t.add_dims(60000);
  t.add_float_data(1.0f);
  auto got = tensor_from_proto(t, "");
  ASSERT_FALSE(got.is_ok());
  EXPECT_NE(got.status().message().find("float_data has 1 values"), std::string::npos)
      << got.status().message();
}

// Found by fuzz_tensor_proto: the packed byte count of a 4-bit tensor with INT64_MAX elements
// overflowed.
TEST(Importer, FourBitElementCountAtTheLimitIsRefused) {
  onnx::TensorProto t;
  t.set_name("q");
  t.set_data_type(onnx::TensorProto::INT4);
  t.add_dims(INT64_MAX);
  EXPECT_FALSE(tensor_from_proto(t, "").is_ok());
}

// int2 / uint2 pack four elements per byte and float4e2m1 two, from the low bits up, in
// raw_data and in int32_data alike; tensor_to_proto packs them back the same way.
TEST(Importer, SubByteTypesUnpackAndPackBack) {
  struct Case {
    int type;  // TensorProto data_type: the bundled onnx.proto predates these three names
    std::vector<int> packed;
    std::vector<int> elements;  // as stored in memory (signed types sign-extended)
  };
  const std::vector<Case> cases = {
      {static_cast<int>(DType::kInt2), {0x38, 0x01}, {0, -2, -1, 0, 1}},
      {static_cast<int>(DType::kUInt2), {0xE4, 0x03}, {0, 1, 2, 3, 3}},
      {static_cast<int>(DType::kFloat4E2M1), {0xA1, 0x07}, {1, 10, 7}},
  };
  for (const Case& c : cases) {
    for (bool raw : {true, false}) {
      onnx::TensorProto t;
      t.set_name("q");
      t.set_data_type(c.type);
      t.add_dims(static_cast<int64_t>(c.elements.size()));
      if (raw)
        t.set_raw_data(std::string(c.packed.begin(), c.packed.end()));
      else
        for (int b : c.packed) t.add_int32_data(b);
      auto got = tensor_from_proto(t, "");
      ASSERT_TRUE(got.is_ok()) << got.status().message();
      for (size_t i = 0; i < c.elements.size(); ++i)
        EXPECT_EQ(static_cast<int8_t>(got->data<uint8_t>()[i]), c.elements[i])
            << c.type << " " << i;
      onnx::TensorProto back;
      tensor_to_proto(*got, &back);
      EXPECT_EQ(back.raw_data(), std::string(c.packed.begin(), c.packed.end())) << c.type;
    }
  }
}

TEST(Importer, ExternalDataInsideFolderLoads) {
  TempDir dir;
  std::vector<float> values{1, 2, 3, 4};
  {
    std::ofstream f(dir.path() + "/weights.bin", std::ios::binary);
    f.write("pad!", 4);  // offset 4
    f.write(reinterpret_cast<const char*>(values.data()), 16);
  }
  auto m = model_with(17);
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto [k, v] : {std::pair<const char*, const char*>{"location", "weights.bin"},
                      {"offset", "4"},
                      {"length", "16"}}) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  add_value_info(m.mutable_graph()->add_output(), "w", onnx::TensorProto::FLOAT, {"4"});
  auto model = parse(m, dir.path());
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  EXPECT_EQ(model->graph.find_value("w")->initializer->data<float>()[3], 4.f);
  // The same model with no folder to read from is refused.
  EXPECT_FALSE(parse(m, "").is_ok());
}

TEST(Importer, SymbolicDimsArePreserved) {
  auto m = model_with(17);
  auto* g = m.mutable_graph();
  add_value_info(g->add_input(), "x", onnx::TensorProto::FLOAT, {"batch", "3"});
  add_node(g, "Relu", {"x"}, {"y"});
  add_value_info(g->add_output(), "y", onnx::TensorProto::FLOAT, {"batch", "3"});
  auto model = parse(m);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const auto& t = model->graph.find_value("x")->type;
  EXPECT_EQ(t.dims[0], -1);
  EXPECT_EQ(t.dim_names[0], "batch");
  EXPECT_EQ(t.to_string(), "float32[batch,3]");
}

TEST(Importer, ModelLocalFunctionsAreInlined) {
  auto m = model_with(17);
  auto* imp = m.add_opset_import();
  imp->set_domain("custom");
  imp->set_version(1);
  auto* fn = m.add_functions();
  fn->set_name("AddRelu");
  fn->set_domain("custom");
  fn->add_input("a");
  fn->add_input("b");
  fn->add_output("c");
  auto* op = fn->add_opset_import();
  op->set_domain("");
  op->set_version(17);
  auto* n1 = fn->add_node();
  n1->set_op_type("Add");
  n1->add_input("a");
  n1->add_input("b");
  n1->add_output("s");
  auto* n2 = fn->add_node();
  n2->set_op_type("Relu");
  n2->add_input("s");
  n2->add_output("c");
  auto* g = m.mutable_graph();
  add_value_info(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2"});
  add_value_info(g->add_input(), "y", onnx::TensorProto::FLOAT, {"2"});
  auto* call = add_node(g, "AddRelu", {"x", "y"}, {"z"}, "call");
  call->set_domain("custom");
  add_value_info(g->add_output(), "z", onnx::TensorProto::FLOAT, {"2"});
  auto model = parse(m);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  ASSERT_EQ(model->graph.nodes.size(), 2u);
  EXPECT_EQ(model->graph.nodes[0]->op_type, "Add");
  EXPECT_EQ(model->graph.nodes[1]->op_type, "Relu");
  EXPECT_EQ(model->graph.nodes[1]->outputs[0], "z");
}

TEST(Importer, RecursiveFunctionIsRefused) {
  auto m = model_with(17);
  auto* imp = m.add_opset_import();
  imp->set_domain("custom");
  imp->set_version(1);
  auto* fn = m.add_functions();
  fn->set_name("Loopy");
  fn->set_domain("custom");
  fn->add_input("a");
  fn->add_output("c");
  auto* n = fn->add_node();
  n->set_op_type("Loopy");
  n->set_domain("custom");
  n->add_input("a");
  n->add_output("c");
  auto* g = m.mutable_graph();
  add_value_info(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2"});
  add_node(g, "Loopy", {"x"}, {"z"})->set_domain("custom");
  add_value_info(g->add_output(), "z", onnx::TensorProto::FLOAT, {"2"});
  auto model = parse(m);
  ASSERT_FALSE(model.is_ok());
  EXPECT_NE(model.status().message().find("nested deeper"), std::string::npos);
}

TEST(Importer, OpsetRange) {
  for (int opset : {7, 13, kMaxOnnxOpset}) {
    auto m = model_with(opset);
    add_value_info(m.mutable_graph()->add_input(), "x", onnx::TensorProto::FLOAT, {"1"});
    add_node(m.mutable_graph(), "Relu", {"x"}, {"y"});
    add_value_info(m.mutable_graph()->add_output(), "y", onnx::TensorProto::FLOAT, {"1"});
    EXPECT_TRUE(parse(m).is_ok()) << opset;
  }
  EXPECT_FALSE(parse(model_with(kMaxOnnxOpset + 1)).is_ok());
}

TEST(Importer, FileSizeLimit) {
  TempDir dir;
  auto m = model_with(17);
  std::string path = dir.path() + "/m.onnx";
  std::ofstream(path, std::ios::binary) << m.SerializeAsString() << std::string(200, '\0');
  ImportLimits limits;
  limits.max_file_bytes = 100;
  auto model = load_onnx_model(path, limits);
  ASSERT_FALSE(model.is_ok());
  EXPECT_NE(model.status().message().find("over the limit"), std::string::npos);
}

TEST(Verifier, SortsNodesTopologically) {
  auto m = model_with(17);
  auto* g = m.mutable_graph();
  add_value_info(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2"});
  add_node(g, "Relu", {"a"}, {"b"});  // listed before its producer
  add_node(g, "Neg", {"x"}, {"a"});
  add_value_info(g->add_output(), "b", onnx::TensorProto::FLOAT, {"2"});
  auto model = parse(m);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  EXPECT_EQ(model->graph.nodes[0]->op_type, "Neg");
  EXPECT_EQ(model->graph.nodes[1]->op_type, "Relu");
  // The printer shows the sorted order with types and the node names.
  std::string text = ir::print_graph(model->graph);
  EXPECT_LT(text.find("= Neg(%x)"), text.find("= Relu(%a)")) << text;
  EXPECT_NE(text.find("%b: float32[2] = Relu(%a)  # b"), std::string::npos) << text;
}

TEST(Verifier, SubgraphMayReadOuterValues) {
  auto m = model_with(17);
  auto* g = m.mutable_graph();
  add_value_info(g->add_input(), "c", onnx::TensorProto::BOOL, {});
  add_value_info(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2"});
  auto* node = add_node(g, "If", {"c"}, {"y"}, "if_0");
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* a = node->add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto* sg = a->mutable_g();
    sg->set_name(branch);
    add_node(sg, std::string(branch) == "then_branch" ? "Relu" : "Neg", {"x"},
             {std::string(branch) + "_out"});
    add_value_info(sg->add_output(), std::string(branch) + "_out", onnx::TensorProto::FLOAT, {"2"});
  }
  add_value_info(g->add_output(), "y", onnx::TensorProto::FLOAT, {"2"});
  auto model = parse(m);
  ASSERT_TRUE(model.is_ok()) << model.status().message();

  // And a subgraph reading a name nobody defines is refused.
  node->mutable_attribute(0)->mutable_g()->mutable_node(0)->set_input(0, "ghost");
  auto bad = parse(m);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("'ghost'"), std::string::npos);
}

TEST(TypeInference, ShapeChainFoldsToStaticReshape) {
  // x[2,3,4] -> Shape -> Gather(0) -> Unsqueeze -> Concat(-1) -> Reshape: the torch export pattern.
  auto m = model_with(17);
  auto* g = m.mutable_graph();
  add_value_info(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2", "3", "4"});
  auto add_i64 = [&](const std::string& name, std::vector<int64_t> v, bool scalar) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    if (!scalar) t->add_dims(static_cast<int64_t>(v.size()));
    for (auto x : v) t->add_int64_data(x);
  };
  add_i64("zero", {0}, true);
  add_i64("axes0", {0}, false);
  add_i64("minus1", {-1}, false);
  add_node(g, "Shape", {"x"}, {"s"});
  add_node(g, "Gather", {"s", "zero"}, {"batch"});
  add_node(g, "Unsqueeze", {"batch", "axes0"}, {"batch1"});
  add_node(g, "Concat", {"batch1", "minus1"}, {"target"})->add_attribute()->CopyFrom([] {
    onnx::AttributeProto a;
    a.set_name("axis");
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(0);
    return a;
  }());
  add_node(g, "Reshape", {"x", "target"}, {"y"});
  add_value_info(g->add_output(), "y", onnx::TensorProto::FLOAT, {});
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  auto model = parse(m);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  auto result = infer_graph_types(model->graph, reference_evaluator());
  ASSERT_TRUE(result.is_ok()) << result.status().message();
  const auto& y = model->graph.find_value("y")->type;
  ASSERT_TRUE(y.is_static()) << y.to_string();
  EXPECT_EQ(y.dims, (Shape{2, 12}));
}

}  // namespace
}  // namespace peregrine
