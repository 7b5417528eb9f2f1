// What a second thread gives on this machine, apart from ctgrad: the same
// total work split over a pool of one thread and a pool of two, paired in
// the same iterations, for three loops that stand for the shapes of the
// CPU workloads' sweeps:
//   body:0  vector arithmetic on data in the first-level cache (8 KiB a
//           thread, swept again and again), as a vectorised stencil's
//           interior on rows it has just loaded;
//   body:1  the same on 384 KiB a thread (second-level cache), the size of
//           the rows one step of the wave touches;
//   body:2  a stream over 26 MB (c += a / 2 + b), the wave's rows and
//           gradients for all its steps.
// ratio_2t_over_1t is 0.5 where a second thread doubles the throughput.
// On a virtual machine whose two vCPUs share a physical core's resources (or
// its clock), body:0 shows it while body:2 may not.
#include <vector>

#include "cpu_support.hpp"
#include "workloads_basic.hpp"

namespace {

using bench::int64;
using bench::variant;

void sweep(float* a, int64 n, int reps) {
  for (int r = 0; r < reps; ++r)
    for (int64 i = 0; i < n; ++i) a[i] = a[i] * 0.999f + 0.001f;
}

void BM_machine_scaling(benchmark::State& state) {
  int const body = int(state.range(0));
  ctg::cpu::thread_pool one(1), two(2);
  // Per thread: its own block for the cached bodies; the stream's arrays shared.
  int64 const block = body == 0 ? 2048 : 98304;
  int const sweeps = body == 0 ? 40 : 1;  // per unit: about the same element count for both
  // Units of work split between the threads: enough that the pool does not
  // run the loop on the caller alone (thread_pool::inline_below).
  int64 const units = ctg::cpu::thread_pool::inline_below * 2;
  std::vector<std::vector<float>> blocks(2, std::vector<float>(std::size_t(block), 1.0f));
  int64 const n = int64(bench::basic::wave_rows) * bench::basic::wave_cells;
  std::vector<float> a(std::size_t(n), 1.0f), b(std::size_t(n), 2.0f), c(std::size_t(n), 0.0f);
  auto run = [&](ctg::cpu::thread_pool& pool) {
    if (body == 2) {
      pool.parallel_for(n, [&](int64 lo, int64 hi) {
        for (int64 i = lo; i < hi; ++i) c[std::size_t(i)] += a[std::size_t(i)] * 0.5f + b[std::size_t(i)];
      });
    } else {
      pool.parallel_for(units, [&](int64 lo, int64 hi) {
        float* mine = blocks[std::size_t(ctg::cpu::thread_pool::thread_index())].data();
        for (int64 k = lo; k < hi; ++k) sweep(mine, block, sweeps);
      });
    }
    benchmark::DoNotOptimize(blocks[0].data());
    benchmark::DoNotOptimize(c.data());
  };
  auto none = [] {};
  auto t = bench::paired<2>(state, {variant{none, [&] { run(one); }}, variant{none, [&] { run(two); }}});
  double const it = double(state.iterations());
  state.counters["ms_1t"] = 1e3 * t[0] / it;
  state.counters["ms_2t"] = 1e3 * t[1] / it;
  state.counters["ratio_2t_over_1t"] = t[1] / t[0];
}

}  // namespace

BENCHMARK(BM_machine_scaling)
    ->ArgName("body")
    ->DenseRange(0, 2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

int main(int argc, char** argv) { return bench::run_main(argc, argv); }
