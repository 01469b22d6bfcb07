// The backend registry (runtime/backend_registry.h): the explicit list of choices, each one's
// backends in priority order, the default and PEREGRINE_BACKEND, an unknown name refused with
// the known ones named, and a session built on each choice running on it.
#include "runtime/backend_registry.h"

#include <gtest/gtest.h>

#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/reference/reference_backend.h"
#include "cpu_test_util.h"

namespace peregrine {
namespace {

// PEREGRINE_BACKEND set (or unset: nullptr) for one scope.
class ScopedBackendEnv : public cpu::testing::ScopedEnv {
 public:
  explicit ScopedBackendEnv(const char* value) : ScopedEnv("PEREGRINE_BACKEND", value) {}
};

TEST(BackendRegistry, ListsTheChoicesDefaultFirst) {
  const auto choices = backend_choices();
  ASSERT_EQ(choices.size(), 2u);
  EXPECT_STREQ(choices[0].name, "cpu");
  EXPECT_STREQ(choices[1].name, "reference");
  for (const BackendChoice& c : choices) {
    EXPECT_NE(std::string(c.description), "");
    EXPECT_NE(backend_choices_text().find(c.name), std::string::npos);
  }
}

TEST(BackendRegistry, EachChoiceListsItsBackendsInPriorityOrder) {
  ScopedBackendEnv env(nullptr);
  auto cpu = backends_for("cpu");
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
  ASSERT_EQ(cpu.value().size(), 2u);
  EXPECT_EQ(cpu.value()[0], &cpu_backend());
  EXPECT_EQ(cpu.value()[1], &reference_backend());
  auto reference = backends_for("reference");
  ASSERT_TRUE(reference.is_ok());
  ASSERT_EQ(reference.value().size(), 1u);
  EXPECT_EQ(reference.value()[0], &reference_backend());
  auto default_choice = backends_for("");
  ASSERT_TRUE(default_choice.is_ok());
  EXPECT_EQ(default_choice.value(), cpu.value());
}

TEST(BackendRegistry, EnvironmentPicksTheChoiceOnlyWhenNoneIsGiven) {
  ScopedBackendEnv env("reference");
  auto from_env = backends_for("");
  ASSERT_TRUE(from_env.is_ok());
  ASSERT_EQ(from_env.value().size(), 1u);
  EXPECT_EQ(from_env.value()[0], &reference_backend());
  auto named = backends_for("cpu");
  ASSERT_TRUE(named.is_ok());
  EXPECT_EQ(named.value().front(), &cpu_backend());
}

TEST(BackendRegistry, UnknownNameIsRefusedWithTheKnownOnes) {
  ScopedBackendEnv env(nullptr);
  auto bad = backends_for("cuda-nonexistent");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidInput);
  const std::string message = bad.status().message();
  EXPECT_NE(message.find("cuda-nonexistent"), std::string::npos) << message;
  EXPECT_NE(message.find("cpu or reference"), std::string::npos) << message;
  ScopedBackendEnv bad_env("nope");
  EXPECT_FALSE(backends_for("").is_ok());
}

}  // namespace
}  // namespace peregrine
