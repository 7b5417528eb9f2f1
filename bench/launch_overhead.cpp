// What one parallel launch on the CPU thread pool costs, apart from its work:
// a loop of n elements doing almost nothing (body:0, y[i] = x[i] + 1, a
// fraction of a nanosecond per element) or a sine per element (body:1,
// y[i] = sin(x[i]) x[i], about 6 ns), timed on a pool of one thread and on a
// pool of two, paired in the same iterations (pool objects of their own, so
// neither is resized while timing). Where two threads stop losing to one is
// where thread_pool::inline_below belongs.
//
// competing:1 starts a thread that only spins for the duration of the
// benchmark (competing_load.hpp): with two cores it leaves the pool one, as
// a second process on the machine does.
//
// The counters give microseconds per launch for each pool and their ratio
// (two threads over one); the benchmark's own time is the two-thread pool's.
#include <cmath>
#include <thread>
#include <vector>

#include "competing_load.hpp"
#include "cpu_support.hpp"

namespace {

using bench::int64;
using bench::variant;

// Launches per timed run: enough that the clock's own cost does not count.
constexpr int launches_per_run = 200;

void BM_launch(benchmark::State& state) {
  int64 const n = state.range(0);
  std::vector<float> x(static_cast<std::size_t>(n), 1.0f), y(static_cast<std::size_t>(n));
  float* xs = x.data();
  float* ys = y.data();
  ctg::cpu::thread_pool one(1), two(2);
  bool const sine = state.range(1) != 0;
  bench::competing_load load(state.range(2) != 0);
  auto launches = [&](ctg::cpu::thread_pool& pool) {
    for (int k = 0; k < launches_per_run; ++k) {
      if (sine)
        pool.parallel_for(n, [=](int64 b, int64 e) {
          for (int64 i = b; i < e; ++i) ys[i] = std::sin(xs[i]) * xs[i];
        });
      else
        pool.parallel_for(n, [=](int64 b, int64 e) {
          for (int64 i = b; i < e; ++i) ys[i] = xs[i] + 1.0f;
        });
    }
  };
  auto none = [] {};
  auto t = bench::paired<2>(state, {variant{none, [&] { launches(two); }}, variant{none, [&] { launches(one); }}});
  double const runs = double(state.iterations()) * launches_per_run;
  state.counters["us_per_launch_2t"] = 1e6 * t[0] / runs;
  state.counters["us_per_launch_1t"] = 1e6 * t[1] / runs;
  state.counters["ratio_2t_over_1t"] = t[0] / t[1];
  float const want = sine ? std::sin(1.0f) : 2.0f;
  for (float v : y)
    if (v != want) bench::fail("launch overhead: an element was not written");
}

}  // namespace

BENCHMARK(BM_launch)
    ->ArgNames({"n", "body", "competing"})
    ->ArgsProduct({{256, 1024, 2048, 4096, 16384, 65536}, {0, 1}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.5);

int main(int argc, char** argv) { return bench::run_main(argc, argv); }
