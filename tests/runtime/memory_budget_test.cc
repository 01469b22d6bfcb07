// The memory budget: a model whose static tensors need more than SessionOptions'
// memory_limit_bytes fails to load with the numbers (before its arena is allocated); a model
// inside it, or with no limit, loads; Tensor::make refuses more than physical memory.
#include "core/memory_budget.h"

#include <gtest/gtest.h>

#include "passes/graph_builder.h"
#include "peregrine/session.h"
#include "runtime/session_internals.h"

namespace peregrine {
namespace {

// x [1, 64] -> Expand to [4096, 64] -> Relu -> Expand to [4, 4096, 64]: 1 MiB arena, 4 MiB output.
ir::Model expanding_model() {
  testing::GraphBuilder b(17);
  b.input("x", {1, 64});
  b.ints("s1", {4096, 64});
  b.ints("s2", {4, 4096, 64});
  b.node("Expand", {"x", "s1"}, {"e"});
  b.node("Relu", {"e"}, {"r"});
  b.node("Expand", {"r", "s2"}, {"y"});
  b.output("y");
  ir::Model m;
  m.graph = b.build();
  return m;
}

TEST(MemoryBudget, RefusesAModelOverItWithTheNumbers) {
  SessionOptions o;
  o.memory_limit_bytes = 2 << 20;
  auto s = session_from_model(expanding_model(), o);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidModel);
  const std::string& m = s.status().message();
  EXPECT_NE(m.find("outputs 4.0 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("memory budget of 2.0 MiB"), std::string::npos) << m;

  o.memory_limit_bytes = 64 << 20;
  EXPECT_TRUE(session_from_model(expanding_model(), o).is_ok());
  o.memory_limit_bytes = -1;  // no limit
  EXPECT_TRUE(session_from_model(expanding_model(), o).is_ok());
  o.memory_limit_bytes = 0;  // the default: three quarters of physical memory
  EXPECT_TRUE(session_from_model(expanding_model(), o).is_ok());
}

TEST(MemoryBudget, TensorsPastPhysicalMemoryAreRefused) {
  const int64_t physical = physical_memory_bytes();
  ASSERT_GT(physical, 0);
  EXPECT_EQ(default_memory_budget(), physical / 4 * 3);
  // Past physical memory (or past the 16 GiB tensor limit on machines with more): a bad-model
  // error, never an allocation attempt.
  auto t = Tensor::make(DType::kFloat32, {physical / 4 + 1024});
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidModel);
  const std::string& m = t.status().message();
  EXPECT_TRUE(m.find("of memory") != std::string::npos ||
              m.find("GiB tensor limit") != std::string::npos)
      << m;
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(3 << 20), "3.0 MiB");
  EXPECT_EQ(format_bytes(int64_t{12} << 30), "12.0 GiB");
}

}  // namespace
}  // namespace peregrine
