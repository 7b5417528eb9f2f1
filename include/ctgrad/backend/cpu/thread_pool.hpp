// The CPU backend's workers: a fixed pool that runs one parallel loop at a
// time, with the calling thread taking part. Define CTG_CPU_SERIAL to run
// every loop on the calling thread.
//
// How a launch works, and why:
// - The loop is cut into chunks, about eight per thread. Each thread (the
//   caller is thread 0) owns a contiguous run of them and claims those first,
//   so that from one launch to the next the same thread touches the same
//   data and claims on a cache line no other thread writes; a thread that
//   runs out takes the unclaimed chunks of the others, so uneven iterations
//   and absent threads balance out.
// - Each thread's claim word packs the launch's generation (high 32 bits)
//   with the number of that thread's chunks still unclaimed (low 32 bits),
//   and a claim is one compare-and-swap on it: a worker holding the word of
//   an earlier launch cannot claim anything of a later one, whose word
//   differs, so no chunk ever runs with another launch's body, and none runs
//   twice.
// - A launch ends when every chunk it cut has completed (a count), not when
//   every worker has looked in. A worker that wakes late, or is not scheduled
//   at all because another process holds its core, finds its chunks taken by
//   the others and costs the caller nothing.
// - Loops of fewer than inline_below iterations run on the caller: handing
//   them to a worker costs more than it saves (bench/launch_overhead.cpp).
// - Everything the threads write during a launch sits on cache lines of its
//   own: each claim word (with the copy of the launch's description its
//   claims need), the count of chunks still running, the sleepers' state.
// - Every chunk runs under the caller's subnormal mode (float_mode.hpp): a
//   worker adopts the caller's flush bits before it runs one.
// - Idle workers spin for a moment (back-to-back launches are the common
//   case), then sleep on a futex; the caller wakes them only when one sleeps.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../config.hpp"
#include "float_mode.hpp"

namespace ctg::cpu {

namespace pool_detail {

// True on the pool's workers, and on a caller while it runs chunks of a
// launch: a launch started there runs on that thread alone (below).
inline constinit thread_local bool inside_pool_launch = false;

// The pool's number of the running thread: t for worker t, 0 for any other
// thread (the caller of a launch runs as thread 0).
inline constinit thread_local int worker_index = 0;

// Wider than a cache line: some processors fetch lines in pairs.
inline constexpr std::size_t pool_line = 128;

// Tells the core that this thread is waiting, so that it yields resources to
// a sibling hyperthread and saves power.
inline void cpu_relax() {
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
  __builtin_ia32_pause();
#elif (defined(__GNUC__) || defined(__clang__)) && defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace pool_detail

// The pool's test points; the default does nothing (see basic_thread_pool).
struct no_pool_hooks {
  // A worker read a claim word and is about to try a claim with it.
  static void before_claim() {}
};

// Hooks lets a test hold a worker at the point where a late one is
// dangerous; ctgrad uses thread_pool, the pool without hooks.
template <class Hooks = no_pool_hooks>
class basic_thread_pool {
 public:
  // Loops of fewer iterations run on the caller. A hand-off to a worker costs
  // about 2 us on two idle cores (bench/launch_overhead.cpp): two threads win
  // from about 1K iterations of 6 ns, 4K of 1 ns (ctgrad's cheapest kernels,
  // the wave and map forwards), 50K of a fraction of a nanosecond.
  static constexpr std::int64_t inline_below = 2048;
  static constexpr int chunks_per_thread = 8;

  explicit basic_thread_pool(int threads);
  basic_thread_pool(basic_thread_pool const&) = delete;
  basic_thread_pool& operator=(basic_thread_pool const&) = delete;
  ~basic_thread_pool();

  int size() const { return threads_; }
  // The number, in [0, size()), of the thread running a chunk of the current
  // launch: what per-thread state of a launch is indexed by.
  static int thread_index() { return pool_detail::worker_index; }

  // Whether parallel_for(n, ...) runs every chunk on the calling thread, so
  // that no other thread can run any of it: with one thread, in
  // CTG_CPU_SERIAL builds, for fewer than inline_below iterations, and when
  // called from inside a launch (of any pool). ctgrad drops atomics from
  // accumulations exactly then, so this must agree with parallel_for.
  bool runs_on_caller(std::int64_t n) const {
#if defined(CTG_CPU_SERIAL)
    (void)n;
    return true;
#else
    return threads_ == 1 || n < inline_below || pool_detail::inside_pool_launch;
#endif
  }

  // How parallel_for(n, ...) splits [0, n): into chunk_count(n) chunks,
  // chunk k being chunk_range(n, chunks, k) (n / chunks iterations, the
  // first n % chunks of them one longer), whichever thread runs it. For a
  // caller that must know where one chunk ends and the next begins.
  std::int64_t chunk_count(std::int64_t n) const {
    return runs_on_caller(n) ? 1 : std::min<std::int64_t>(n, std::int64_t(threads_) * chunks_per_thread);
  }
  static std::pair<std::int64_t, std::int64_t> chunk_range(std::int64_t n, std::int64_t chunks, std::int64_t k) {
    std::int64_t const q = n / chunks, r = n % chunks;
    std::int64_t const b = k * q + std::min(k, r);
    return {b, b + q + (k < r ? 1 : 0)};
  }

  // Calls body(begin, end) over disjoint chunks covering [0, n) and returns
  // when all are done. An exception thrown by the body is rethrown here
  // (the first one; chunks not yet started are skipped).
  //
  // A launch from inside a launch runs on the calling thread: the thread
  // that started the outer launch waits for the chunk that starts this one,
  // so handing this one to the pool could only deadlock.
  template <class Body>
  void parallel_for(std::int64_t n, Body&& body) {
    if (n <= 0) return;
    if (runs_on_caller(n)) {
      body(std::int64_t(0), n);
      return;
    }
    using body_type = std::remove_reference_t<Body>;
    hand_out(
        n, [](void* ctx, std::int64_t b, std::int64_t e) { (*static_cast<body_type*>(ctx))(b, e); },
        const_cast<void*>(static_cast<void const volatile*>(std::addressof(body))));
  }

  // The process-wide pool: CTG_NUM_THREADS threads, or one per hardware thread.
  static basic_thread_pool& instance();
  // Replaces the process-wide pool (not while a kernel runs).
  static void resize(int threads);
  static int default_threads();

 private:
  // One thread's chunks of the current launch. The description is written by
  // the caller before it publishes the claim word and read only after a
  // successful claim: until that chunk completes, the launch cannot end, so
  // the description cannot change under the reader.
  struct alignas(pool_detail::pool_line) slot {
    std::atomic<std::uint64_t> claim{0};  // generation << 32 | chunks of this slot not yet claimed
    void (*call)(void*, std::int64_t, std::int64_t) = nullptr;
    void* ctx = nullptr;
    std::int64_t n = 0;       // iterations of the launch
    std::int64_t chunks = 0;  // chunks of the launch
    std::int64_t first = 0;   // this slot's first chunk
    std::int64_t count = 0;   // and how many
    std::uint64_t subnormal_mode = 0;  // the caller's flush bits
  };
  template <class T>
  struct alignas(pool_detail::pool_line) line {
    std::atomic<T> value;
  };
  struct status {
    std::atomic<bool> failed{false};  // a chunk threw: skip the rest
    std::exception_ptr error;         // the first exception, under error_mutex_
  };

  // A launch of n iterations on the pool, its body erased to call(ctx, b, e):
  // one copy of what does not depend on the body for every launch a program
  // makes, instead of one per kernel and pass.
  void hand_out(std::int64_t n, void (*call)(void*, std::int64_t, std::int64_t), void* ctx);

  // Chunk k of the launch (chunk_range).
  void run_chunk(slot const& s, std::int64_t k) {
    auto const [b, e] = chunk_range(s.n, s.chunks, k);
    if (status_.failed.load(std::memory_order_relaxed)) return;
    adopt_subnormal_mode(s.subnormal_mode);
    try {
      s.call(s.ctx, b, e);
    } catch (...) {
      std::lock_guard lock(error_mutex_);
      if (!status_.error) status_.error = std::current_exception();
      status_.failed.store(true, std::memory_order_relaxed);
    }
  }

  // Claims and runs chunks of slot t while it has some of launch gen left;
  // returns how many.
  template <bool Worker>
  int claim_from(int t, std::uint64_t gen) {
    slot& s = slots_[std::size_t(t)];
    int done = 0;
    std::uint64_t w = s.claim.load(std::memory_order_relaxed);
    for (;;) {
      if constexpr (Worker) Hooks::before_claim();
      if ((w >> 32) != gen || (w & 0xffffffffu) == 0) return done;
      // acquire: the description, written before the word.
      if (s.claim.compare_exchange_weak(w, w - 1, std::memory_order_acquire, std::memory_order_relaxed)) {
        run_chunk(s, s.first + s.count - std::int64_t(w & 0xffffffffu));
        ++done;
        w = s.claim.load(std::memory_order_relaxed);
      }
    }
  }
  // Thread t's own chunks, then everyone else's.
  template <bool Worker>
  int claim_all(int t, std::uint64_t gen) {
    int done = 0;
    for (int k = 0; k < threads_; ++k) done += claim_from<Worker>((t + k) % threads_, gen);
    return done;
  }

  // The caller ran out of chunks; workers still run some. Spin briefly (they
  // usually finish within microseconds), then sleep, which also frees this
  // core for a worker that the scheduler had pushed off its own.
  void wait_for_workers();

  void wake_all() {
    epoch_.value.fetch_add(1, std::memory_order_seq_cst);
    epoch_.value.notify_all();
  }

  bool has_chunks(int t) const {
    return (slots_[std::size_t(t)].claim.load(std::memory_order_relaxed) & 0xffffffffu) != 0;
  }

  void work(int t);

  static constexpr auto worker_spin = std::chrono::microseconds(50);
  static constexpr auto caller_spin = std::chrono::microseconds(20);

  // The process-wide pool, and a pointer to it that launches read without
  // taking the lock.
  static std::mutex& instance_mutex() {
    static std::mutex m;
    return m;
  }
  static std::unique_ptr<basic_thread_pool>& instance_slot() {
    static std::unique_ptr<basic_thread_pool> p;
    return p;
  }
  static std::atomic<basic_thread_pool*>& current() {
    static std::atomic<basic_thread_pool*> p{nullptr};
    return p;
  }

  int threads_;
  std::unique_ptr<slot[]> slots_;  // one per thread, the caller's first
  std::vector<std::thread> workers_;
  std::mutex launch_mutex_;
  std::mutex error_mutex_;
  std::uint64_t generation_ = 0;  // the caller's, under launch_mutex_
  std::atomic<bool> stopping_{false};
  status status_;
  line<int> pending_{0};  // chunks of the launch not yet completed
  line<bool> caller_sleeping_{false};
  line<int> sleepers_{0};          // workers asleep or about to be
  line<std::uint32_t> epoch_{0};   // what sleeping workers wait on
};

template <class Hooks>
basic_thread_pool<Hooks>::basic_thread_pool(int threads)
    : threads_(std::max(1, threads)), slots_(std::make_unique<slot[]>(std::size_t(threads_))) {
#if !defined(CTG_CPU_SERIAL)
  for (int t = 1; t < threads_; ++t) workers_.emplace_back([this, t] { work(t); });
#endif
}

template <class Hooks>
basic_thread_pool<Hooks>::~basic_thread_pool() {
  stopping_.store(true, std::memory_order_seq_cst);
  wake_all();
  for (auto& w : workers_) w.join();
}

template <class Hooks>
basic_thread_pool<Hooks>& basic_thread_pool<Hooks>::instance() {
  if (auto* p = current().load(std::memory_order_acquire)) return *p;
  std::lock_guard lock(instance_mutex());
  auto& slot = instance_slot();
  if (!slot) {
    slot = std::make_unique<basic_thread_pool>(default_threads());
    current().store(slot.get(), std::memory_order_release);
  }
  return *slot;
}

template <class Hooks>
void basic_thread_pool<Hooks>::resize(int threads) {
  std::lock_guard lock(instance_mutex());
  auto next = std::make_unique<basic_thread_pool>(threads > 0 ? threads : default_threads());
  current().store(next.get(), std::memory_order_release);
  instance_slot() = std::move(next);
}

template <class Hooks>
int basic_thread_pool<Hooks>::default_threads() {
  if (char const* env = std::getenv("CTG_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

template <class Hooks>
void basic_thread_pool<Hooks>::hand_out(std::int64_t n, void (*call)(void*, std::int64_t, std::int64_t), void* ctx) {
  std::lock_guard launch_lock(launch_mutex_);  // one launch at a time
  std::int64_t const chunks = chunk_count(n);
  status_.failed.store(false, std::memory_order_relaxed);
  status_.error = nullptr;
  pending_.value.store(int(chunks), std::memory_order_relaxed);
  std::uint64_t const gen = ++generation_ & 0xffffffffu;
  std::uint64_t const mode = subnormal_mode();
  // The workers' slots first, so that they can start while the caller
  // fills its own.
  for (int k = 1; k <= threads_; ++k) {
    int const t = k % threads_;
    slot& s = slots_[std::size_t(t)];
    s.call = call;
    s.ctx = ctx;
    s.n = n;
    s.chunks = chunks;
    s.first = chunks * t / threads_;
    s.count = chunks * (t + 1) / threads_ - s.first;
    s.subnormal_mode = mode;
    // release: the description above, to whoever claims with this word.
    s.claim.store(gen << 32 | std::uint64_t(s.count), std::memory_order_release);
  }
  // Orders the stores above before the load of the sleepers' count; a
  // worker going to sleep counts itself before it looks at its word again.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleepers_.value.load(std::memory_order_relaxed) > 0) wake_all();

  pool_detail::inside_pool_launch = true;
  int done = claim_all<false>(0, gen);
  pool_detail::inside_pool_launch = false;
  if (pending_.value.fetch_sub(done, std::memory_order_acq_rel) != done) wait_for_workers();
  if (status_.error) std::rethrow_exception(std::exchange(status_.error, nullptr));
}

template <class Hooks>
void basic_thread_pool<Hooks>::wait_for_workers() {
  auto const until = std::chrono::steady_clock::now() + caller_spin;
  for (int spin = 0; pending_.value.load(std::memory_order_acquire) != 0; ++spin) {
    pool_detail::cpu_relax();
    if (spin % 16 == 15 && std::chrono::steady_clock::now() > until) {
      caller_sleeping_.value.store(true, std::memory_order_seq_cst);
      for (int left; (left = pending_.value.load(std::memory_order_seq_cst)) != 0;)
        pending_.value.wait(left, std::memory_order_acquire);
      caller_sleeping_.value.store(false, std::memory_order_relaxed);
      return;
    }
  }
}

template <class Hooks>
void basic_thread_pool<Hooks>::work(int t) {
  pool_detail::inside_pool_launch = true;
  pool_detail::worker_index = t;
  for (;;) {
    std::uint64_t const w = slots_[std::size_t(t)].claim.load(std::memory_order_relaxed);
    if ((w & 0xffffffffu) != 0) {
      int const done = claim_all<true>(t, w >> 32);
      // The last one to finish wakes the caller if it went to sleep.
      // seq_cst pairs with the caller's store of caller_sleeping_ before it
      // looks at the count again.
      if (done > 0 && pending_.value.fetch_sub(done, std::memory_order_seq_cst) == done &&
          caller_sleeping_.value.load(std::memory_order_seq_cst))
        pending_.value.notify_one();
      continue;
    }
    if (stopping_.load(std::memory_order_acquire)) return;
    // Between back-to-back launches: spin for a moment instead of sleeping.
    auto const until = std::chrono::steady_clock::now() + worker_spin;
    bool found = false;
    for (int spin = 0; !found; ++spin) {
      pool_detail::cpu_relax();
      found = has_chunks(t) || stopping_.load(std::memory_order_relaxed);
      if (spin % 16 == 15 && std::chrono::steady_clock::now() > until) break;
    }
    if (found) continue;
    // Sleep until the next launch. Counting itself among the sleepers
    // before looking at its word once more means that either this look
    // sees the new launch or its caller sees a sleeper and wakes it.
    sleepers_.value.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::uint32_t const epoch = epoch_.value.load(std::memory_order_relaxed);
    if (!has_chunks(t) && !stopping_.load(std::memory_order_seq_cst))
      epoch_.value.wait(epoch, std::memory_order_acquire);
    sleepers_.value.fetch_sub(1, std::memory_order_relaxed);
  }
}

using thread_pool = basic_thread_pool<>;

// Built with CTG_SEPARATE_COMPILATION (config.hpp), the pool's code is
// compiled once, in the translation unit of <ctgrad/src.hpp>. Its larger
// members are defined out of the class and not inline for that: an extern
// template keeps other units from instantiating only the members that are
// not inline.
#if CTG_SEPARATE_COMPILATION
#  if CTG_RUNTIME_DEFINITIONS
template class basic_thread_pool<no_pool_hooks>;
#  else
extern template class basic_thread_pool<no_pool_hooks>;
#  endif
#endif

}  // namespace ctg::cpu

namespace ctg {
// Threads the CPU backend uses from now on (0: one per hardware thread).
inline void set_num_threads(int threads) { cpu::thread_pool::resize(threads); }
inline int num_threads() { return cpu::thread_pool::instance().size(); }
}  // namespace ctg
