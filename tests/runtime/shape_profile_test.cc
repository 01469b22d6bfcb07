// Shape profiles: checked against the model when a session is created, and every run's inputs
// checked against them (run_values and run_into), with errors that name the input and range.
#include <gtest/gtest.h>

#include "passes/graph_builder.h"
#include "peregrine/session.h"
#include "runtime/session_internals.h"

namespace peregrine {
namespace {

// y = Relu(x), x of shape (N, 4) with N symbolic.
ir::Model relu_model() {
  testing::GraphBuilder b;
  b.output(b.op("Relu", {b.input("x", {-1, 4})}));
  ir::Model m;
  m.ir_version = 8;
  m.graph = b.build();
  return m;
}

Expected<std::unique_ptr<Session>> with_profile(ShapeProfile p, Shape fixed = {}) {
  SessionOptions options;
  options.shape_profiles["x"] = std::move(p);
  if (!fixed.empty()) options.input_shapes["x"] = std::move(fixed);
  return session_from_model(relu_model(), options);
}

TEST(ShapeProfile, RunsInsideTheRangeOnly) {
  auto s = with_profile({{1, 4}, {2, 4}, {3, 4}});
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  for (int64_t n : {1, 2, 3}) {
    auto out = (*s)->run({{"x", testing::random_tensor({n, 4}, 1)}});
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    EXPECT_EQ(out->begin()->second.shape(), (Shape{n, 4}));
  }
  auto over = (*s)->run({{"x", testing::random_tensor({4, 4}, 1)}});
  ASSERT_FALSE(over.is_ok());
  EXPECT_NE(over.status().message().find("input 'x' has shape 4x4, outside its shape profile "
                                         "1x4..3x4"),
            std::string::npos)
      << over.status().message();
}

TEST(ShapeProfile, RunIntoChecksTheRangeToo) {
  auto s = with_profile({{1, 4}, {2, 4}, {2, 4}}, {2, 4});
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  std::vector<Tensor> outputs = {Tensor::zeros(DType::kFloat32, {2, 4})};
  EXPECT_TRUE((*s)->run_into({testing::random_tensor({2, 4}, 1)}, outputs).is_ok());
  const Status bad = (*s)->run_into({testing::random_tensor({2, 5}, 1)}, outputs);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("outside its shape profile"), std::string::npos) << bad.message();
}

TEST(ShapeProfile, BadProfilesAreRefused) {
  const std::vector<std::pair<ShapeProfile, std::string>> cases = {
      {{{2, 4}, {1, 4}, {3, 4}}, "dim 0 needs min <= opt <= max"},
      {{{1, 4}, {1, 4}, {1}}, "same rank"},
      {{{1}, {1}, {1}}, "the input has rank 2, the profile 1"},
      {{{1, 2}, {1, 2}, {1, 3}}, "dim 1 is fixed at 4"},
      {{{-1, 4}, {1, 4}, {1, 4}}, "negative"},
  };
  for (const auto& [profile, message] : cases) {
    auto s = with_profile(profile);
    ASSERT_FALSE(s.is_ok()) << message;
    EXPECT_NE(s.status().message().find(message), std::string::npos) << s.status().message();
  }
  auto outside = with_profile({{1, 4}, {2, 4}, {3, 4}}, {5, 4});
  ASSERT_FALSE(outside.is_ok());
  EXPECT_NE(outside.status().message().find("dim 0 is fixed at 5"), std::string::npos)
      << outside.status().message();
  SessionOptions options;
  options.shape_profiles["y"] = {{1}, {1}, {1}};
  auto unknown = session_from_model(relu_model(), options);
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("'y' is not an input of the model"), std::string::npos)
      << unknown.status().message();
}

}  // namespace
}  // namespace peregrine
