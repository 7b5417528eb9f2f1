// The CPU thread pool: every launch covers its iterations exactly once, in
// disjoint chunks, whatever the pool size and however launches follow one
// another; small and nested launches run on the caller and say so through
// runs_on_caller; a worker that wakes late can claim nothing of a launch that
// is over or of a later one; exceptions reach the caller. Each launch is
// checked against the chunk ranges it reported and the values it wrote.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <ctgrad/ctgrad.hpp>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "wait_support.hpp"

namespace {

using int64 = std::int64_t;
using ctg::cpu::basic_thread_pool;
using ctg::cpu::thread_pool;
using wait_support::eventually;

// Restores the process-wide pool's size on exit.
struct pool_threads {
  int previous = ctg::num_threads();
  explicit pool_threads(int n) { ctg::set_num_threads(n); }
  ~pool_threads() { ctg::set_num_threads(previous); }
};

// What one launch did: the chunks it ran, on which threads, and an element
// count per iteration.
struct launch_record {
  std::mutex mutex;
  std::vector<std::pair<int64, int64>> chunks;
  std::vector<std::thread::id> threads;
  std::vector<int> hits;
  explicit launch_record(int64 n) : hits(static_cast<std::size_t>(n), 0) {}

  auto body() {
    return [this](int64 b, int64 e) {
      for (int64 i = b; i < e; ++i) ++hits[std::size_t(i)];  // disjoint chunks: no two threads share an i
      std::lock_guard lock(mutex);
      chunks.emplace_back(b, e);
      threads.push_back(std::this_thread::get_id());
    };
  }
  // The chunks are non-empty, disjoint and cover [0, n); every iteration ran
  // once.
  bool covered_once() {
    std::sort(chunks.begin(), chunks.end());
    int64 next = 0;
    for (auto [b, e] : chunks) {
      if (b != next || e <= b) return false;
      next = e;
    }
    return next == int64(hits.size()) && std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; });
  }
  bool all_on(std::thread::id t) const {
    return std::all_of(threads.begin(), threads.end(), [&](std::thread::id x) { return x == t; });
  }
};

template <class Pool>
bool launch_and_check(Pool& pool, int64 n) {
  launch_record r(n);
  pool.parallel_for(n, r.body());
  if (!r.covered_once()) return false;
  // At most chunks_per_thread chunks per thread; inline launches in one.
  std::size_t const most = pool.runs_on_caller(n) ? 1 : std::size_t(pool.size()) * Pool::chunks_per_thread;
  return r.chunks.size() <= most;
}

// Sizes around every boundary the pool has: one chunk per iteration, the
// inline threshold, lengths that chunk unevenly, and a large one.
std::vector<int64> sizes() {
  int64 const t = thread_pool::inline_below;
  return {1, 2, 7, 63, 64, t - 1, t, t + 1, 2 * t + 3, 31 * t + 17, 100003};
}

}  // namespace

TEST_CASE("thread pool: back-to-back launches of many sizes cover every iteration once") {
  for (int threads = 1; threads <= 4; ++threads) {
    CAPTURE(threads);
    thread_pool pool(threads);
    CHECK(pool.size() == threads);
    for (int round = 0; round < 20; ++round)
      for (int64 n : sizes()) {
        CAPTURE(n);
        REQUIRE(launch_and_check(pool, n));
      }
    launch_record none(0);
    pool.parallel_for(0, none.body());
    pool.parallel_for(-5, none.body());
    CHECK(none.chunks.empty());
  }
}

TEST_CASE("thread pool: small launches run on the caller, and runs_on_caller says so") {
  auto const me = std::this_thread::get_id();
  int64 const t = thread_pool::inline_below;
  for (int threads = 1; threads <= 4; ++threads) {
    CAPTURE(threads);
    thread_pool pool(threads);
    for (int64 n : {int64(1), int64(64), t - 1}) {
      CHECK(pool.runs_on_caller(n));
      launch_record r(n);
      pool.parallel_for(n, r.body());
      REQUIRE(r.covered_once());
      CHECK(r.chunks.size() == 1);
      CHECK(r.all_on(me));
    }
    CHECK(pool.runs_on_caller(t) == (threads == 1));
    CHECK(pool.runs_on_caller(int64(1) << 40) == (threads == 1));
  }
}

TEST_CASE("thread pool: a launch that runs_on_caller calls parallel runs on other threads too") {
  // The converse of the test above: when runs_on_caller is false a worker
  // does take chunks. The caller's first chunk waits until another thread
  // has run one, which it could not if the launch stayed on the caller (and
  // if the workers take every chunk, the caller runs none).
  for (int threads = 2; threads <= 4; ++threads) {
    CAPTURE(threads);
    thread_pool pool(threads);
    int64 const n = thread_pool::inline_below * 4;
    REQUIRE_FALSE(pool.runs_on_caller(n));
    auto const me = std::this_thread::get_id();
    std::atomic<int> by_workers{0};
    std::atomic<bool> waited{false};
    pool.parallel_for(n, [&](int64, int64) {
      if (std::this_thread::get_id() != me) {
        by_workers.fetch_add(1);
      } else if (!waited.exchange(true)) {
        eventually([&] { return by_workers.load() > 0; });
      }
    });
    CHECK(by_workers.load() > 0);
  }
}

TEST_CASE("thread pool: nested launches run on the thread that starts them, at every pool size") {
  auto scatter = ctg::kernel<"nested_scatter">([](auto h, int n) {
    return ctg::range(n, [=](auto i) { return h[i % 4] += 1.0f; });
  });
  thread_pool other(2);
  for (int threads = 1; threads <= 4; ++threads) {
    CAPTURE(threads);
    pool_threads scope(threads);
    auto& pool = thread_pool::instance();
    REQUIRE(pool.size() == threads);
    // The outer launch is parallel on more than one thread; every 64th of its
    // iterations launches on this pool, on another pool and a kernel, each
    // large enough to be parallel on its own.
    int64 const outer = thread_pool::inline_below * 2;
    int64 const inner = thread_pool::inline_below * 8;
    int const nested = int(outer / 64);
    bool const outer_parallel = !pool.runs_on_caller(outer);
    CHECK(outer_parallel == (threads > 1));
    std::vector<std::unique_ptr<launch_record>> inner_records, other_records;
    std::vector<ctg::field<float, 1>> hists;
    for (int j = 0; j < nested; ++j) {
      inner_records.push_back(std::make_unique<launch_record>(inner));
      other_records.push_back(std::make_unique<launch_record>(inner));
      hists.emplace_back(4);
    }
    std::atomic<int> not_inline{0};
    pool.parallel_for(outer, [&](int64 b, int64 e) {
      for (int64 i = b; i < e; ++i) {
        if (i % 64 != 0) continue;
        auto const j = std::size_t(i / 64);
        if (!pool.runs_on_caller(inner) || !other.runs_on_caller(inner)) not_inline.fetch_add(1);
        pool.parallel_for(inner, inner_records[j]->body());
        other.parallel_for(inner, other_records[j]->body());
        scatter(hists[j], int(inner));  // plain adds when nested: this launch too runs on one thread
      }
    });
    // From inside a parallel launch, every launch runs on the thread that
    // starts it; from a launch that ran on the caller (one thread), a launch
    // on another pool is an ordinary parallel launch.
    CHECK(not_inline.load() == (outer_parallel ? 0 : nested));
    for (int j = 0; j < nested; ++j) {
      CAPTURE(j);
      auto& r = *inner_records[std::size_t(j)];
      auto& o = *other_records[std::size_t(j)];
      REQUIRE(r.covered_once());
      REQUIRE(o.covered_once());
      CHECK(r.chunks.size() == 1);
      if (outer_parallel) {
        CHECK(o.chunks.size() == 1);
        CHECK(r.threads == o.threads);  // the same thread ran both
      }
      for (int k = 0; k < 4; ++k) CHECK(hists[std::size_t(j)].at(k) == float(inner / 4));
    }
    // Outside a launch again: large launches are parallel once more.
    CHECK(pool.runs_on_caller(inner) == (threads == 1));
    CHECK_FALSE(other.runs_on_caller(inner));
  }
}

TEST_CASE("thread pool: accumulations are atomic exactly when other threads share the launch") {
  // h[i % 4] += 1 from every iteration: plain adds from two threads would
  // lose some of the additions (exact in float: counts stay below 2^24).
  auto scatter = ctg::kernel<"shared_scatter">([](auto h, int n) {
    return ctg::range(n, [=](auto i) { return h[i % 4] += 1.0f; });
  });
  for (int threads = 1; threads <= 4; ++threads) {
    CAPTURE(threads);
    pool_threads scope(threads);
    for (int n : {4 * 301, int(thread_pool::inline_below) - 3, 4 * 100000 + 3}) {
      CAPTURE(n);
      ctg::field<float, 1> h(4);
      int const rounds = 2;
      for (int round = 0; round < rounds; ++round) scatter(h, n);
      for (int k = 0; k < 4; ++k) CHECK(h.at(k) == float(rounds * (n / 4 + (k < n % 4 ? 1 : 0))));
    }
  }
}

namespace {
// Holds the first worker that reaches a claim after arm(), until release():
// the worker has read a claim word and stands just before the claim.
struct late_worker_hooks {
  static inline std::atomic<bool> armed{false}, held{false}, released{false};
  static void before_claim() {
    if (armed.exchange(false)) {
      held = true;
      while (!released.load()) std::this_thread::yield();
    }
  }
};
}  // namespace

TEST_CASE("thread pool: a worker that wakes late claims nothing of a finished or later launch") {
  using pool_type = basic_thread_pool<late_worker_hooks>;
  pool_type pool(2);
  auto const me = std::this_thread::get_id();
  int64 const n = pool_type::inline_below * 3 + 5;
  std::vector<std::unique_ptr<launch_record>> held_launches;

  // The first launch: the worker reads its claim word, then is held; the
  // caller waits in its first chunk until that happened, then does all the
  // work, the worker's chunks too.
  late_worker_hooks::armed = true;
  held_launches.push_back(std::make_unique<launch_record>(n));
  bool held = false;
  {
    auto& r = *held_launches.back();
    auto record = r.body();
    bool first = true;
    pool.parallel_for(n, [&](int64 b, int64 e) {
      if (first && std::this_thread::get_id() == me) {
        first = false;
        held = eventually([] { return late_worker_hooks::held.load(); });
      }
      record(b, e);
    });
  }
  REQUIRE(held);
  // More launches, of other sizes and bodies, while the worker still holds
  // the first launch's word: all run on the caller.
  for (int k = 0; k < 40; ++k) {
    int64 const m = pool_type::inline_below + 977 * k;
    held_launches.push_back(std::make_unique<launch_record>(m));
    pool.parallel_for(m, held_launches.back()->body());
  }
  for (auto& r : held_launches) {
    REQUIRE(r->covered_once());
    CHECK(r->all_on(me));
  }

  // The worker is released from inside the next launch, while its own
  // chunks of that launch are all unclaimed: its claim with the stale word
  // must fail, after which it takes part in this launch with this launch's
  // body. The caller's first chunk waits for that.
  launch_record next(n);
  auto record = next.body();
  std::atomic<int> by_worker{0};
  bool joined = false, first = true;
  pool.parallel_for(n, [&](int64 b, int64 e) {
    if (std::this_thread::get_id() != me) {
      by_worker.fetch_add(1);
    } else if (first) {
      first = false;
      late_worker_hooks::released = true;
      joined = eventually([&] { return by_worker.load() > 0; });
    }
    record(b, e);
  });
  CHECK(joined);
  REQUIRE(next.covered_once());
  // None of the launches before saw another chunk, and later ones are
  // whole.
  for (auto& r : held_launches) REQUIRE(r->covered_once());
  for (int k = 0; k < 200; ++k) REQUIRE(launch_and_check(pool, pool_type::inline_below + 1237 * (k % 50)));
}

TEST_CASE("thread pool: an exception in a chunk reaches the caller, and the pool goes on") {
  for (int threads = 1; threads <= 4; ++threads) {
    CAPTURE(threads);
    thread_pool pool(threads);
    int64 const n = thread_pool::inline_below * 5;
    for (int64 bad : {int64(0), n / 2, n - 1}) {
      CAPTURE(bad);
      CHECK_THROWS_WITH_AS(pool.parallel_for(n,
                                             [&](int64 b, int64 e) {
                                               if (b <= bad && bad < e) throw std::runtime_error("chunk failed");
                                             }),
                           "chunk failed", std::runtime_error);
      REQUIRE(launch_and_check(pool, n));
    }
  }
}

TEST_CASE("thread pool: stress with 2 to 4 threads, from one caller and from two at once") {
  for (int threads = 2; threads <= 4; ++threads) {
    CAPTURE(threads);
    thread_pool pool(threads);
    unsigned state = 12345u + unsigned(threads);
    auto next_size = [&] {
      state = state * 1664525u + 1013904223u;
      return int64(1 + (state >> 8) % 40000);
    };
    for (int k = 0; k < 1500; ++k) REQUIRE(launch_and_check(pool, next_size()));
    // Two threads launching on the same pool: one launch at a time.
    std::atomic<int> failures{0};
    auto launcher = [&](unsigned seed) {
      for (int k = 0; k < 300; ++k) {
        seed = seed * 1664525u + 1013904223u;
        if (!launch_and_check(pool, int64(thread_pool::inline_below + (seed >> 8) % 30000))) failures.fetch_add(1);
      }
    };
    std::thread a(launcher, 1u), b(launcher, 2u);
    a.join();
    b.join();
    CHECK(failures.load() == 0);
  }
}
