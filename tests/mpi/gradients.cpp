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
//   2-D heat: u(t+1) = u(t) + dt kappa lap u(t), two buffers updated in turn;
//             gradient with respect to the conductivity kappa and the
//             initial field (the adjoint reads both: the tape keeps u(t),
//             ghost rows included, across the exchanges that overwrite it).
#include <ctgrad/ctgrad.hpp>
#include <ctgrad/mpi/mpi.hpp>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "check_support.hpp"

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

// ---- 2-D heat -------------------------------------------------------------------------------------
constexpr double dt = 0.2;
auto const heat_start = ctg::kernel<"heat_start">([](auto u, auto u0) {
  return ctg::each(u0, [=](auto i, auto j) { return u(i, j) = u0(i, j); });
});
// Edges held at their initial values (Dirichlet).
auto const heat_step = ctg::kernel<"heat_step">([](auto now, auto next, auto kappa) {
  auto const n = now.shape(0_c), m = now.shape(1_c);
  return ctg::ndrange(n, m, [=](auto i, auto j) {
    auto const lap = now(i + 1, j) + now(i - 1, j) + now(i, j + 1) + now(i, j - 1) - 4 * now(i, j);
    return ctg::if_(i > 0 && i < n - 1 && j > 0 && j < m - 1, next(i, j) = now(i, j) + dt * kappa(i, j) * lap,
                    next(i, j) = now(i, j));
  });
});
auto const heat_loss = ctg::kernel<"heat_loss">([](auto u, auto target, auto loss) {
  return ctg::each(u, [=](auto i, auto j) { return loss() += ctg::pow(u(i, j) - target(i, j), 2.0); });
});

constexpr int heat_n = 23, heat_m = 17, heat_steps = 30, heat_ghost = 2;
std::vector<double> heat_values(double a, double b) {
  std::vector<double> v(std::size_t(heat_n * heat_m));
  for (int i = 0; i < heat_n; ++i)
    for (int j = 0; j < heat_m; ++j) v[std::size_t(i * heat_m + j)] = 0.5 + 0.4 * std::sin(a * i + b * j + 0.1 * i * j);
  return v;
}

struct heat_result {
  double loss;
  std::vector<double> grad_kappa, grad_u0;
};

ctg::mpi::grid* world_ = nullptr;

heat_result heat_plain() {
  using F = ctg::field<double, 2, ctg::grad>;
  F now({heat_n, heat_m}, {.name = "u_a"}), next({heat_n, heat_m}, {.name = "u_b"});
  F kappa({heat_n, heat_m}, {.name = "kappa"}), u0({heat_n, heat_m}, {.name = "u0"});
  ctg::field<double, 2> target({heat_n, heat_m}, {.name = "target"});
  ctg::field<double, 0, ctg::grad> loss(ctg::field_options{.name = "loss"});
  kappa.copy_from(heat_values(0.31, 0.17));
  for (double& k : kappa.flat()) k *= 0.5;
  u0.copy_from(heat_values(0.7, -0.4));
  target.copy_from(heat_values(0.2, 0.5));
  ctg::tape tape(loss);
  heat_start(now, u0);
  for (int t = 0; t < heat_steps; ++t) {
    heat_step(now, next, kappa);
    std::swap(now, next);
  }
  loss.at() = 0;
  heat_loss(now, target, loss);
  tape.backward();
  return {loss.at(), kappa.grad().to_vector(), u0.grad().to_vector()};
}

heat_result heat_decomposed(ctg::mpi::grid const& world) {
  using D = ctg::mpi::dfield<double, 2, ctg::grad>;
  D now(world, {heat_n, heat_m}, heat_ghost, {.name = "u_a"}), next(world, {heat_n, heat_m}, heat_ghost, {.name = "u_b"});
  D kappa(world, {heat_n, heat_m}, 0, {.name = "kappa"}), u0(world, {heat_n, heat_m}, 0, {.name = "u0"});
  // The target stays a plain field, whole on every rank: kernels index it globally.
  ctg::field<double, 2> target({heat_n, heat_m}, {.name = "target"});
  ctg::field<double, 0, ctg::grad> loss(ctg::field_options{.name = "loss"});
  std::vector<double> k = heat_values(0.31, 0.17);
  for (double& x : k) x *= 0.5;
  ctg::mpi::copy_from_global(kappa, k);
  ctg::mpi::copy_from_global(u0, heat_values(0.7, -0.4));
  target.copy_from(heat_values(0.2, 0.5));
  D const a = now, b = next;  // the two buffers, whatever the swaps do
  a.reset_stats();
  b.reset_stats();
  ctg::tape tape(loss);
  heat_start(now, u0);
  for (int t = 0; t < heat_steps; ++t) {
    ctg::mpi::exchange(now);
    heat_step(now, next, kappa);
    std::swap(now, next);
  }
  loss.at() = 0;
  heat_loss(now, target, loss);
  ctg::mpi::sum(world, loss);
  tape.backward();

  // Bytes: every exchange fills the ghost layers with neighbours, 2 rows deep.
  int const r = world.rank(), p = world.size();
  long long const layers = (r > 0 ? 1 : 0) + (r + 1 < p ? 1 : 0);
  long long const ghost_bytes = layers * heat_ghost * heat_m * (long long)sizeof(double);
  long long const moved = a.stats().bytes_received + b.stats().bytes_received;
  long long const sent = a.stats().bytes_sent + b.stats().bytes_sent;
  long long const back = a.stats().adjoint_bytes_received + b.stats().adjoint_bytes_received;
  expect(a.stats().exchanges + b.stats().exchanges == heat_steps, "heat: one exchange per step");
  expect(moved == heat_steps * ghost_bytes, "heat: bytes received = steps x ghost layers", double(moved),
         double(heat_steps * ghost_bytes));
  expect(sent == moved && back == moved, "heat: bytes sent and sent back = bytes received", double(sent), double(back));
  long long total = 0;
  MPI_Allreduce(&moved, &total, 1, MPI_LONG_LONG, MPI_SUM, world.comm());
  if (r == 0)
    std::printf("heat: %d ranks, %lld bytes received per step on rank 0, %lld on all ranks (2 x %d boundaries x %d "
                "rows x %d x 8)\n",
                p, moved / heat_steps, total / heat_steps, p - 1, heat_ghost, heat_m);
  expect(total == heat_steps * 2LL * (p - 1) * heat_ghost * heat_m * 8, "heat: bytes on all ranks", double(total));
  return {loss.at(), ctg::mpi::gather_grad(kappa), ctg::mpi::gather_grad(u0)};
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  {
    ctg::mpi::grid world;
    world_ = &world;
    rank_ = world.rank();

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
    heat_result const h = heat_decomposed(world);
    double total = h.loss;
    MPI_Bcast(&total, 1, MPI_DOUBLE, 0, world.comm());
    expect(h.loss == total, "heat: every rank holds the same loss", h.loss, total);
    if (rank_ == 0) {
      double const dl = std::abs(h.loss - href.loss) / std::abs(href.loss);
      double const dk = relative(h.grad_kappa, href.grad_kappa), du = relative(h.grad_u0, href.grad_u0);
      std::printf("heat 2-D: %d ranks, loss %.15g (one process %.15g), relative difference %.2e, gradient of "
                  "kappa %.2e, of u0 %.2e\n",
                  world.size(), h.loss, href.loss, dl, dk, du);
      expect(dl <= 1e-12, "heat: loss", dl, 1e-12);
      expect(dk <= 1e-12, "heat: gradient of kappa", dk, 1e-12);
      expect(du <= 1e-12, "heat: gradient of u0", du, 1e-12);
    }
    status = passed_on_every_rank(world.comm()) ? 0 : 1;
    if (rank_ == 0) std::printf("%s\n", status == 0 ? "PASS" : "FAILED");
  }
  MPI_Finalize();
  return status;
}
