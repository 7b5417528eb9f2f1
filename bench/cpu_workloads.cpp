// CPU benchmarks, part 1: map, 1-D wave stencil, carried recurrence,
// reduction (the workloads are in workloads_basic.hpp). Each benchmark checks
// ctgrad against the hand-written code on the same data first (a mismatch
// aborts the run), then times them alternately: forward benchmarks ctgrad and
// hand-written forward; adjoint benchmarks both adjoints and both forwards.
// Part 2 (mass-spring scatter, MLS-MPM) is cpu_workloads_sim.cpp; the
// shared timing and comparison code is cpu_support.hpp.
#include <vector>

#include "cpu_support.hpp"
#include "workloads_basic.hpp"

namespace {

using namespace bench::basic;
using bench::variant;

void BM_map_forward(benchmark::State& state) {
  bench::use_threads(state);
  map_data d;
  map_kernel(d.x, d.y);
  auto ours = d.y.to_vector();
  d.hand_forward();
  bench::compare(ours, d.y.to_vector(), 1e-6, "map forward");
  auto none = [] {};
  auto t = bench::paired<2>(state, {variant{none, [&] { map_kernel(d.x, d.y); }}, variant{none, [&] { d.hand_forward(); }}});
  bench::report_forward(state, 8.0 * map_n, t);
}

void BM_map_adjoint(benchmark::State& state) {
  bench::use_threads(state);
  map_data d;
  map_kernel(d.x, d.y);
  d.reseed();
  map_kernel.grad(d.x, d.y);
  auto ours = d.x.grad().to_vector();
  d.x.zero_grad();
  d.reseed();
  d.hand_adjoint();
  bench::compare(ours, d.x.grad().to_vector(), 1e-5, "map adjoint");
  auto reseed = [&] { d.reseed(); };
  auto none = [] {};
  auto t = bench::paired<4>(state, {variant{reseed, [&] { map_kernel.grad(d.x, d.y); }},
                                    variant{reseed, [&] { d.hand_adjoint(); }},
                                    variant{none, [&] { map_kernel(d.x, d.y); }},
                                    variant{none, [&] { d.hand_forward(); }}});
  bench::report_adjoint(state, 20.0 * map_n, t);
}

void BM_wave_forward(benchmark::State& state) {
  bench::use_threads(state);
  wave_data d;
  d.ours_forward();
  auto ours = d.u.to_vector();
  d.hand_forward();
  bench::compare(ours, d.u.to_vector(), 1e-4, "wave forward");
  auto none = [] {};
  auto t = bench::paired<2>(state, {variant{none, [&] { d.ours_forward(); }}, variant{none, [&] { d.hand_forward(); }}});
  bench::report_forward(state, 12.0 * wave_cells * wave_steps, t);
}

// The wave's 200 forward steps with subnormals flushed to zero and in IEEE
// mode, ctgrad's and the hand-written loops alternated: the initial bump
// exp(-s^2) has subnormal tails, which the stencil reads at every step.
void BM_wave_forward_flushed(benchmark::State& state) {
  bench::use_threads(state);
  wave_data d;
  d.ours_forward();
  auto ieee = d.u.to_vector();
  bench::flush_subnormals_everywhere(true);
  d.ours_forward();
  bench::compare(d.u.to_vector(), ieee, 1e-4, "wave forward, flushed");
  auto t = bench::paired_flushed_and_ieee(
      state, [] {}, [&] { d.ours_forward(); }, [&] { d.hand_forward(); });
  state.counters["ratio_ctgrad_over_hand_forward"] = t[0] / t[1];
  state.counters["hand_ratio_flushed_over_ieee"] = t[1] / t[3];
  state.counters["ms_ctgrad_flushed"] = 1e3 * t[0] / double(state.iterations());
  state.counters["ms_hand_flushed"] = 1e3 * t[1] / double(state.iterations());
}

void BM_wave_adjoint(benchmark::State& state) {
  bench::use_threads(state);
  wave_data d;
  d.ours_forward();
  d.reseed();
  d.ours_adjoint();
  auto ours = d.u.grad().to_vector();
  d.reseed();
  d.hand_adjoint();
  // Rows 2.. must be cleared by both; rows 0 and 1 hold the gradient. 200
  // float steps summed in another order: entries near the boundary, small
  // next to the largest, differ by a few 1e-4 (both sides, against a double
  // reference).
  bench::compare(ours, d.u.grad().to_vector(), 2e-3, "wave adjoint");
  auto reseed = [&] { d.reseed(); };
  auto none = [] {};
  // A fifth variant: the hand-written adjoint with ctgrad's scatter structure.
  d.reseed();
  d.hand_adjoint_scatter();
  bench::compare(ours, d.u.grad().to_vector(), 2e-3, "wave adjoint (scatter)");
  auto t = bench::paired<5>(state, {variant{reseed, [&] { d.ours_adjoint(); }}, variant{reseed, [&] { d.hand_adjoint(); }},
                                    variant{none, [&] { d.ours_forward(); }}, variant{none, [&] { d.hand_forward(); }},
                                    variant{reseed, [&] { d.hand_adjoint_scatter(); }}});
  bench::report_adjoint(state, 24.0 * wave_cells * wave_steps, {t[0], t[1], t[2], t[3]});
  state.counters["ratio_ctgrad_over_hand_scatter_adjoint"] = t[0] / t[4];
}

void BM_recurrence_forward(benchmark::State& state) {
  bench::use_threads(state);
  rec_data d;
  d.ours_forward();
  auto ours = d.out.to_vector();
  d.hand_forward();
  bench::compare(ours, d.out.to_vector(), 1e-5, "recurrence forward");
  auto none = [] {};
  auto t = bench::paired<2>(state, {variant{none, [&] { d.ours_forward(); }}, variant{none, [&] { d.hand_forward(); }}});
  bench::report_forward(state, 8.0 * rec_n, t);
}

void BM_recurrence_adjoint(benchmark::State& state) {
  bench::use_threads(state);
  rec_data d;
  d.ours_forward();
  d.reseed();
  d.ours_adjoint();
  auto ours = d.x.grad().to_vector();
  d.x.zero_grad();
  d.reseed();
  d.hand_adjoint();
  bench::compare(ours, d.x.grad().to_vector(), 1e-4, "recurrence adjoint");
  auto reseed = [&] { d.reseed(); };
  auto none = [] {};
  auto t = bench::paired<4>(state, {variant{reseed, [&] { d.ours_adjoint(); }}, variant{reseed, [&] { d.hand_adjoint(); }},
                                    variant{none, [&] { d.ours_forward(); }}, variant{none, [&] { d.hand_forward(); }}});
  bench::report_adjoint(state, 20.0 * rec_n, t);
}

void BM_reduction_forward(benchmark::State& state) {
  bench::use_threads(state);
  red_data d;
  d.clear();
  red_kernel(d.x, d.loss);
  std::vector<float> ours{*d.ls};
  d.clear();
  d.hand_forward();
  // Float sums in different orders: a loose check of the value.
  bench::compare(ours, std::vector<float>{*d.ls}, 1e-3, "reduction forward");
  auto clear = [&] { d.clear(); };
  // A third variant: the hand-written forward with ctgrad's structure (one
  // atomic add per element).
  auto t = bench::paired<3>(state, {variant{clear, [&] { red_kernel(d.x, d.loss); }}, variant{clear, [&] { d.hand_forward(); }},
                                    variant{clear, [&] { d.hand_forward_atomic(); }}});
  bench::report_forward(state, 4.0 * red_n, {t[0], t[1]});
  state.counters["ratio_ctgrad_over_hand_atomic_forward"] = t[0] / t[2];
}

void BM_reduction_adjoint(benchmark::State& state) {
  bench::use_threads(state);
  red_data d;
  red_kernel(d.x, d.loss);
  *d.gl = 1.5f;
  red_kernel.grad(d.x, d.loss);
  auto ours = d.x.grad().to_vector();
  d.x.zero_grad();
  d.hand_adjoint();
  bench::compare(ours, d.x.grad().to_vector(), 1e-6, "reduction adjoint");
  auto none = [] {};
  auto clear = [&] { d.clear(); };
  auto t = bench::paired<4>(state, {variant{none, [&] { red_kernel.grad(d.x, d.loss); }}, variant{none, [&] { d.hand_adjoint(); }},
                                    variant{clear, [&] { red_kernel(d.x, d.loss); }}, variant{clear, [&] { d.hand_forward(); }}});
  bench::report_adjoint(state, 12.0 * red_n, t);
}

// Value and gradient from scratch (what a training step needs): ctgrad's
// value_and_grad, the hand-written one-pass gradient, ctgrad's forward then
// adjoint, and the hand-written forward then adjoint; each after reseeding
// the output gradient. Checked first: the values and the gradients equal
// those of ctgrad's two launches.
template <class Data, class Kernel, class... Args>
void gradient_benchmark(benchmark::State& state, Data& d, Kernel const& k, std::vector<float> (*value)(Data&),
                        double bytes, char const* what, Args&... args) {
  auto setup = [&] {
    d.reseed();
    d.x.zero_grad();
  };
  setup();
  k(args...);
  k.grad(args...);
  auto const want_value = value(d);
  auto const want_grad = d.x.grad().to_vector();
  setup();
  k.value_and_grad(args...);
  // (Float sums in another order: the reduction's value differs in its last bits.)
  bench::compare(value(d), want_value, 1e-4, what);
  bench::compare(d.x.grad().to_vector(), want_grad, 1e-6, what);
  auto t = bench::paired<4>(state, {variant{setup, [&] { k.value_and_grad(args...); }},
                                    variant{setup, [&] { d.hand_value_and_gradient(); }},
                                    variant{setup, [&] { k(args...), k.grad(args...); }},
                                    variant{setup, [&] { d.hand_forward(), d.hand_adjoint(); }}});
  double const it = double(state.iterations());
  state.counters["bytes_per_second"] = benchmark::Counter(bytes * it, benchmark::Counter::kIsRate);
  state.counters["one_sweep"] = Kernel::template fuses_value_and_gradient<Args...>() ? 1.0 : 0.0;
  state.counters["ratio_ctgrad_over_hand_gradient"] = t[0] / t[1];
  state.counters["ratio_two_launches_over_hand_gradient"] = t[2] / t[1];
  state.counters["hand_ratio_two_passes_over_one"] = t[3] / t[1];
}

void BM_map_gradient(benchmark::State& state) {
  bench::use_threads(state);
  map_data d;
  gradient_benchmark(state, d, map_kernel, +[](map_data& m) { return m.y.to_vector(); }, 20.0 * map_n,
                     "map value and gradient", d.x, d.y);
}

void BM_recurrence_gradient(benchmark::State& state) {
  bench::use_threads(state);
  rec_data d;
  int iters = rec_iters;
  float a = d.a, b = d.b;
  gradient_benchmark(state, d, rec_kernel, +[](rec_data& r) { return r.out.to_vector(); }, 20.0 * rec_n,
                     "recurrence value and gradient", d.x, d.out, iters, a, b);
}

// The recurrence's value and gradient with subnormals flushed to zero
// (ctg::set_flush_subnormals), paired with the hand-written one-pass gradient
// in the same mode and with both in IEEE mode. Its adjoint decays through
// subnormals on its way to zero (5 % of the steps are subnormal), and each
// operation on one takes a microcode assist on x86.
void BM_recurrence_gradient_flushed(benchmark::State& state) {
  bench::use_threads(state);
  rec_data d;
  int iters = rec_iters;
  float a = d.a, b = d.b;
  auto setup = [&] {
    d.reseed();
    d.x.zero_grad();
  };
  auto ours = [&] { rec_kernel.value_and_grad(d.x, d.out, iters, a, b); };
  setup();
  ours();
  auto const want_value = d.out.to_vector();
  auto const want_grad = d.x.grad().to_vector();
  bench::flush_subnormals_everywhere(true);
  setup();
  ours();
  bench::compare(d.out.to_vector(), want_value, 1e-6, "recurrence value, flushed");
  bench::compare(d.x.grad().to_vector(), want_grad, 1e-5, "recurrence gradient, flushed");
  auto t = bench::paired_flushed_and_ieee(state, setup, ours, [&] { d.hand_value_and_gradient(); });
  state.counters["bytes_per_second"] =
      benchmark::Counter(20.0 * rec_n * double(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["ratio_ctgrad_over_hand_gradient"] = t[0] / t[1];
  state.counters["hand_ratio_flushed_over_ieee"] = t[1] / t[3];
  state.counters["ratio_ctgrad_flushed_over_hand_ieee"] = t[0] / t[3];
}

void BM_reduction_gradient(benchmark::State& state) {
  bench::use_threads(state);
  red_data d;
  *d.gl = 1.5f;
  gradient_benchmark(state, d, red_kernel, +[](red_data& r) { return std::vector<float>{*r.ls}; }, 12.0 * red_n,
                     "reduction value and gradient", d.x, d.loss);
}

void common(benchmark::internal::Benchmark* b) {
  b->Apply(bench::thread_counts)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
}

}  // namespace

BENCHMARK(BM_map_forward)->Apply(common);
BENCHMARK(BM_map_adjoint)->Apply(common);
BENCHMARK(BM_wave_forward)->Apply(common);
BENCHMARK(BM_wave_forward_flushed)->Apply(common);
BENCHMARK(BM_wave_adjoint)->Apply(common);
BENCHMARK(BM_recurrence_forward)->Apply(common);
BENCHMARK(BM_recurrence_adjoint)->Apply(common);
BENCHMARK(BM_reduction_forward)->Apply(common);
BENCHMARK(BM_reduction_adjoint)->Apply(common);
BENCHMARK(BM_map_gradient)->Apply(common);
BENCHMARK(BM_recurrence_gradient)->Apply(common);
BENCHMARK(BM_recurrence_gradient_flushed)->Apply(common);
BENCHMARK(BM_reduction_gradient)->Apply(common);

int main(int argc, char** argv) { return bench::run_main(argc, argv); }
