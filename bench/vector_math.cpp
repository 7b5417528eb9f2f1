// Vector math (CTG_VECTOR_MATH, ir/vector_math.hpp): the map of
// cpu_workloads.cpp with a kernel that calls libmvec's vector functions,
// timed in one process against the same hand-written loops as there
// (std::sin, scalar: the reference of every other CPU benchmark) and against
// those loops calling the vector functions by hand (what a hand-written loop
// gets from libmvec). The carried recurrence does not vectorise, by hand or
// in ctgrad: its dependence runs inside each element (bench/interleave.cpp
// times what does help it). Each benchmark checks ctgrad against
// the hand-written scalar code first (within the vector functions' 4 ulp,
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

void common(benchmark::internal::Benchmark* b) {
  b->Apply(bench::thread_counts)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
}

}  // namespace

BENCHMARK(BM_map_forward)->Apply(common);
BENCHMARK(BM_map_adjoint)->Apply(common);

int main(int argc, char** argv) { return bench::run_main(argc, argv); }
