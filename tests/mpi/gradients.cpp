// The gradient of a decomposed simulation is the gradient of one process.
//
// Rank 0 runs each simulation alone on plain fields, under a ctg::tape; then
// every rank runs the same kernels (the same kernel objects) on fields
// decomposed over all ranks, with halo exchanges and a global sum, under a
// tape of its own. The loss and the gathered gradients must agree with rank
// 0's to 1e-12 relative, on 1, 2, 3 and 4 ranks (CTest runs each). The bytes
// each exchange moved must be the ghost layers this rank fills.
//
//   1-D wave: three buffers rotated, edges held at zero; gradient with respect
//             to the initial field (the scheme is linear: the tape copies
//             nothing).
//   2-D heat: heat_problem.hpp (gradient with respect to the conductivity
//             and the initial field, the tape keeping u(t) across the
//             exchanges that overwrite it).
#include <ctgrad/ctgrad.hpp>
#include <ctgrad/mpi/mpi.hpp>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "check_support.hpp"
#include "heat_problem.hpp"

using namespace ctg::literals;
using namespace mpi_test;

namespace {

// ---- 1-D wave -------------------------------------------------------------------------------------
constexpr double courant2 = 0.25;
auto const wave_start = ctg::kernel<"wave_start">([](auto prev, auto now, auto initial) {
  return ctg::each(initial, [=](auto i) { return ctg::block(prev(i) = initial(i), now(i) = initial(i)); });
});
auto const wave_step = ctg::kernel<"wave_step">([](auto prev, auto now, auto next) {
  auto const n = now.shape(0_c);
  return ctg::range(n, [=](auto i) {
    return ctg::if_(i > 0 && i < n - 1,
                    next(i) = 2 * now(i) - prev(i) + courant2 * (now(i + 1) + now(i - 1) - 2 * now(i)),
                    next(i) = 0.0);
  });
});
auto const wave_loss = ctg::kernel<"wave_loss">([](auto p, auto target, auto loss) {
  return ctg::each(p, [=](auto i) { return loss() += ctg::pow(p(i) - target(i), 2.0); });
});

constexpr int wave_n = 61, wave_steps = 70;
std::vector<double> wave_initial() {
  std::vector<double> v(wave_n);
  for (int i = 0; i < wave_n; ++i) v[std::size_t(i)] = std::exp(-0.02 * (i - 20) * (i - 20)) * std::sin(0.3 * i);
  return v;
}
std::vector<double> wave_target() {
  std::vector<double> v(wave_n);
  for (int i = 0; i < wave_n; ++i) v[std::size_t(i)] = 0.3 * std::cos(0.15 * i);
  return v;
}

// Returns (loss, gradient) on rank 0.
template <class Make, class Exchange, class Sum>
std::pair<double, std::vector<double>> wave(Make make, Exchange exchange, Sum sum, bool decomposed) {
  auto prev = make("p_a", true), now = make("p_b", true), next = make("p_c", true);
  auto initial = make("initial", true), target = make("target", false);
  ctg::field<double, 0, ctg::grad> loss(ctg::field_options{.name = "loss"});
  if constexpr (requires { ctg::mpi::copy_from_global(initial, wave_initial()); }) {
    ctg::mpi::copy_from_global(initial, wave_initial());
    ctg::mpi::copy_from_global(target, wave_target());
  } else {
    initial.copy_from(wave_initial());
    target.copy_from(wave_target());
  }
  ctg::tape tape(loss);
  wave_start(prev, now, initial);
  for (int t = 2; t <= wave_steps; ++t) {
    exchange(now);
    wave_step(prev, now, next);
    std::swap(prev, now);
    std::swap(now, next);
  }
  loss.at() = 0;
  wave_loss(now, target, loss);
  sum(loss);
  tape.backward();
  (void)decomposed;
  if constexpr (requires { ctg::mpi::gather_grad(initial); })
    return {loss.at(), ctg::mpi::gather_grad(initial)};
  else
    return {loss.at(), initial.grad().to_vector()};
}

}  // namespace

int main(int argc, char** argv) {
  return run_on_world(argc, argv, [](ctg::mpi::grid const& world) {

    // 1-D wave.
    std::pair<double, std::vector<double>> ref;
    if (rank_ == 0)
      ref = wave([](char const* name, bool) { return ctg::field<double, 1, ctg::grad>({wave_n}, {.name = name}); },
                 [](auto const&) {}, [](auto const&) {}, false);
    auto const got = wave(
        [&](char const* name, bool ghosts) {
          return ctg::mpi::dfield<double, 1, ctg::grad>(world, {wave_n}, ghosts ? 1 : 0, {.name = name});
        },
        [](auto const& u) { ctg::mpi::exchange(u); }, [&](auto const& l) { ctg::mpi::sum(world, l); }, true);
    if (rank_ == 0) {
      double const dl = std::abs(got.first - ref.first) / std::abs(ref.first);
      double const dg = relative(got.second, ref.second);
      std::printf("wave 1-D: %d ranks, loss %.15g (one process %.15g), relative difference %.2e, gradient %.2e\n",
                  world.size(), got.first, ref.first, dl, dg);
      expect(dl <= 1e-12, "wave: loss", dl, 1e-12);
      expect(dg <= 1e-12, "wave: gradient", dg, 1e-12);
      double norm = 0;
      for (double g : ref.second) norm += g * g;
      expect(norm > 1e-6, "wave: the gradient is not zero", norm);
    }
    // Every rank holds the global loss after the sum.
    expect(std::abs(got.first - ref.first) <= 1e-12 * std::abs(ref.first) || rank_ != 0, "wave: loss on rank 0");

    // 2-D heat.
    heat_result href;
    if (rank_ == 0) href = heat_plain();
    expect_same_heat(world, heat_decomposed(world), href, "host blocks");
  });
}
