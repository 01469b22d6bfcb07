#include "backends/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PEREGRINE_CPU_RELAX() _mm_pause()
#else
#define PEREGRINE_CPU_RELAX() ((void)0)
#endif

namespace peregrine::cpu {

namespace {

// Spin iterations (each a pause, ~tens of ns) before a thread sleeps: long enough to catch
// the next kernel of a running model, short enough that an idle session sleeps quickly.
constexpr int kSpinIterations = 20000;

// Whether the workers pay is judged over windows of at least kJudgeWindowNs of threaded calls:
// they pay when the caller alone would have taken kMinSpeedup times as long.
constexpr int64_t kJudgeWindowNs = 3'000'000;
constexpr double kMinSpeedup = 1.1;
// The first back-off interval and its cap.
constexpr int64_t kFirstSoloIntervalNs = 20'000'000;
constexpr int64_t kMaxSoloIntervalNs = 1'000'000'000;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

thread_local bool in_pool_task = false;

}  // namespace

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::ensure_workers(int count) {
  while (static_cast<int>(workers_.size()) < count) {
    const int index = static_cast<int>(workers_.size());
    workers_.emplace_back([this, index] { worker_loop(index); });
  }
}

int64_t ThreadPool::claim_tasks(int thread) {
  int64_t ran = 0;
  const bool was_in_task = in_pool_task;
  in_pool_task = true;
  for (int r = 0; r < threads_; ++r) {  // its own range first, then the others'
    TaskRange& range = ranges_[static_cast<size_t>((thread + r) % threads_)];
    for (;;) {
      const int64_t task = range.next.fetch_add(1, std::memory_order_relaxed);
      if (task >= range.end) break;
      (*fn_)(task, thread);
      ++ran;
    }
  }
  in_pool_task = was_in_task;
  return ran;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Bounded spin for the next job, then sleep.
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int i = 0; gen == seen && i < kSpinIterations; ++i) {
      PEREGRINE_CPU_RELAX();
      gen = generation_.load(std::memory_order_acquire);
    }
    bool participate;
    {
      // The job fields and the generation are read together under the lock, so a worker
      // joins each job at most once and only the job whose fields it read.
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      if (stop_) return;
      seen = generation_.load(std::memory_order_acquire);
      participate = index < participants_;
    }
    if (!participate) continue;
    claim_tasks(index + 1);  // thread 0 is the caller
    if (pending_workers_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::run(int64_t num_tasks, int num_threads, TaskFn fn) {
  if (num_tasks <= 0) return;
  const int threads = static_cast<int>(std::min<int64_t>(std::max(num_threads, 1), num_tasks));
  if (threads == 1 || in_pool_task) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  if (now_ns() < solo_until_ns_.load(std::memory_order_relaxed)) {  // backing off: see header
    for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  ensure_workers(threads - 1);
  if (ranges_.size() < static_cast<size_t>(threads))
    ranges_ = std::vector<TaskRange>(static_cast<size_t>(threads));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    threads_ = threads;
    for (int i = 0; i < threads; ++i) {
      TaskRange& range = ranges_[static_cast<size_t>(i)];
      range.next.store(num_tasks * i / threads, std::memory_order_relaxed);
      range.end = num_tasks * (i + 1) / threads;
    }
    participants_ = threads - 1;
    pending_workers_.store(threads - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  const int64_t start = now_ns();
  const int64_t caller_tasks = claim_tasks(0);
  const int64_t worked = now_ns();
  // Wait for the workers: a short spin (they are usually finishing their last task), then sleep.
  for (int i = 0; i < kSpinIterations && pending_workers_.load(std::memory_order_acquire) != 0; ++i)
    PEREGRINE_CPU_RELAX();
  if (pending_workers_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] { return pending_workers_.load(std::memory_order_acquire) == 0; });
  }
  const int64_t done = now_ns();
  // What the caller alone would have taken: its time per task times every task.
  const int64_t solo_estimate_ns =
      caller_tasks > 0 ? (worked - start) * num_tasks / caller_tasks : (done - start) * threads;
  judge_call(done - start, solo_estimate_ns, done);
}

void ThreadPool::judge_call(int64_t call_ns, int64_t solo_estimate_ns, int64_t now) {
  window_call_ns_ += call_ns;
  window_solo_estimate_ns_ += solo_estimate_ns;
  if (window_call_ns_ < kJudgeWindowNs) return;
  const bool workers_pay = static_cast<double>(window_solo_estimate_ns_) >=
                           kMinSpeedup * static_cast<double>(window_call_ns_);
  window_call_ns_ = window_solo_estimate_ns_ = 0;
  if (workers_pay) {
    solo_interval_ns_ = 0;
    return;
  }
  // A window that does not pay right after a back-off doubles the next interval.
  solo_interval_ns_ = std::clamp(2 * solo_interval_ns_, kFirstSoloIntervalNs, kMaxSoloIntervalNs);
  solo_until_ns_.store(now + solo_interval_ns_, std::memory_order_relaxed);
}

ThreadPool& cpu_thread_pool() {
  static ThreadPool* pool = new ThreadPool();  // never destroyed: workers outlive statics
  return *pool;
}

}  // namespace peregrine::cpu
