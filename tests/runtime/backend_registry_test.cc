// The backend registry (runtime/backend_registry.h): the explicit list of choices, each one's
// backends in priority order, the default and PEREGRINE_BACKEND, an unknown name refused with
// the known ones named, and a session built on each choice running on it.
#include "runtime/backend_registry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/reference/reference_backend.h"
#include "kernels/cpu_test_util.h"

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

// The backends of the choice `name`; empty, with a failure, when it is refused.
std::vector<const Backend*> backends_of(const std::string& name) {
  auto backends = backends_for(name);
  EXPECT_TRUE(backends.is_ok()) << "'" << name << "': " << backends.status().message();
  return backends.is_ok() ? backends.value() : std::vector<const Backend*>{};
}

const std::vector<const Backend*> kCpuThenReference = {&cpu_backend(), &reference_backend()};
const std::vector<const Backend*> kReferenceOnly = {&reference_backend()};

TEST(BackendRegistry, EachChoiceListsItsBackendsInPriorityOrder) {
  ScopedBackendEnv env(nullptr);
  EXPECT_EQ(backends_of("cpu"), kCpuThenReference);
  EXPECT_EQ(backends_of("reference"), kReferenceOnly);
  EXPECT_EQ(backends_of(""), kCpuThenReference);  // the default
}

TEST(BackendRegistry, EnvironmentPicksTheChoiceOnlyWhenNoneIsGiven) {
  ScopedBackendEnv env("reference");
  EXPECT_EQ(backends_of(""), kReferenceOnly);
  EXPECT_EQ(backends_of("cpu"), kCpuThenReference);
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
