// Checkpointed rollouts (docs/05-performance.md, "Long rollouts:
// checkpointing"): the time of forward + backward and the peak memory of the
// copies, against the number of snapshots S, for a fixed horizon.
//
// The workload: the heat equation on 16K cells for T = 512 steps, in place in
// two buffers picked by t % 2, with a learned diffusion coefficient D whose
// gradient reads every step's values, so that the full tape keeps one copy of
// a buffer per step (T x 128 KB). Four ways to the same gradient:
//   full tape     the steps in a plain loop on a ctg::tape;
//   checkpointed  tape.rollout(T, step, ctg::checkpoint{.snapshots = S}), for
//                 S from 2 to T (S = T records every step: the full tape
//                 behind the rollout API);
//   indexed       one field indexed by the step, u(t, i), with the adjoints
//                 called by hand in reverse (no tape, nothing copied, T + 1
//                 states in memory): the layout of DiffTaichi.
// BM_checkpoint/snapshots:S pairs the checkpointed rollout with the full tape
// (every iteration runs both, see cpu_support.hpp); BM_indexed pairs the
// indexed layout with the full tape. The ratios of paired times are what
// carries over from one run to the next on a machine that drifts.
//
// The targets (issue 17): with S = ceil(sqrt(T)) the time <= 2.2 x the full
// tape's and the peak <= (S + 2) states; with S = T <= 1.05 x.
// bench/checkpoint_svg.py draws bench/results/checkpoint.json.
#include <cmath>
#include <string>
#include <vector>

#include "cpu_support.hpp"
#include "heat_kernels.hpp"

namespace {

using namespace ctg::literals;
using bench::variant;
using vec = ctg::field<double, 1, ctg::grad>;
using rows = ctg::field<double, 2, ctg::grad>;
using scalar = ctg::field<double, 0, ctg::grad>;

constexpr int cells = 1 << 14;
constexpr int steps = 512;

using bench::heat;
using bench::heat_indexed;

inline auto energy = ctg::kernel<"ckpt_energy">([](auto u, auto loss) {
  return ctg::range(u.size(), [=](auto i) { return loss() += u[i] * u[i]; });
});
inline auto energy_indexed = ctg::kernel<"ckpt_energy_indexed">([](auto u, auto loss, int t) {
  return ctg::range(u.shape(1_c), [=](auto i) { return loss() += u(t, i) * u(t, i); });
});

struct problem {
  std::vector<double> start;
  scalar d{ctg::field_options{.name = "D"}}, loss{ctg::field_options{.name = "loss"}};
  vec a{{cells}, {.name = "a"}}, b{{cells}, {.name = "b"}};
  rows u{{steps + 1, cells}, {.name = "u"}};
  std::size_t peak = 0, state_bytes = 0;
  long long recomputed = 0;

  problem() : start(std::size_t(cells)) {
    for (int i = 0; i < cells; ++i) {
      double const z = double(i - cells / 2) / 300.0;
      start[std::size_t(i)] = std::exp(-z * z);
    }
    d.at() = 0.15;
    for (int i = 0; i < cells; ++i) u.at(0, i) = start[std::size_t(i)];
  }
  // Step t reads buffer t % 2 and writes the other: the roles follow the
  // step number, so backward() can run any step again.
  void step(int t) { t % 2 == 0 ? heat(a, b, d) : heat(b, a, d); }
  vec const& last() const { return steps % 2 == 0 ? a : b; }

  // snapshots == 0: the full tape.
  void on_tape(int snapshots) {
    loss.fill(0.0);
    a.copy_from(start);
    ctg::tape tape(loss);
    if (snapshots == 0) {
      for (int t = 0; t < steps; ++t) step(t);
    } else {
      auto const& info = tape.rollout(steps, [&](int t) { step(t); }, ctg::checkpoint{.snapshots = snapshots});
      state_bytes = info.state_bytes;
    }
    energy(last(), loss);
    tape.backward();
    peak = tape.peak_bytes_saved();
  }
  void indexed() {
    loss.fill(0.0);
    for (int t = 0; t < steps; ++t) heat_indexed(u, d, t);
    energy_indexed(u, loss, steps);
    u.zero_grad();
    d.zero_grad();
    loss.grad().fill(1.0);
    energy_indexed.grad(u, loss, steps);
    for (int t = steps - 1; t >= 0; --t) heat_indexed.grad(u, d, t);
  }
  // d loss / d(initial state) and d loss / d D.
  std::vector<double> gradient_on_tape() const {
    auto g = a.grad().to_vector();
    g.push_back(d.grad().at());
    return g;
  }
  std::vector<double> gradient_indexed() const {
    std::vector<double> g(std::size_t(cells) + 1);
    for (int i = 0; i < cells; ++i) g[std::size_t(i)] = u.grad().at(0, i);
    g[std::size_t(cells)] = d.grad().at();
    return g;
  }
};

problem& shared_problem() {
  static problem p;
  return p;
}

// Bytes of one state: the values of the two buffers the steps carry (what a
// snapshot copies). The fields themselves, values and gradients: 2 states in
// place, T + 1 time levels (T + 1 states) indexed.
constexpr double one_state = 2.0 * cells * sizeof(double);
constexpr double in_place_fields = 2.0 * one_state;

void BM_checkpoint(benchmark::State& state) {
  ctg::set_num_threads(1);
  int const s = int(state.range(0));
  problem& p = shared_problem();
  // The gradients agree before anything is timed: the same bits on one thread.
  p.on_tape(0);
  auto const full = p.gradient_on_tape();
  std::size_t const full_peak = p.peak;
  p.on_tape(s);
  if (p.gradient_on_tape() != full) bench::fail("checkpointed gradient differs from the full tape's");
  std::size_t const ck_peak = p.peak;
  if (s < steps && p.state_bytes != std::size_t(one_state))
    bench::fail("the rollout's state is not the two buffers");
  auto none = [] {};
  auto t = bench::paired<2>(state, {variant{none, [&] { p.on_tape(s); }}, variant{none, [&] { p.on_tape(0); }}});
  state.counters["snapshots"] = s;
  state.counters["steps"] = steps;
  state.counters["ratio_time_over_full_tape"] = t[0] / t[1];
  state.counters["ms_checkpointed"] = 1e3 * t[0] / double(state.iterations());
  state.counters["ms_full_tape"] = 1e3 * t[1] / double(state.iterations());
  // The copies the tape held at most (snapshots, the final values, one
  // step's copies for its adjoints), and with the fields.
  state.counters["peak_bytes"] = double(ck_peak);
  state.counters["peak_states"] = double(ck_peak) / one_state;
  state.counters["memory_bytes"] = in_place_fields + double(ck_peak);
  state.counters["full_tape_peak_bytes"] = double(full_peak);
  state.counters["full_tape_memory_bytes"] = in_place_fields + double(full_peak);
  state.counters["forward_steps_recomputed"] =
      double(s < steps ? ctg::checkpoint_schedule(steps, s).recomputed_steps() : 0);
}

void BM_indexed(benchmark::State& state) {
  ctg::set_num_threads(1);
  problem& p = shared_problem();
  p.on_tape(0);
  p.indexed();
  bench::compare(p.gradient_on_tape(), p.gradient_indexed(), 1e-12, "full tape against indexed");
  std::size_t const full_peak = p.peak;
  auto none = [] {};
  auto t = bench::paired<2>(state, {variant{none, [&] { p.indexed(); }}, variant{none, [&] { p.on_tape(0); }}});
  state.counters["steps"] = steps;
  state.counters["ratio_time_over_full_tape"] = t[0] / t[1];
  state.counters["ms_indexed"] = 1e3 * t[0] / double(state.iterations());
  state.counters["ms_full_tape"] = 1e3 * t[1] / double(state.iterations());
  // Nothing copied; the field u holds T + 1 time levels, values and gradients.
  state.counters["peak_bytes"] = 0;
  state.counters["memory_bytes"] = double(steps + 1) * one_state;
  state.counters["full_tape_peak_bytes"] = double(full_peak);
  state.counters["full_tape_memory_bytes"] = in_place_fields + double(full_peak);
}

}  // namespace

// S = 23 is ceil(sqrt(512)).
BENCHMARK(BM_checkpoint)
    ->ArgName("snapshots")
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->Arg(23)
    ->Arg(64)
    ->Arg(128)
    ->Arg(256)
    ->Arg(512)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(4.0);
BENCHMARK(BM_indexed)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(4.0);

int main(int argc, char** argv) { return bench::run_main(argc, argv); }
