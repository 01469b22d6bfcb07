// Steady-state runs of a static model allocate nothing: global operator new/delete are
// replaced in this test binary by counting versions (counting only while a thread-local
// flag is set), and a second Session::run_into of a model of non-allocating kernels is
// asserted to make zero allocations. Tensor storage comes from aligned_alloc, not new, but
// every fresh tensor also allocates its shared_ptr control block and shape, so it counts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <new>

#include "importer/onnx/onnx_exporter.h"
#include "passes/graph_builder.h"
#include "peregrine/session.h"

namespace {
thread_local bool g_counting = false;
std::atomic<int64_t> g_allocations{0};

void* counted_alloc(std::size_t n, std::size_t align) {
  if (g_counting) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (n == 0) n = 1;
  void* p = align > alignof(std::max_align_t)
                ? std::aligned_alloc(align, (n + align - 1) / align * align)
                : std::malloc(n);
  return p;
}
}  // namespace

void* operator new(std::size_t n) {
  void* p = counted_alloc(n, 0);
  if (!p) throw std::bad_alloc();
  return p;
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  void* p = counted_alloc(n, static_cast<std::size_t>(a));
  if (!p) throw std::bad_alloc();
  return p;
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n, 0); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace peregrine {
namespace {

// Relu / Add / Mul / Sigmoid over same-shaped tensors: reference kernels that write into
// their (pre-bound) output without allocating.
std::string write_static_model() {
  testing::GraphBuilder b;
  std::string x = b.input("x", {4, 16});
  std::string y = b.input("y", {4, 16});
  std::string r = b.op("Relu", {x});
  std::string m = b.op("Mul", {r, y});
  std::string s = b.op("Sigmoid", {m});
  std::string a = b.op("Add", {s, r});
  std::string t = b.op("Relu", {a});
  std::string u = b.op("Mul", {t, t});
  b.output(u);
  ir::Model model;
  model.ir_version = 8;
  model.graph = b.build();
  std::string path = (std::filesystem::temp_directory_path() /
                      ("peregrine_alloc_test_" + std::to_string(::getpid()) + ".onnx"))
                         .string();
  Status st = save_onnx_model(model, path, /*overwrite=*/true);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return path;
}

TEST(Allocation, SteadyStateRunIntoAllocatesNothing) {
  const std::string path = write_static_model();
  SessionOptions options;
  options.backend = "reference";
  options.opt_level = 0;  // keep the ops as written (fusions would change the kernels)
  auto session = Session::load(path, options);
  std::filesystem::remove(path);
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  Session& s = **session;
  EXPECT_GT(s.memory_plan_stats().arena_bytes, 0);
  EXPECT_GT(s.memory_plan_stats().in_place_steps, 0);

  std::vector<Tensor> inputs = {testing::random_tensor({4, 16}, 1),
                                testing::random_tensor({4, 16}, 2)};
  std::vector<Tensor> outputs = {Tensor::zeros(DType::kFloat32, {4, 16})};
  ASSERT_TRUE(s.run_into(inputs, outputs).is_ok());  // warm-up

  g_allocations = 0;
  g_counting = true;
  Status st = s.run_into(inputs, outputs);
  g_counting = false;
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(g_allocations.load(), 0) << "heap allocations in a steady-state run";

  // Same numbers as the allocating API (whose maps do allocate: the counter works).
  g_allocations = 0;
  g_counting = true;
  auto ref = s.run({{"x", inputs[0]}, {"y", inputs[1]}});
  g_counting = false;
  EXPECT_GT(g_allocations.load(), 0);
  ASSERT_TRUE(ref.is_ok()) << ref.status().message();
  testing::expect_close({ref->begin()->second}, outputs, 0);
}

// Session::run binds a graph output's storage of the last run again once the caller has let
// go of it (no page faults and zero fill for big outputs on every run), and never while the
// caller still holds it.
TEST(Allocation, RunReusesOutputStorageOnlyOnceReleased) {
  const std::string path = write_static_model();
  SessionOptions options;
  options.backend = "reference";
  options.opt_level = 0;
  auto session = Session::load(path, options);
  std::filesystem::remove(path);
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  Session& s = **session;
  const Tensor x1 = testing::random_tensor({4, 16}, 1), y1 = testing::random_tensor({4, 16}, 2);
  const Tensor x2 = testing::random_tensor({4, 16}, 3), y2 = testing::random_tensor({4, 16}, 4);

  auto first = s.run({{"x", x1}, {"y", y1}});
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  const Tensor held = first->begin()->second;
  const Tensor want1 = held.clone();
  first = Expected<std::map<std::string, Tensor>>(std::map<std::string, Tensor>{});

  // `held` is still the caller's: the second run writes elsewhere and leaves it intact.
  const void* second_storage = nullptr;
  Tensor want2;
  {
    auto second = s.run({{"x", x2}, {"y", y2}});
    ASSERT_TRUE(second.is_ok()) << second.status().message();
    second_storage = second->begin()->second.raw();
    want2 = second->begin()->second.clone();
    EXPECT_NE(second_storage, held.raw());
    testing::expect_close({held}, {want1}, 0);
  }
  // The second run's output is released: the third run writes into that storage, with the
  // third run's values, and allocates less than a run whose last output is still held (the
  // output tensor's control block and shape; its storage comes from aligned_alloc, uncounted).
  g_allocations = 0;
  g_counting = true;
  auto third = s.run({{"x", x1}, {"y", y1}});
  g_counting = false;
  const int64_t released_allocations = g_allocations.load();
  ASSERT_TRUE(third.is_ok()) << third.status().message();
  {
    g_allocations = 0;
    g_counting = true;
    auto fourth = s.run({{"x", x2}, {"y", y2}});  // `third` still held
    g_counting = false;
    ASSERT_TRUE(fourth.is_ok()) << fourth.status().message();
    EXPECT_LT(released_allocations, g_allocations.load());
  }
  EXPECT_EQ(third->begin()->second.raw(), second_storage);
  testing::expect_close({third->begin()->second}, {want1}, 0);
  testing::expect_close({held}, {want1}, 0);
  bool differ = false;  // the second run computed something else (so the checks above bite)
  for (int64_t i = 0; i < want1.numel(); ++i)
    differ = differ || want1.get_as_double(i) != want2.get_as_double(i);
  EXPECT_TRUE(differ);
}

TEST(Allocation, RunIntoChecksOutputBuffers) {
  const std::string path = write_static_model();
  SessionOptions options;
  options.backend = "reference";
  auto session = Session::load(path, options);
  std::filesystem::remove(path);
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  std::vector<Tensor> inputs = {testing::random_tensor({4, 16}, 1),
                                testing::random_tensor({4, 16}, 2)};
  std::vector<Tensor> wrong = {Tensor::zeros(DType::kFloat32, {4, 15})};
  EXPECT_FALSE((*session)->run_into(inputs, wrong).is_ok());
  std::vector<Tensor> bad_in = {testing::random_tensor({4, 15}, 1), inputs[1]};
  std::vector<Tensor> outputs = {Tensor::zeros(DType::kFloat32, {4, 16})};
  EXPECT_FALSE((*session)->run_into(bad_in, outputs).is_ok());
}

}  // namespace
}  // namespace peregrine
