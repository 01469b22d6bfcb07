// A persistent thread pool for kernels: parallel_for over a task count with exactly the
// requested number of threads (the caller plus num_threads - 1 workers).
//
// Workers are created on first need and live as long as the pool. A run allocates nothing
// (once the pool has seen its thread count): the task function is passed by reference, and
// tasks are claimed from atomic counters. Each thread owns an equal contiguous range of the
// tasks and claims from it first, then from the other threads' ranges: the same thread then
// handles the same part of each tensor from one kernel to the next (a conv's output channels
// are still in that core's L2 when the next layer reads them), and a thread the host slows
// down still has its tasks taken over.
// Idle workers spin for a bounded number of iterations, then sleep on a condition variable,
// so an idle session does not burn a core. Calls from several threads are serialized; a
// parallel_for issued from inside a task runs inline on the calling thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace peregrine::cpu {

// A non-owning reference to a callable `void(int64_t task, int thread)`.
class TaskFn {
 public:
  template <typename F>
  TaskFn(F& f)  // NOLINT: implicit by design, like std::function_ref
      : obj_(static_cast<void*>(&f)),
        call_([](void* o, int64_t task, int thread) { (*static_cast<F*>(o))(task, thread); }) {}
  void operator()(int64_t task, int thread) const { call_(obj_, task, thread); }

 private:
  void* obj_;
  void (*call_)(void*, int64_t, int);
};

class ThreadPool {
 public:
  ThreadPool() = default;
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs fn(task, thread) for task in [0, num_tasks) on min(num_threads, num_tasks) threads;
  // `thread` is in [0, num_threads) and unique among concurrently running calls, so it can
  // index per-thread scratch. Returns when every task is done.
  template <typename F>
  void parallel_for(int64_t num_tasks, int num_threads, F&& fn) {
    auto& f = fn;
    run(num_tasks, num_threads, TaskFn(f));
  }

 private:
  void run(int64_t num_tasks, int num_threads, TaskFn fn);
  void worker_loop(int index);
  void ensure_workers(int count);
  void claim_tasks(int thread);

  std::mutex run_mutex_;  // one parallel_for at a time
  std::vector<std::thread> workers_;

  // The current job; written under mutex_ before generation_ is bumped.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_workers_{0};  // workers of this job not yet finished
  // Thread i's range of the current job: tasks [next, end), claimed from the front.
  struct alignas(64) TaskRange {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  std::vector<TaskRange> ranges_;  // one per thread of the job; grows, never shrinks
  int threads_ = 0;                // threads of the current job (caller included)
  int participants_ = 0;  // workers taking part (num_threads - 1)
  const TaskFn* fn_ = nullptr;
  bool stop_ = false;
};

// The process-wide pool the CPU backend runs on.
ThreadPool& cpu_thread_pool();

}  // namespace peregrine::cpu
