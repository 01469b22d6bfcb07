// The Triton backend's config logic (src/serving/) and the JSON value tree it works on: parsing,
// completion from the model, checks against the model, parameters, batch layout. The server
// itself is exercised by tests/serving/test_triton.py.
#include "serving/triton_model_config.h"

#include <gtest/gtest.h>

#include "core/json_value.h"

namespace peregrine::serving {
namespace {

IoInfo tensor(const std::string& name, DType dtype, Shape shape) {
  IoInfo io;
  io.name = name;
  io.dtype = dtype;
  io.shape = std::move(shape);
  io.type = std::string(dtype_name(dtype));
  return io;
}

Json parse(const std::string& text) {
  auto j = parse_json(text);
  EXPECT_TRUE(j.is_ok()) << j.status().message();
  return j.is_ok() ? *j : Json();
}

TEST(JsonValue, ParsesWritesAndKeepsMemberOrder) {
  Json j =
      parse(R"({"b": [1, 2.5, "s\u00e9\ud83d\ude00"], "a": {"t": true, "n": null}, "c": -3e2})");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.keys, (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(j.get("b")->array[2].string, "s\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(j.get("c")->number, -300);
  EXPECT_EQ(j.get("missing"), nullptr);
  j.set("a", Json::make_number(7));
  j.set("d", Json::make_string("x\"y"));
  EXPECT_EQ(to_json_text(j), R"({"b":[1,2.5,"sé😀"],"a":7,"c":-300,"d":"x\"y"})");
  EXPECT_EQ(to_json_text(parse(to_json_text(j))), to_json_text(j));
}

TEST(JsonValue, RejectsMalformedTextWithOffset) {
  for (const char* bad : {"{", "[1,]", "{\"a\" 1}", "\"open", "1 2", "tru", "{\"a\":\"\\q\"}"}) {
    auto j = parse_json(bad);
    ASSERT_FALSE(j.is_ok()) << bad;
    EXPECT_NE(j.status().message().find("malformed JSON at offset"), std::string::npos) << bad;
  }
  std::string deep(100, '[');
  EXPECT_FALSE(parse_json(deep + std::string(100, ']')).is_ok());
}

TEST(TritonModelConfig, CompletesABatchableModelFromAnEmptyConfig) {
  std::vector<IoInfo> inputs = {tensor("image", DType::kFloat32, {-1, 3, 224, 224})};
  std::vector<IoInfo> outputs = {tensor("logits", DType::kFloat32, {-1, 1000})};
  Json config = parse(R"({"name": "m", "max_batch_size": 0, "input": [], "output": []})");
  auto changed = complete_triton_model_config(&config, inputs, outputs, 4);
  ASSERT_TRUE(changed.is_ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(config.get("max_batch_size")->number, 4);
  EXPECT_TRUE(config.get("dynamic_batching")->is_object());
  auto parsed = parse_triton_model_config(config);
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
  ASSERT_EQ(parsed->inputs.size(), 1u);
  EXPECT_EQ(parsed->inputs[0].name, "image");
  EXPECT_EQ(parsed->inputs[0].dtype, DType::kFloat32);
  EXPECT_EQ(parsed->inputs[0].dims, (Shape{3, 224, 224}));  // the batch dim left to Triton
  EXPECT_EQ(parsed->outputs[0].dims, (Shape{1000}));
  EXPECT_TRUE(check_triton_model_config(*parsed, inputs, outputs).is_ok());
  // Completing again changes nothing.
  auto again = complete_triton_model_config(&config, inputs, outputs, 4);
  ASSERT_TRUE(again.is_ok());
  EXPECT_FALSE(*again);
}

TEST(TritonModelConfig, LeavesFixedShapesAndWrittenEntriesAlone) {
  // A fixed first dim: no batching, full shapes.
  std::vector<IoInfo> inputs = {tensor("x", DType::kInt64, {1, 16})};
  std::vector<IoInfo> outputs = {tensor("y", DType::kFloat32, {1, -1})};
  Json config = parse(R"({"max_batch_size": 0})");
  ASSERT_TRUE(complete_triton_model_config(&config, inputs, outputs, 8).is_ok());
  EXPECT_EQ(config.get("max_batch_size")->number, 0);
  EXPECT_EQ(config.get("dynamic_batching"), nullptr);
  auto parsed = parse_triton_model_config(config);
  ASSERT_TRUE(parsed.is_ok());
  EXPECT_EQ(parsed->inputs[0].dims, (Shape{1, 16}));
  EXPECT_EQ(parsed->inputs[0].dtype, DType::kInt64);
  EXPECT_EQ(parsed->outputs[0].dims, (Shape{1, -1}));
  // Inputs the config lists (dims as protobuf's JSON writes int64: strings) are kept, and no
  // batching is added under them even where the model could batch.
  std::vector<IoInfo> batchable = {tensor("x", DType::kFloat32, {-1, 4})};
  std::vector<IoInfo> batchable_out = {tensor("y", DType::kFloat32, {-1, 4})};
  Json listed = parse(
      R"({"max_batch_size": 0, "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": ["-1", "4"]}]})");
  ASSERT_TRUE(complete_triton_model_config(&listed, batchable, batchable_out, 8).is_ok());
  EXPECT_EQ(listed.get("max_batch_size")->number, 0);
  EXPECT_EQ(listed.get("input")->array.size(), 1u);
  EXPECT_EQ(listed.get("output")->array.size(), 1u);
  auto p = parse_triton_model_config(listed);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_EQ(p->inputs[0].dims, (Shape{-1, 4}));
}

TEST(TritonModelConfig, ChecksTheConfigAgainstTheModel) {
  std::vector<IoInfo> inputs = {tensor("x", DType::kFloat32, {-1, 3, 8})};
  std::vector<IoInfo> outputs = {tensor("y", DType::kFloat32, {-1, 5})};
  auto check = [&](const std::string& text) {
    auto c = parse_triton_model_config(parse(text));
    if (!c.is_ok()) return c.status().message();
    Status s = check_triton_model_config(*c, inputs, outputs);
    return s.is_ok() ? std::string("ok") : s.message();
  };
  const std::string y = R"("output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [5]}])";
  EXPECT_EQ(
      check(
          R"({"max_batch_size": 4, "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [3, 8]}], )" +
          y + "}"),
      "ok");
  // A free dim where the model fixes one would let requests through that the model refuses.
  EXPECT_EQ(
      check(
          R"({"max_batch_size": 4, "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [3, -1]}], )" +
          y + "}"),
      "model config: input 'x' has dims [3,-1] but the model's are [3,8] (past the batch dim)");
  EXPECT_EQ(
      check(
          R"({"max_batch_size": 0, "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [-1, 3, 8]}]})"),
      "ok");
  EXPECT_EQ(
      check(
          R"({"max_batch_size": 4, "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [3, 9]}]})"),
      "model config: input 'x' has dims [3,9] but the model's are [3,8] (past the batch dim)");
  EXPECT_EQ(
      check(
          R"({"max_batch_size": 4, "input": [{"name": "x", "data_type": "TYPE_FP16", "dims": [3, 8]}]})"),
      "model config: input 'x' has data_type TYPE_FP16 but the model's is float32");
  EXPECT_EQ(
      check(
          R"({"max_batch_size": 4, "input": [{"name": "z", "data_type": "TYPE_FP32", "dims": [3, 8]}]})"),
      "model config: input 'z' is not an input of the model");
  EXPECT_EQ(check(R"({"max_batch_size": 4, "input": []})"),
            "model config: the model's input 'x' is not configured");
  EXPECT_EQ(
      check(
          R"({"max_batch_size": 4, "input": [{"name": "x", "data_type": "TYPE_STRING", "dims": [3, 8]}]})"),
      "model config: input 'x': data_type TYPE_STRING is not supported by the peregrine backend");
  EXPECT_EQ(check(R"({"max_batch_size": -1})"), "model config: max_batch_size is negative");
  // Batching a model whose first dim is fixed.
  inputs = {tensor("x", DType::kFloat32, {1, 3, 8})};
  EXPECT_EQ(
      check(
          R"({"max_batch_size": 4, "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [3, 8]}]})"),
      "model config: input 'x': max_batch_size > 0 needs a free first dim, but the model's "
      "shape is [1,3,8]");
}

TEST(TritonModelConfig, ParametersBecomeSessionOptions) {
  auto o = session_options_from_parameters(
      {{"threads", "2"}, {"precision", "fp32"}, {"opt_level", "1"}, {"memory_limit", "1048576"}});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->num_threads, 2);
  EXPECT_EQ(o->opt_level, 1);
  EXPECT_EQ(o->memory_limit_bytes, 1048576);
  EXPECT_EQ(o->precision, Precision::kFloat32);
  EXPECT_EQ(session_options_from_parameters({{"threads", "0"}}).status().message(),
            "model config: parameter threads = '0': expected an integer in [1, 1024]");
  EXPECT_EQ(session_options_from_parameters({{"threads", "2x"}}).status().code(),
            StatusCode::kInvalidModel);
  EXPECT_FALSE(session_options_from_parameters({{"precision", "fp64"}}).is_ok());
  EXPECT_NE(session_options_from_parameters({{"thread", "2"}})
                .status()
                .message()
                .find("unknown parameter 'thread'"),
            std::string::npos);
}

TEST(TritonModelConfig, PlansBatchesAlongTheFirstDim) {
  auto layout = plan_batch("x", {{2, 3}, {1, 3}, {4, 3}});
  ASSERT_TRUE(layout.is_ok());
  EXPECT_EQ(layout->total_rows, 7);
  EXPECT_EQ(layout->row_offset, (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(layout->rows, (std::vector<int64_t>{2, 1, 4}));
  EXPECT_EQ(
      plan_batch("x", {{2, 3}, {1, 4}}).status().message(),
      "input 'x' of request 1 has shape [1,4], which cannot join request 0's [2,3] in a batch");
  EXPECT_FALSE(plan_batch("x", {{2, 3}, {1, 3, 1}}).is_ok());
  EXPECT_FALSE(plan_batch("x", {{}}).is_ok());
}

TEST(TritonModelConfig, TypeNamesRoundTrip) {
  for (DType t : {DType::kBool, DType::kUInt8, DType::kInt8, DType::kInt32, DType::kInt64,
                  DType::kFloat16, DType::kFloat32, DType::kFloat64, DType::kBFloat16}) {
    std::string_view name = triton_config_type(t);
    ASSERT_FALSE(name.empty());
    auto back = dtype_from_triton_config_type(name, "t");
    ASSERT_TRUE(back.is_ok());
    EXPECT_EQ(*back, t);
  }
  EXPECT_TRUE(triton_config_type(DType::kString).empty());
  EXPECT_TRUE(triton_config_type(DType::kComplex64).empty());
}

}  // namespace
}  // namespace peregrine::serving
