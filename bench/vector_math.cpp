// Vector math (CTG_VECTOR_MATH, ir/vector_math.hpp): the map of
// cpu_workloads.cpp with a kernel that calls libmvec's vector functions,
// timed in one process against the same hand-written loops as there
// (std::sin, scalar: the reference of every other CPU benchmark) and against
// those loops calling the vector functions by hand (what a hand-written loop
// gets from libmvec). The carried recurrence's dependence runs inside each
// element, so it vectorises only across elements stepped together
// (bench/interleave.cpp): by hand, 8 elements in step with their sin and cos
// in one loop over the 8; in ctgrad, the iterations interleaved lane by
// lane (eval/interleave.hpp). Each benchmark checks ctgrad against the
// hand-written scalar code first (within the vector functions' 4 ulp,
// carried through the computation), then times the variants alternately.
#define CTG_VECTOR_MATH 1
#include <vector>

#include "cpu_support.hpp"
#include "workloads_basic.hpp"

namespace {

using namespace bench::basic;
using bench::variant;

// Where the setting does nothing (not GCC on x86-64 with glibc), the
// benchmarks say so instead of timing the scalar functions twice.
bool skipped(benchmark::State& state) {
  if constexpr (!ctg::vector_math_enabled) state.SkipWithError("CTG_VECTOR_MATH has no effect with this compiler");
  return !ctg::vector_math_enabled;
}

// The hand-written loops of workloads_basic.hpp with the vector functions.
void hand_vector_map_forward(map_data& d) {
  bench::parallel_for(map_n, [&](bench::int64 b, bench::int64 e) {
    for (bench::int64 i = b; i < e; ++i) d.ys[i] = ctg::vector_math::sin(d.xs[i]) * d.xs[i];
  });
}
void hand_vector_map_adjoint(map_data& d) {
  bench::parallel_for(map_n, [&](bench::int64 b, bench::int64 e) {
    for (bench::int64 i = b; i < e; ++i) {
      float const g = d.gy[i];
      d.gy[i] = 0.0f;
      float const v = d.xs[i];
      d.gx[i] += g * (ctg::vector_math::cos(v) * v + ctg::vector_math::sin(v));
    }
  });
}
// The recurrence by hand, 8 elements in step, the loops over the 8 calling
// the vector functions (the remainder one by one). Forward; adjoint (each
// element's history, then the sweep); or both in one pass.
constexpr int lanes = 8;
template <bool Forward, bool Adjoint>
void hand_vector_recurrence(rec_data& d) {
  bench::parallel_for(rec_n, [&](bench::int64 lo, bench::int64 hi) {
    std::vector<float> history(std::size_t(lanes * rec_iters));
    auto one = [&](bench::int64 i, int width) {
      float v[lanes] = {}, xb[lanes] = {}, g[lanes], dx[lanes] = {};
      for (int k = 0; k < width; ++k) xb[k] = d.xs[i + k] * d.b;
      for (int j = 0; j < rec_iters; ++j) {
        float* h = &history[std::size_t(j * lanes)];
        CTG_LANE_LOOP(int k = 0; k < lanes; ++k) {
          h[k] = v[k];
          v[k] = ctg::vector_math::sin(v[k]) * d.a + xb[k];
        }
      }
      if constexpr (Forward)
        for (int k = 0; k < width; ++k) d.os[i + k] = v[k];
      if constexpr (Adjoint) {
        for (int k = 0; k < width; ++k) g[k] = d.go[i + k], d.go[i + k] = 0.0f;
        for (int k = width; k < lanes; ++k) g[k] = 0.0f;
        for (int j = rec_iters - 1; j >= 0; --j) {
          float const* h = &history[std::size_t(j * lanes)];
          CTG_LANE_LOOP(int k = 0; k < lanes; ++k) {
            dx[k] += g[k] * d.b;
            g[k] = g[k] * d.a * ctg::vector_math::cos(h[k]);
          }
        }
        for (int k = 0; k < width; ++k) d.gx[i + k] += dx[k];
      }
    };
    bench::int64 const grouped = lo + (hi - lo) / lanes * lanes;
    for (bench::int64 i = lo; i < grouped; i += lanes) one(i, lanes);
    if (grouped < hi) one(grouped, int(hi - grouped));  // the lanes past the end compute on zeros, unread
  });
}

// Variants: ctgrad (vector math), hand-written scalar, hand-written vector.
void report(benchmark::State& state, std::array<double, 3> const& t) {
  state.counters["ratio_ctgrad_over_hand_scalar"] = t[0] / t[1];
  state.counters["ratio_ctgrad_over_hand_vector"] = t[0] / t[2];
  state.counters["ratio_hand_vector_over_hand_scalar"] = t[2] / t[1];
}

void BM_map_forward(benchmark::State& state) {
  if (skipped(state)) return;
  bench::use_threads(state);
  map_data d;
  map_kernel(d.x, d.y);
  auto ours = d.y.to_vector();
  d.hand_forward();
  bench::compare(ours, d.y.to_vector(), 1e-6, "map forward");
  hand_vector_map_forward(d);
  bench::compare(ours, d.y.to_vector(), 1e-6, "map forward, hand vector");
  auto none = [] {};
  report(state, bench::paired<3>(state, {variant{none, [&] { map_kernel(d.x, d.y); }},
                                         variant{none, [&] { d.hand_forward(); }},
                                         variant{none, [&] { hand_vector_map_forward(d); }}}));
}

void BM_map_adjoint(benchmark::State& state) {
  if (skipped(state)) return;
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
  report(state, bench::paired<3>(state, {variant{reseed, [&] { map_kernel.grad(d.x, d.y); }},
                                         variant{reseed, [&] { d.hand_adjoint(); }},
                                         variant{reseed, [&] { hand_vector_map_adjoint(d); }}}));
}

void BM_recurrence_forward(benchmark::State& state) {
  if (skipped(state)) return;
  bench::use_threads(state);
  rec_data d;
  d.ours_forward();
  auto ours = d.out.to_vector();
  d.hand_forward();
  bench::compare(ours, d.out.to_vector(), 1e-5, "recurrence forward");
  hand_vector_recurrence<true, false>(d);
  bench::compare(ours, d.out.to_vector(), 1e-5, "recurrence forward, hand vector");
  auto none = [] {};
  report(state,
         bench::paired<3>(state, {variant{none, [&] { d.ours_forward(); }}, variant{none, [&] { d.hand_forward(); }},
                                  variant{none, [&] { hand_vector_recurrence<true, false>(d); }}}));
}

void BM_recurrence_adjoint(benchmark::State& state) {
  if (skipped(state)) return;
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
  d.x.zero_grad();
  d.reseed();
  hand_vector_recurrence<false, true>(d);
  bench::compare(ours, d.x.grad().to_vector(), 1e-4, "recurrence adjoint, hand vector");
  auto reseed = [&] { d.reseed(); };
  report(state, bench::paired<3>(
                    state, {variant{reseed, [&] { d.ours_adjoint(); }}, variant{reseed, [&] { d.hand_adjoint(); }},
                            variant{reseed, [&] { hand_vector_recurrence<false, true>(d); }}}));
}

// The value and the gradient in one sweep (k.value_and_grad; by hand, one loop).
void BM_recurrence_value_and_gradient(benchmark::State& state) {
  if (skipped(state)) return;
  bench::use_threads(state);
  rec_data d;
  d.reseed();
  rec_kernel.value_and_grad(d.x, d.out, rec_iters, d.a, d.b);
  auto ours = d.x.grad().to_vector();
  d.x.zero_grad();
  d.reseed();
  d.hand_value_and_gradient();
  bench::compare(ours, d.x.grad().to_vector(), 1e-4, "recurrence value and gradient");
  d.x.zero_grad();
  d.reseed();
  hand_vector_recurrence<true, true>(d);
  bench::compare(ours, d.x.grad().to_vector(), 1e-4, "recurrence value and gradient, hand vector");
  auto reseed = [&] { d.reseed(); };
  report(state,
         bench::paired<3>(state, {variant{reseed, [&] { rec_kernel.value_and_grad(d.x, d.out, rec_iters, d.a, d.b); }},
                                  variant{reseed, [&] { d.hand_value_and_gradient(); }},
                                  variant{reseed, [&] { hand_vector_recurrence<true, true>(d); }}}));
}

void common(benchmark::internal::Benchmark* b) {
  b->Apply(bench::thread_counts)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
}

}  // namespace

BENCHMARK(BM_map_forward)->Apply(common);
BENCHMARK(BM_map_adjoint)->Apply(common);
BENCHMARK(BM_recurrence_forward)->Apply(common);
BENCHMARK(BM_recurrence_adjoint)->Apply(common);
BENCHMARK(BM_recurrence_value_and_gradient)->Apply(common);

int main(int argc, char** argv) { return bench::run_main(argc, argv); }
