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
// Contention: a worker the OS deschedules (another process holds its core) keeps the task it
// claimed until it runs again, and the caller, done with everything else, waits for it, often
// for a whole scheduler slice. So the pool judges its workers by their gain: it times each
// threaded call against what the caller alone would have taken (its time per task times the
// task count); when a window of calls gained less than kMinSpeedup, calls run on the caller
// alone for a back-off interval (doubling while the workers keep not paying, up to
// kMaxSoloInterval), then with workers again. Adding a thread then costs little on a busy
// machine.
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
  int64_t claim_tasks(int thread);  // returns how many tasks this thread ran
  // After a threaded call that took `call_ns`, where the caller alone would have taken about
  // `solo_estimate_ns`: starts a back-off when the workers stopped paying.
  void judge_call(int64_t call_ns, int64_t solo_estimate_ns, int64_t now_ns);

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
  // Contention back-off (guarded by run_mutex_; solo_until_ns_ also read without it).
  int64_t window_call_ns_ = 0;             // threaded calls since the last judgement
  int64_t window_solo_estimate_ns_ = 0;    // ... and what the caller alone would have taken
  int64_t solo_interval_ns_ = 0;           // the last back-off interval; 0: the workers paid
  std::atomic<int64_t> solo_until_ns_{0};  // calls before this time run on the caller alone
};

// The process-wide pool the CPU backend runs on.
ThreadPool& cpu_thread_pool();

}  // namespace peregrine::cpu
