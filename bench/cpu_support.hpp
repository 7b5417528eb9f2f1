// What the CPU benchmarks share: a gradient comparison that aborts the run on
// a mismatch, paired timing of ctgrad against hand-written code, the thread
// counts each benchmark runs with, and the run context.
//
// Why paired timing: this kind of machine drifts by up to 1.6x over minutes,
// so timing ctgrad in one benchmark and the hand-written code in another
// compares two different machines. Here every benchmark iteration runs all
// of its variants back to back, in an order that changes every iteration,
// each after its own untimed setup, and the ratios are sums of times over
// the same iterations.
#pragma once
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctgrad/ctgrad.hpp>
#include <functional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#ifndef CTGRAD_BENCH_FLAGS
#  define CTGRAD_BENCH_FLAGS "unknown"
#endif

namespace bench {

using int64 = std::int64_t;

// ---- gradient checks ---------------------------------------------------------------------
[[noreturn]] inline void fail(std::string const& what) {
  std::fprintf(stderr, "gradient mismatch: %s\n", what.c_str());
  std::exit(2);
}

// The scalars of a vector of scalars or fixed-size Eigen matrices, in order.
template <class T>
std::vector<double> flatten(std::vector<T> const& v) {
  std::vector<double> out;
  if constexpr (ctg::is_eigen_fixed_v<T>) {
    out.reserve(v.size() * std::size_t(T::SizeAtCompileTime));
    for (auto const& m : v)
      for (int k = 0; k < int(T::SizeAtCompileTime); ++k) out.push_back(double(m.coeff(k)));
  } else {
    out.assign(v.begin(), v.end());
  }
  return out;
}

// Aborts unless ours == theirs within rtol, element by element, measured
// against |theirs| + 1e-3 max|theirs| (float sums in another order differ in
// the last bits, and tiny entries next to large ones carry no information).
// A reference that is all zero would make any comparison pass: that aborts too.
template <class T>
void compare(std::vector<T> const& ours_v, std::vector<T> const& theirs_v, double rtol, std::string const& what) {
  auto const ours = flatten(ours_v), theirs = flatten(theirs_v);
  if (ours.size() != theirs.size()) fail(what + ": sizes differ");
  double scale = 0;
  for (double t : theirs) scale = std::max(scale, std::abs(t));
  if (!(scale > 0) || !std::isfinite(scale)) fail(what + ": the reference gradient is zero or not finite");
  for (std::size_t i = 0; i < ours.size(); ++i) {
    double const err = std::abs(ours[i] - theirs[i]) / (std::abs(theirs[i]) + 1e-3 * scale);
    if (!(err <= rtol))
      fail(what + " at " + std::to_string(i) + ": ctgrad " + std::to_string(ours[i]) + ", reference " +
           std::to_string(theirs[i]));
  }
}

// ---- paired timing ---------------------------------------------------------------------------
// One variant: untimed setup (reset the state it reads and accumulates into),
// then the timed run.
struct variant {
  std::function<void()> setup;
  std::function<void()> run;
};

inline double seconds(std::function<void()> const& f) {
  auto const t0 = std::chrono::steady_clock::now();
  f();
  benchmark::ClobberMemory();
  auto const t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(t1 - t0).count();
}

// Runs every variant once per benchmark iteration; the benchmark's own time
// is variant 0's. Returns the summed seconds of each variant over the timed
// iterations. The order rotates every iteration, so that over N iterations
// each variant runs once in each position, and every N iterations the cycle
// it rotates changes (the next arrangement of variants 1..N-1 behind variant
// 0), so that each variant also follows each of the others. A rotation of
// one cycle alone keeps each variant's predecessor fixed (with three
// variants, variant 0 always ran right after variant 2), and a variant that
// leaves the machine slower for a while (a contended-atomic reference)
// would then always slow the same neighbour.
template <std::size_t N>
std::array<double, N> paired(benchmark::State& state, std::array<variant, N> const& v) {
  for (auto const& x : v) {  // warm-up: page faults, pool start, instruction cache
    x.setup();
    x.run();
  }
  std::array<double, N> total{};
  std::array<std::size_t, N> cycle{};
  for (std::size_t k = 0; k < N; ++k) cycle[k] = k;
  std::size_t shift = 0;
  for (auto _ : state) {
    double mine = 0;
    for (std::size_t k = 0; k < N; ++k) {
      std::size_t const which = cycle[(shift + k) % N];
      v[which].setup();
      double const s = seconds(v[which].run);
      total[which] += s;
      if (which == 0) mine = s;
    }
    state.SetIterationTime(mine);
    if (++shift == N) {
      shift = 0;
      std::next_permutation(cycle.begin() + 1, cycle.end());  // wraps to the first after the last
    }
  }
  return total;
}

// Forward benchmark: ctgrad forward vs hand-written forward.
inline void report_forward(benchmark::State& state, double bytes, std::array<double, 2> const& t) {
  double const it = double(state.iterations());
  state.counters["bytes_per_second"] = benchmark::Counter(bytes * it, benchmark::Counter::kIsRate);
  state.counters["hand_bytes_per_second"] = benchmark::Counter(bytes * it / t[1]);
  state.counters["ratio_ctgrad_over_hand_forward"] = t[0] / t[1];
}

// Adjoint benchmark: variants ctgrad adjoint, hand adjoint, ctgrad forward,
// hand forward, so that every ratio compares runs of the same iterations.
inline void report_adjoint(benchmark::State& state, double bytes, std::array<double, 4> const& t) {
  double const it = double(state.iterations());
  state.counters["bytes_per_second"] = benchmark::Counter(bytes * it, benchmark::Counter::kIsRate);
  state.counters["hand_bytes_per_second"] = benchmark::Counter(bytes * it / t[1]);
  state.counters["ratio_ctgrad_over_hand_adjoint"] = t[0] / t[1];
  state.counters["ratio_adjoint_over_forward"] = t[0] / t[2];
  state.counters["hand_ratio_adjoint_over_forward"] = t[1] / t[3];
}

// ---- threads ----------------------------------------------------------------------------------
inline int all_threads() { return int(std::max(1u, std::thread::hardware_concurrency())); }

// Each benchmark runs single-threaded and on every hardware thread.
inline void thread_counts(benchmark::internal::Benchmark* b) {
  b->ArgName("threads")->Arg(1);
  if (all_threads() > 1) b->Arg(all_threads());
}

// Sets the pool size for this benchmark (ctgrad and the hand-written loops
// share the pool).
inline void use_threads(benchmark::State const& state) { ctg::set_num_threads(int(state.range(0))); }

// Whether the loop running now shares its iterations among threads. The
// hand-written loops add to shared elements atomically only then, as ctgrad
// does: with one thread (or a loop small enough to stay on the calling
// thread) a hand-written loop would not pay for atomics either.
inline bool loop_is_concurrent = true;

// The hand-written loops run on ctgrad's pool, so both sides pay the same
// scheduling cost.
template <class Body>
void parallel_for(int64 n, Body&& body) {
  auto& pool = ctg::cpu::thread_pool::instance();
  loop_is_concurrent = !pool.runs_on_caller(n);  // set before the workers start, read-only while they run
  pool.parallel_for(n, std::forward<Body>(body));
}

// Subnormals flushed to zero (on) or IEEE (off) from now on, for ctgrad's
// launches (ctg::set_flush_subnormals) and for the hand-written loops alike:
// those are not launches, so the calling thread's own mode is set too, and
// the pool's workers adopt it for every chunk.
inline void flush_subnormals_everywhere(bool on) {
  ctg::set_flush_subnormals(on);
  ctg::cpu::adopt_subnormal_mode(on ? ctg::cpu::flush_bits : 0);
}

// ctgrad's code and the hand-written one, each with subnormals flushed and
// in IEEE mode, alternated as paired() does (after `setup`, in each mode):
// the times of {ctgrad flushed, hand-written flushed, ctgrad IEEE,
// hand-written IEEE}. Leaves IEEE mode; reports ctgrad's flushed over IEEE.
inline std::array<double, 4> paired_flushed_and_ieee(benchmark::State& state, std::function<void()> const& setup,
                                                     std::function<void()> const& ours,
                                                     std::function<void()> const& hand) {
  auto in_mode = [&setup](bool flush) {
    return [&setup, flush] {
      flush_subnormals_everywhere(flush);
      setup();
    };
  };
  auto const t = paired<4>(state, {variant{in_mode(true), ours}, variant{in_mode(true), hand},
                                   variant{in_mode(false), ours}, variant{in_mode(false), hand}});
  flush_subnormals_everywhere(false);
  state.counters["ratio_flushed_over_ieee"] = t[0] / t[2];
  return t;
}

// Add to an element several iterations may share: a relaxed atomic add (the
// same instruction sequence ctgrad's backend uses) when threads run the loop
// concurrently, a plain add otherwise.
template <class T>
inline void atomic_add(T& dst, T v) {
  if (loop_is_concurrent)
    std::atomic_ref<T>(dst).fetch_add(v, std::memory_order_relaxed);
  else
    dst += v;
}
template <class M>
inline void atomic_add_coeffs(M& dst, M const& v) {
  for (int k = 0; k < int(M::SizeAtCompileTime); ++k) atomic_add(dst.coeffRef(k), v.coeff(k));
}

// ---- main --------------------------------------------------------------------------------------
inline int run_main(int argc, char** argv) {
#if defined(__clang__)
  benchmark::AddCustomContext("compiler", std::string("clang++ ") + __clang_version__);
#elif defined(__GNUC__)
  benchmark::AddCustomContext("compiler", std::string("g++ ") + __VERSION__);
#endif
  benchmark::AddCustomContext("flags", CTGRAD_BENCH_FLAGS);
  benchmark::AddCustomContext("ctgrad_all_threads", std::to_string(all_threads()));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace bench
