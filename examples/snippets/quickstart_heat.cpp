// docs/00-quickstart.md: a heat equation written as a simulator writes it,
// with two buffers, and the gradient of its final energy with respect to the
// diffusion coefficient.
#include <ctgrad/ctgrad.hpp>

#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "check.hpp"

namespace {

// The same scheme in plain C++, for the finite-difference check below.
double energy_after(std::vector<double> u, double d, int steps) {
  std::vector<double> next(u.size());
  for (int t = 0; t < steps; ++t) {
    for (std::size_t i = 0; i < u.size(); ++i)
      next[i] = (i > 0 && i + 1 < u.size()) ? u[i] + d * (u[i - 1] - 2 * u[i] + u[i + 1]) : 0.0;
    std::swap(u, next);
  }
  double e = 0;
  for (double x : u) e += x * x;
  return e;
}

}  // namespace

int main() {
  int const cells = 64, steps = 100;
  std::vector<double> hot_spot(cells);
  for (int i = 0; i < cells; ++i) hot_spot[std::size_t(i)] = std::exp(-0.05 * (i - 20) * (i - 20));

  // [snippet: heat]
  // Two buffers: each step reads `now` and writes `next`, then the two
  // handles swap. The ends are held at zero.
  ctg::field<double, 1, ctg::grad> now({cells}, {.name = "now"}), next({cells}, {.name = "next"});
  ctg::field<double, 0, ctg::grad> diffusivity({.name = "D"}), energy({.name = "energy"});
  diffusivity.at() = 0.2;
  auto diffuse = ctg::kernel<"diffuse">([](auto now, auto next, auto d) {
    return ctg::range(now.size(), [=](auto i) {
      return ctg::if_(i > 0 && i < now.size() - 1, next[i] = now[i] + d() * (now[i - 1] - 2.0 * now[i] + now[i + 1]),
                      next[i] = 0.0);
    });
  });
  auto total = ctg::kernel<"total">([](auto u, auto energy) {
    return ctg::range(u.size(), [=](auto i) { return energy() += u[i] * u[i]; });
  });
  auto simulate = [&] {
    now.copy_from(hot_spot);  // every run starts from the same state
    for (int t = 0; t < steps; ++t) {
      diffuse(now, next, diffusivity);
      std::swap(now, next);  // swaps the handles, not the values
    }
    energy.at() = 0.0;
    total(now, energy);
  };

  ctg::tape tape(energy);
  simulate();
  std::size_t const kept = tape.bytes_saved();  // copies of buffers that a later step overwrote
  tape.backward();                              // diffusivity.grad() = d energy / d D
  std::printf("d energy / d D = %.6f; the tape kept %zu bytes\n", diffusivity.grad().at(), kept);
  // [snippet end]

  // The gradient of D reads the values each step read, and the next step
  // overwrites that buffer: the tape copied it then, once per step but the
  // last.
  check(kept == std::size_t(steps - 1) * cells * sizeof(double), "one copy per step");
  double const h = 1e-6;
  double const fd = (energy_after(hot_spot, 0.2 + h, steps) - energy_after(hot_spot, 0.2 - h, steps)) / (2 * h);
  check(close(diffusivity.grad().at(), fd, 1e-7), "d energy / d D against central differences");
  check(close(std::as_const(energy).at(), energy_after(hot_spot, 0.2, steps), 1e-13), "the energy");
  auto const report = ctg::check_gradient(simulate, energy, diffusivity);
  std::printf("check_gradient: worst relative error %.1e over %d coefficients\n", report.worst_relative_error,
              report.checked);
  check(report.worst_relative_error < 1e-6, "check_gradient");
  return 0;
}
