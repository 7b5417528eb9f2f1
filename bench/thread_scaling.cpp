// What a second thread buys: ctgrad and the hand-written loops of
// workloads_basic.hpp and workloads_sim.hpp on a pool of one thread and on a
// pool of two, all four paired in the same iterations (cpu_support.hpp), so
// that the two-thread/one-thread ratios hold on a machine whose speed
// drifts. The pool is resized in each variant's untimed setup and woken with
// a launch of its own, so a run starts with its workers up, as in a program
// that launches one kernel after another.
//
// Forward benchmarks time the forward pass; gradient benchmarks time the
// forward pass and the adjoint (the clearing and seeding of gradients is in
// the setup). competing:1 runs them next to a spinning thread
// (competing_load.hpp), as with a second process on the machine. Counters:
// milliseconds per run of each variant, and ratio_ctgrad_2t_over_1t,
// ratio_hand_2t_over_1t.
#include <array>
#include <functional>

#include "competing_load.hpp"
#include "cpu_support.hpp"
#include "workloads_basic.hpp"
#include "workloads_sim.hpp"

namespace {

using bench::variant;

// Resizes the process-wide pool unless it has the size already, then runs
// two launches so that its workers are awake.
void pool_of(int threads) {
  if (ctg::num_threads() != threads) ctg::set_num_threads(threads);
  auto& pool = ctg::cpu::thread_pool::instance();
  for (int k = 0; k < 2; ++k) pool.parallel_for(1 << 16, [](std::int64_t, std::int64_t) {});
}

// Variants: ctgrad on 1 thread, on 2, hand-written on 1, on 2.
void run_paired(benchmark::State& state, std::function<void()> const& clear, std::function<void()> const& ours,
                std::function<void()> const& hand) {
  bench::competing_load load(state.range(0) != 0);
  auto on = [&](int threads) {
    return [&clear, threads] {
      pool_of(threads);
      clear();
    };
  };
  auto const t = bench::paired<4>(state, {variant{on(1), ours}, variant{on(2), ours}, variant{on(1), hand},
                                          variant{on(2), hand}});
  double const it = double(state.iterations());
  state.counters["ms_ctgrad_1t"] = 1e3 * t[0] / it;
  state.counters["ms_ctgrad_2t"] = 1e3 * t[1] / it;
  state.counters["ms_hand_1t"] = 1e3 * t[2] / it;
  state.counters["ms_hand_2t"] = 1e3 * t[3] / it;
  state.counters["ratio_ctgrad_2t_over_1t"] = t[1] / t[0];
  state.counters["ratio_hand_2t_over_1t"] = t[3] / t[2];
  ctg::set_num_threads(0);
}

void BM_map_forward(benchmark::State& state) {
  bench::basic::map_data d;
  run_paired(state, [] {}, [&] { bench::map_kernel(d.x, d.y); }, [&] { d.hand_forward(); });
}
void BM_map_gradient(benchmark::State& state) {
  bench::basic::map_data d;
  run_paired(
      state,
      [&] {
        d.x.zero_grad();
        d.reseed();
      },
      [&] {
        bench::map_kernel(d.x, d.y);
        bench::map_kernel.grad(d.x, d.y);
      },
      [&] {
        d.hand_forward();
        d.hand_adjoint();
      });
}
void BM_wave_forward(benchmark::State& state) {
  bench::basic::wave_data d;
  run_paired(state, [] {}, [&] { d.ours_forward(); }, [&] { d.hand_forward(); });
}
void BM_wave_gradient(benchmark::State& state) {
  bench::basic::wave_data d;
  run_paired(
      state, [&] { d.reseed(); },
      [&] {
        d.ours_forward();
        d.ours_adjoint();
      },
      [&] {
        d.hand_forward();
        d.hand_adjoint();
      });
}
void BM_springs_forward(benchmark::State& state) {
  bench::sim::spring_data d;
  run_paired(state, [&] { d.clear_forces(); }, [&] { d.ours_forward(); }, [&] { d.hand_forward(); });
}
void BM_springs_gradient(benchmark::State& state) {
  bench::sim::spring_data d;
  run_paired(
      state,
      [&] {
        d.clear_forces();
        d.reseed();
        d.x.zero_grad();
        d.rest.zero_grad();
      },
      [&] {
        d.ours_forward();
        d.ours_adjoint();
      },
      [&] {
        d.hand_forward();
        d.hand_adjoint();
      });
}
void BM_recurrence_gradient(benchmark::State& state) {
  bench::basic::rec_data d;
  run_paired(
      state,
      [&] {
        d.x.zero_grad();
        d.reseed();
      },
      [&] {
        d.ours_forward();
        d.ours_adjoint();
      },
      [&] {
        d.hand_forward();
        d.hand_adjoint();
      });
}

void common(benchmark::internal::Benchmark* b) {
  b->ArgName("competing")->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
}

}  // namespace

BENCHMARK(BM_map_forward)->Apply(common);
BENCHMARK(BM_map_gradient)->Apply(common);
BENCHMARK(BM_wave_forward)->Apply(common);
BENCHMARK(BM_wave_gradient)->Apply(common);
BENCHMARK(BM_springs_forward)->Apply(common);
BENCHMARK(BM_springs_gradient)->Apply(common);
BENCHMARK(BM_recurrence_gradient)->ArgName("competing")->Arg(0)->UseManualTime()->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) { return bench::run_main(argc, argv); }
