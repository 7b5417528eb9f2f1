// Kernels on strided views of an array of structs against the same kernels
// on owning fields, paired in one run (docs/05-performance.md, "Views"):
// the AoS layout (x, v, mass side by side, 28 bytes per particle) against
// three packed fields of the same values. Target: strided/owning <= 1.10,
// forward and gradient.
#include <benchmark/benchmark.h>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/view.hpp>
#include <vector>

namespace {

struct particle {
  Eigen::Vector3f x;
  Eigen::Vector3f v;
  float mass;
};
constexpr int n = 1 << 20;

auto step = ctg::kernel<"step">([](auto x, auto v, auto mass, float dt) {
  return ctg::range(x.size(), [=](auto i) {
    return ctg::block(v[i] = v[i] + dt * ctg::vec(0.0f, -9.8f, 0.0f) / mass[i], x[i] = x[i] + dt * v[i]);
  });
});

template <class X, class V, class M>
void run(benchmark::State& state, X const& x, V const& v, M const& m, bool gradient) {
  for (auto _ : state) {
    if (gradient)
      step.grad(x, v, m, 1e-3f);
    else
      step(x, v, m, 1e-3f);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void owning(benchmark::State& state) {
  ctg::field<Eigen::Vector3f, 1, ctg::grad> x({n}, {.name = "x"}), v({n}, {.name = "v"});
  ctg::field<float, 1, ctg::grad> m({n}, {.name = "m"});
  m.fill(1.0f);
  run(state, x, v, m, state.range(0) != 0);
}
void strided(benchmark::State& state) {
  std::vector<particle> p(n, particle{Eigen::Vector3f::Zero(), Eigen::Vector3f::Zero(), 1.0f});
  auto x = ctg::view_member<ctg::grad>(p, &particle::x, {.name = "x"});
  auto v = ctg::view_member<ctg::grad>(p, &particle::v, {.name = "v"});
  auto m = ctg::view_member<ctg::grad>(p, &particle::mass, {.name = "m"});
  run(state, x, v, m, state.range(0) != 0);
}

}  // namespace

// Interleaved, so that both sides see the same machine state.
BENCHMARK(owning)->ArgName("grad")->Arg(0)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(strided)->ArgName("grad")->Arg(0)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(owning)->ArgName("grad")->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(strided)->ArgName("grad")->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
