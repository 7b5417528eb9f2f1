// ctgrad against ADOL-C, an operator-overloading tape library, on the map,
// reduction and recurrence workloads. ADOL-C records every scalar operation
// on a tape and is serial, so both run on one thread, in double precision, at
// smaller sizes than cpu_workloads.cpp (ADOL-C's tape for the full sizes
// would run to gigabytes). Built with ADOL-C only when CMake finds it
// (CTGRAD_BENCH_ADOLC); otherwise the program says so and exits with status
// 77 (skipped).
//
// Per benchmark iteration, alternately: ctgrad forward + adjoint; ADOL-C
// zos_forward + fos_reverse on a tape recorded once (its best case: the
// control flow does not change); ADOL-C recording the tape again and
// fos_reverse (what a simulation with changing control flow pays). Ratios:
// ADOL-C time over ctgrad time.
#include <cstdio>

#include "cpu_support.hpp"

#if defined(CTGRAD_BENCH_ADOLC)
#  include <adolc/adolc.h>

#  include <cmath>
#  include <ctgrad/ctgrad.hpp>
#  include <vector>

namespace {

using bench::variant;
using dfield = ctg::field<double, 1, ctg::grad>;

constexpr int map_n = 1 << 16;
constexpr int red_n = 1 << 16;
constexpr int rec_n = 1 << 12;
constexpr int rec_iters = 64;

auto map_kernel = ctg::kernel<"map">([](auto x, auto y) {
  return ctg::range(x.size(), [=](auto i) { return y[i] = ctg::sin(x[i]) * x[i]; });
});
auto red_kernel = ctg::kernel<"reduction">([](auto x, auto loss) {
  return ctg::range(x.size(), [=](auto i) { return loss() += x[i] * x[i]; });
});
auto rec_kernel = ctg::kernel<"recurrence">([](auto x, auto out, int iters, double a, double b) {
  return ctg::range(x.size(), [=](auto i) {
    return ctg::let(0.0, [=](auto v) {
      return ctg::block(ctg::range(iters, [=](auto) { return v = ctg::sin(v) * a + x[i] * b; }), out[i] = v);
    });
  });
});

// One ADOL-C tape: its number, the inputs and the output weights.
struct adolc_tape {
  short tag;
  int n, m;
  std::vector<double> x, y, u, z;
  adolc_tape(short tag, std::vector<double> const& xs, int m, std::vector<double> const& weights)
      : tag(tag), n(int(xs.size())), m(m), x(xs), y(std::size_t(m)), u(weights), z(xs.size()) {}

  // Records f on the tape with buffers large enough to stay in memory (the
  // defaults would spill the tape into files in the working directory).
  template <class F>
  void record(F&& f, unsigned ops_per_input) {
    unsigned const ops = unsigned(n) * ops_per_input + 1024;
    trace_on(tag, 1, ops, 4 * ops, 4 * ops, 4 * ops);
    std::vector<adouble> ax(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) ax[std::size_t(i)] <<= x[std::size_t(i)];
    std::vector<adouble> ay = f(ax);
    for (int k = 0; k < m; ++k) ay[std::size_t(k)] >>= y[std::size_t(k)];
    trace_off();
  }
  // Replays the recorded tape forward (keeping the values the reverse sweep
  // needs), then the reverse sweep with weights u.
  void replay() {
    zos_forward(tag, m, n, 1, x.data(), y.data());
    fos_reverse(tag, m, n, u.data(), z.data());
  }
  void reverse_only() { fos_reverse(tag, m, n, u.data(), z.data()); }
};

std::vector<double> ramp(int n, double scale) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[std::size_t(i)] = std::sin(scale * i);
  return v;
}
std::vector<double> weights(int n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[std::size_t(i)] = 1.0 + 0.5 * std::cos(0.01 * i);
  return v;
}

void report(benchmark::State& state, std::array<double, 3> const& t) {
  state.counters["ratio_adolc_over_ctgrad"] = t[1] / t[0];
  state.counters["ratio_adolc_retape_over_ctgrad"] = t[2] / t[0];
}

void BM_adolc_map(benchmark::State& state) {
  ctg::set_num_threads(1);
  auto const xs = ramp(map_n, 0.001);
  auto const seed = weights(map_n);
  dfield x(map_n), y(map_n);
  x.copy_from(xs);
  auto ours = [&] {
    map_kernel(x, y);
    y.grad().copy_from(seed);
    map_kernel.grad(x, y);
  };
  x.zero_grad();
  ours();
  adolc_tape tape(1, xs, map_n, seed);
  auto f = [](std::vector<adouble> const& ax) {
    std::vector<adouble> ay(ax.size());
    for (std::size_t i = 0; i < ax.size(); ++i) ay[i] = sin(ax[i]) * ax[i];
    return ay;
  };
  tape.record(f, 4);
  tape.replay();
  bench::compare(x.grad().to_vector(), tape.z, 1e-12, "adolc map");
  auto none = [] {};
  auto t = bench::paired<3>(state, {variant{[&] { x.zero_grad(); }, ours}, variant{none, [&] { tape.replay(); }},
                                    variant{none, [&] {
                                              tape.record(f, 4);
                                              tape.reverse_only();
                                            }}});
  report(state, t);
}

void BM_adolc_reduction(benchmark::State& state) {
  ctg::set_num_threads(1);
  auto const xs = ramp(red_n, 0.37);
  dfield x(red_n);
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  x.copy_from(xs);
  auto ours = [&] {
    loss.at() = 0.0;
    red_kernel(x, loss);
    loss.grad().at() = 1.0;
    red_kernel.grad(x, loss);
  };
  x.zero_grad();
  ours();
  adolc_tape tape(2, xs, 1, std::vector<double>{1.0});
  auto f = [](std::vector<adouble> const& ax) {
    std::vector<adouble> ay(1);
    ay[0] = 0.0;
    for (auto const& v : ax) ay[0] += v * v;
    return ay;
  };
  tape.record(f, 3);
  tape.replay();
  bench::compare(x.grad().to_vector(), tape.z, 1e-12, "adolc reduction");
  auto none = [] {};
  auto t = bench::paired<3>(state, {variant{[&] { x.zero_grad(); }, ours}, variant{none, [&] { tape.replay(); }},
                                    variant{none, [&] {
                                              tape.record(f, 3);
                                              tape.reverse_only();
                                            }}});
  report(state, t);
}

void BM_adolc_recurrence(benchmark::State& state) {
  ctg::set_num_threads(1);
  double const a = 0.9, b = 0.7;
  auto const xs = ramp(rec_n, 0.37);
  auto const seed = weights(rec_n);
  dfield x(rec_n), out(rec_n);
  x.copy_from(xs);
  auto ours = [&] {
    rec_kernel(x, out, rec_iters, a, b);
    out.grad().copy_from(seed);
    rec_kernel.grad(x, out, rec_iters, a, b);
  };
  x.zero_grad();
  ours();
  adolc_tape tape(3, xs, rec_n, seed);
  auto f = [&](std::vector<adouble> const& ax) {
    std::vector<adouble> ay(ax.size());
    for (std::size_t i = 0; i < ax.size(); ++i) {
      adouble v = 0.0;
      for (int j = 0; j < rec_iters; ++j) v = sin(v) * a + ax[i] * b;
      ay[i] = v;
    }
    return ay;
  };
  tape.record(f, 4 * rec_iters);
  tape.replay();
  bench::compare(x.grad().to_vector(), tape.z, 1e-10, "adolc recurrence");
  auto none = [] {};
  auto t = bench::paired<3>(state, {variant{[&] { x.zero_grad(); }, ours}, variant{none, [&] { tape.replay(); }},
                                    variant{none, [&] {
                                              tape.record(f, 4 * rec_iters);
                                              tape.reverse_only();
                                            }}});
  report(state, t);
}

void common(benchmark::internal::Benchmark* b) {
  b->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.3);
}

}  // namespace

BENCHMARK(BM_adolc_map)->Apply(common);
BENCHMARK(BM_adolc_reduction)->Apply(common);
BENCHMARK(BM_adolc_recurrence)->Apply(common);

#  ifndef CTGRAD_BENCH_ADOLC_VERSION
#    define CTGRAD_BENCH_ADOLC_VERSION "unknown"
#  endif

int main(int argc, char** argv) {
  benchmark::AddCustomContext("adolc", CTGRAD_BENCH_ADOLC_VERSION);
  return bench::run_main(argc, argv);
}

#else

int main() {
  std::printf("skipped: built without ADOL-C (install libadolc-dev and reconfigure)\n");
  return 77;
}

#endif
