// Interleaved iterations (eval/interleave.hpp, ad/interleave.hpp): the
// carried recurrence of cpu_workloads.cpp (v = sin(v) a + x b, 64 times per
// element), whose forward and adjoint step 8 elements together, timed in
// one process against the hand-written loops of workloads_basic.hpp (one
// element after another: the reference of every CPU benchmark) and against
// the same loops interleaved by hand, 8 elements in step. Each benchmark
// checks ctgrad against the hand-written code first, then times the
// variants alternately.
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cpu_support.hpp"
#include "workloads_basic.hpp"

namespace {

using namespace bench::basic;
using bench::variant;

constexpr int lanes = 8;

// The recurrence by hand, `lanes` elements in step (the remainder one by one).
void hand_interleaved_forward(rec_data& d) {
  bench::parallel_for(rec_n, [&](bench::int64 lo, bench::int64 hi) {
    bench::int64 const grouped = lo + (hi - lo) / lanes * lanes;
    for (bench::int64 i = lo; i < grouped; i += lanes) {
      std::array<float, lanes> v{};
      for (int j = 0; j < rec_iters; ++j)
        for (int k = 0; k < lanes; ++k) v[std::size_t(k)] = std::sin(v[std::size_t(k)]) * d.a + d.xs[i + k] * d.b;
      for (int k = 0; k < lanes; ++k) d.os[i + k] = v[std::size_t(k)];
    }
    for (bench::int64 i = grouped; i < hi; ++i) {
      float v = 0.0f;
      for (int j = 0; j < rec_iters; ++j) v = std::sin(v) * d.a + d.xs[i] * d.b;
      d.os[i] = v;
    }
  });
}
// The adjoint by hand, `lanes` elements in step: each lane's history, then
// the sweep (dx += g b, g <- g a cos(v_j)) of every lane per step.
void hand_interleaved_adjoint(rec_data& d) {
  bench::parallel_for(rec_n, [&](bench::int64 lo, bench::int64 hi) {
    std::vector<float> history(std::size_t(lanes * rec_iters));
    bench::int64 const grouped = lo + (hi - lo) / lanes * lanes;
    for (bench::int64 i = lo; i < grouped; i += lanes) {
      std::array<float, lanes> v{}, g{}, dx{};
      for (int j = 0; j < rec_iters; ++j)
        for (int k = 0; k < lanes; ++k) {
          history[std::size_t(j * lanes + k)] = v[std::size_t(k)];
          v[std::size_t(k)] = std::sin(v[std::size_t(k)]) * d.a + d.xs[i + k] * d.b;
        }
      for (int k = 0; k < lanes; ++k) {
        g[std::size_t(k)] = d.go[i + k];
        d.go[i + k] = 0.0f;
      }
      for (int j = rec_iters - 1; j >= 0; --j)
        for (int k = 0; k < lanes; ++k) {
          dx[std::size_t(k)] += g[std::size_t(k)] * d.b;
          g[std::size_t(k)] = g[std::size_t(k)] * d.a * std::cos(history[std::size_t(j * lanes + k)]);
        }
      for (int k = 0; k < lanes; ++k) d.gx[i + k] += dx[std::size_t(k)];
    }
    for (bench::int64 i = grouped; i < hi; ++i) {
      float v = 0.0f;
      for (int j = 0; j < rec_iters; ++j) history[std::size_t(j)] = v, v = std::sin(v) * d.a + d.xs[i] * d.b;
      float g = d.go[i], dx = 0.0f;
      d.go[i] = 0.0f;
      for (int j = rec_iters - 1; j >= 0; --j) dx += g * d.b, g = g * d.a * std::cos(history[std::size_t(j)]);
      d.gx[i] += dx;
    }
  });
}

// Variants: ctgrad, hand-written one element at a time, hand-written interleaved.
void report(benchmark::State& state, std::array<double, 3> const& t) {
  state.counters["ratio_ctgrad_over_hand"] = t[0] / t[1];
  state.counters["ratio_ctgrad_over_hand_interleaved"] = t[0] / t[2];
  state.counters["ratio_hand_interleaved_over_hand"] = t[2] / t[1];
}

void BM_recurrence_forward(benchmark::State& state) {
  bench::use_threads(state);
  rec_data d;
  d.ours_forward();
  auto ours = d.out.to_vector();
  d.hand_forward();
  bench::compare(ours, d.out.to_vector(), 1e-6, "recurrence forward");
  hand_interleaved_forward(d);
  bench::compare(ours, d.out.to_vector(), 1e-6, "recurrence forward, interleaved by hand");
  auto none = [] {};
  report(state, bench::paired<3>(state, {variant{none, [&] { d.ours_forward(); }},
                                         variant{none, [&] { d.hand_forward(); }},
                                         variant{none, [&] { hand_interleaved_forward(d); }}}));
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
  bench::compare(ours, d.x.grad().to_vector(), 1e-5, "recurrence adjoint");
  d.x.zero_grad();
  d.reseed();
  hand_interleaved_adjoint(d);
  bench::compare(ours, d.x.grad().to_vector(), 1e-5, "recurrence adjoint, interleaved by hand");
  auto reseed = [&] { d.reseed(); };
  report(state, bench::paired<3>(state, {variant{reseed, [&] { d.ours_adjoint(); }},
                                         variant{reseed, [&] { d.hand_adjoint(); }},
                                         variant{reseed, [&] { hand_interleaved_adjoint(d); }}}));
}

// The adjoints of BM_recurrence_adjoint with subnormals flushed to zero and
// in IEEE mode (cpu_support.hpp, flush_subnormals_everywhere), and how many
// of the sweep's steps hold a subnormal adjoint or one already zero, in
// float as the hand-written sweep computes it: the adjoint is multiplied by
// a cos(v) < 1 at each step and decays through the subnormal range.
void BM_recurrence_adjoint_flushed(benchmark::State& state) {
  bench::use_threads(state);
  rec_data d;
  std::int64_t subnormal = 0, zero = 0;
  std::vector<float> history(rec_iters);
  for (int i = 0; i < rec_n; ++i) {
    float v = 0.0f;
    for (int j = 0; j < rec_iters; ++j) history[std::size_t(j)] = v, v = std::sin(v) * d.a + d.xs[i] * d.b;
    float g = 1.0f;
    for (int j = rec_iters - 1; j >= 0; --j) {
      g = g * d.a * std::cos(history[std::size_t(j)]);
      subnormal += std::fpclassify(g) == FP_SUBNORMAL;
      zero += g == 0.0f;
    }
  }
  d.ours_forward();
  bench::flush_subnormals_everywhere(true);
  d.reseed();
  d.ours_adjoint();
  auto flushed = d.x.grad().to_vector();
  d.x.zero_grad();
  bench::flush_subnormals_everywhere(false);
  d.reseed();
  d.ours_adjoint();
  bench::compare(flushed, d.x.grad().to_vector(), 1e-5, "recurrence adjoint, flushed");
  auto t = bench::paired_flushed_and_ieee(
      state, [&] { d.reseed(); }, [&] { d.ours_adjoint(); }, [&] { hand_interleaved_adjoint(d); });
  double const steps = double(rec_n) * rec_iters;
  state.counters["subnormal_adjoint_steps"] = double(subnormal) / steps;
  state.counters["zero_adjoint_steps"] = double(zero) / steps;
  state.counters["hand_interleaved_ratio_flushed_over_ieee"] = t[1] / t[3];
  state.counters["ratio_ctgrad_over_hand_interleaved_flushed"] = t[0] / t[1];
}

void common(benchmark::internal::Benchmark* b) {
  b->Apply(bench::thread_counts)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
}

}  // namespace

BENCHMARK(BM_recurrence_forward)->Apply(common);
BENCHMARK(BM_recurrence_adjoint)->Apply(common);
BENCHMARK(BM_recurrence_adjoint_flushed)->Apply(common);

int main(int argc, char** argv) { return bench::run_main(argc, argv); }
