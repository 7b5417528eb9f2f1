// The CPU backend's workers: a fixed pool that runs one parallel loop at a
// time, with the calling thread taking part. Chunks are claimed from a shared
// counter so that uneven iterations balance out. Define CTG_CPU_SERIAL to run
// every loop on the calling thread.
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ctg::cpu {

class thread_pool {
 public:
  explicit thread_pool(int threads) : threads_(std::max(1, threads)) {
    for (int t = 1; t < threads_; ++t) workers_.emplace_back([this] { work(); });
  }
  thread_pool(thread_pool const&) = delete;
  thread_pool& operator=(thread_pool const&) = delete;
  ~thread_pool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }

  int size() const { return threads_; }

  // Whether parallel_for(n, ...) runs every chunk on the calling thread: with
  // one thread, in CTG_CPU_SERIAL builds, and for a handful of iterations,
  // which are cheaper there than the hand-off to the workers (a few
  // microseconds).
  bool runs_on_caller(std::int64_t n) const {
#if defined(CTG_CPU_SERIAL)
    (void)n;
    return true;
#else
    return threads_ == 1 || n <= inline_below;
#endif
  }

  // Calls body(begin, end) over disjoint chunks covering [0, n).
  template <class Body>
  void parallel_for(std::int64_t n, Body&& body) {
    if (n <= 0) return;
#if defined(CTG_CPU_SERIAL)
    body(std::int64_t(0), n);
#else
    if (runs_on_caller(n)) {
      body(std::int64_t(0), n);
      return;
    }
    std::unique_lock run_lock(run_mutex_);  // one loop at a time
    job_.call = [](void* ctx, std::int64_t b, std::int64_t e) { (*static_cast<Body*>(ctx))(b, e); };
    job_.ctx = &body;
    job_.n = n;
    // About eight chunks per thread: enough to balance, few enough to be cheap.
    job_.chunk = std::max<std::int64_t>(1, n / (std::int64_t(threads_) * 8));
    job_.next.store(0, std::memory_order_relaxed);
    busy_.store(threads_ - 1, std::memory_order_relaxed);
    {
      std::lock_guard lock(mutex_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    run_chunks();
    // Workers spin briefly before sleeping, so this wait is usually short.
    for (int spin = 0; busy_.load(std::memory_order_acquire) != 0; ++spin) {
      if (spin > spin_limit) {
        int b = busy_.load(std::memory_order_acquire);
        if (b != 0) busy_.wait(b, std::memory_order_acquire);
      }
    }
#endif
  }

  // The process-wide pool: CTG_NUM_THREADS threads, or one per hardware thread.
  static thread_pool& instance() {
    std::lock_guard lock(instance_mutex());
    auto& p = instance_slot();
    if (!p) p = std::make_unique<thread_pool>(default_threads());
    return *p;
  }
  // Replaces the process-wide pool (not while a kernel runs).
  static void resize(int threads) {
    std::lock_guard lock(instance_mutex());
    instance_slot() = std::make_unique<thread_pool>(threads > 0 ? threads : default_threads());
  }
  static int default_threads() {
    if (char const* env = std::getenv("CTG_NUM_THREADS")) {
      int n = std::atoi(env);
      if (n > 0) return n;
    }
    return int(std::max(1u, std::thread::hardware_concurrency()));
  }

 private:
  struct job {
    void (*call)(void*, std::int64_t, std::int64_t) = nullptr;
    void* ctx = nullptr;
    std::int64_t n = 0;
    std::int64_t chunk = 1;
    std::atomic<std::int64_t> next{0};
  };

  void run_chunks() {
    for (;;) {
      std::int64_t b = job_.next.fetch_add(job_.chunk, std::memory_order_relaxed);
      if (b >= job_.n) return;
      job_.call(job_.ctx, b, std::min(job_.n, b + job_.chunk));
    }
  }
  void work() {
    std::uint64_t seen = 0;
    for (;;) {
      // Between back-to-back launches a worker spins for a moment instead of
      // sleeping, which keeps the hand-off to a few microseconds.
      for (int spin = 0; generation_.load(std::memory_order_acquire) == seen && spin < spin_limit; ++spin) {
      }
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        seen = generation_.load(std::memory_order_acquire);
        if (stopping_) return;
      }
      run_chunks();
      if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) busy_.notify_one();
    }
  }

  static std::mutex& instance_mutex() {
    static std::mutex m;
    return m;
  }
  static std::unique_ptr<thread_pool>& instance_slot() {
    static std::unique_ptr<thread_pool> p;
    return p;
  }

  int threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::mutex run_mutex_;
  std::condition_variable wake_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> busy_{0};
  bool stopping_ = false;
  static constexpr std::int64_t inline_below = 64;
  static constexpr int spin_limit = 20000;
  job job_;
};

}  // namespace ctg::cpu

namespace ctg {
// Threads the CPU backend uses from now on (0: one per hardware thread).
inline void set_num_threads(int threads) { cpu::thread_pool::resize(threads); }
inline int num_threads() { return cpu::thread_pool::instance().size(); }
}  // namespace ctg
