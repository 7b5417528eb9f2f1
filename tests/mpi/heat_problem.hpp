// The 2-D heat inverse problem of the MPI tests, on one process and
// decomposed over the ranks (host or device blocks).
//
//   u(t+1) = u(t) + dt kappa lap u(t), two buffers updated in turn, edges
//   held at their initial values; loss = sum (u(T) - target)^2; gradient
//   with respect to the conductivity kappa and the initial field u0. The
//   adjoint reads both buffers: the tape keeps u(t), ghost rows included,
//   across the exchanges that overwrite it.
#pragma once
#include <ctgrad/ctgrad.hpp>
#include <ctgrad/mpi/mpi.hpp>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "check_support.hpp"

namespace mpi_test {

using namespace ctg::literals;

inline constexpr double dt = 0.2;
inline auto const heat_start = ctg::kernel<"heat_start">([](auto u, auto u0) {
  return ctg::each(u0, [=](auto i, auto j) { return u(i, j) = u0(i, j); });
});
inline auto const heat_step = ctg::kernel<"heat_step">([](auto now, auto next, auto kappa) {
  auto const n = now.shape(0_c);
  auto const m = now.shape(1_c);
  return ctg::ndrange(n, m, [=](auto i, auto j) {
    auto const lap = now(i + 1, j) + now(i - 1, j) + now(i, j + 1) + now(i, j - 1) - 4 * now(i, j);
    return ctg::if_(i > 0 && i < n - 1 && j > 0 && j < m - 1, next(i, j) = now(i, j) + dt * kappa(i, j) * lap,
                    next(i, j) = now(i, j));
  });
});
inline auto const heat_loss = ctg::kernel<"heat_loss">([](auto u, auto target, auto loss) {
  return ctg::each(u, [=](auto i, auto j) { return loss() += ctg::pow(u(i, j) - target(i, j), 2.0); });
});

inline constexpr int heat_n = 23, heat_m = 17, heat_steps = 30, heat_ghost = 2;
inline std::vector<double> heat_values(double a, double b) {
  std::vector<double> v(std::size_t(heat_n * heat_m));
  for (int i = 0; i < heat_n; ++i)
    for (int j = 0; j < heat_m; ++j) v[std::size_t(i * heat_m + j)] = 0.5 + 0.4 * std::sin(a * i + b * j + 0.1 * i * j);
  return v;
}
inline std::vector<double> heat_kappa() {
  std::vector<double> k = heat_values(0.31, 0.17);
  for (double& x : k) x *= 0.5;
  return k;
}

struct heat_result {
  double loss;
  std::vector<double> grad_kappa, grad_u0;
};

// One process, plain host fields: the reference.
inline heat_result heat_plain() {
  using F = ctg::field<double, 2, ctg::grad>;
  F now({heat_n, heat_m}, {.name = "u_a"}), next({heat_n, heat_m}, {.name = "u_b"});
  F kappa({heat_n, heat_m}, {.name = "kappa"}), u0({heat_n, heat_m}, {.name = "u0"});
  ctg::field<double, 2> target({heat_n, heat_m}, {.name = "target"});
  ctg::field<double, 0, ctg::grad> loss(ctg::field_options{.name = "loss"});
  kappa.copy_from(heat_kappa());
  u0.copy_from(heat_values(0.7, -0.4));
  target.copy_from(heat_values(0.2, 0.5));
  ctg::tape tape(loss);
  heat_start(now, u0);
  for (int t = 0; t < heat_steps; ++t) {
    heat_step(now, next, kappa);
    std::swap(now, next);
  }
  loss.fill(0.0);
  heat_loss(now, target, loss);
  tape.backward();
  return {loss.to_vector()[0], kappa.grad().to_vector(), u0.grad().to_vector()};
}

// Every rank, fields decomposed over `world` in `space`. Checks the bytes
// each exchange moved (and, for device blocks, staged through the host).
inline heat_result heat_decomposed(ctg::mpi::grid const& world, ctg::memory_space space = ctg::memory_space::host) {
  using D = ctg::mpi::dfield<double, 2, ctg::grad>;
  D now(world, {heat_n, heat_m}, heat_ghost, {.name = "u_a", .space = space});
  D next(world, {heat_n, heat_m}, heat_ghost, {.name = "u_b", .space = space});
  D kappa(world, {heat_n, heat_m}, 0, {.name = "kappa", .space = space});
  D u0(world, {heat_n, heat_m}, 0, {.name = "u0", .space = space});
  // The target stays a plain field, whole on every rank: kernels index it globally.
  ctg::field<double, 2> target({heat_n, heat_m}, {.name = "target", .space = space});
  ctg::field<double, 0, ctg::grad> loss(ctg::field_options{.name = "loss", .space = space});
  ctg::mpi::copy_from_global(kappa, heat_kappa());
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
  loss.fill(0.0);
  heat_loss(now, target, loss);
  ctg::mpi::sum(world, loss);
  tape.backward();

  // Bytes: every exchange fills the ghost layers with neighbours, 2 rows deep.
  int const r = world.rank(), p = world.size();
  long long const layers = (r > 0 ? 1 : 0) + (r + 1 < p ? 1 : 0);
  long long const layer_bytes = heat_ghost * heat_m * (long long)sizeof(double);
  long long const ghost_bytes = layers * layer_bytes;
  long long const moved = a.stats().bytes_received + b.stats().bytes_received;
  long long const sent = a.stats().bytes_sent + b.stats().bytes_sent;
  long long const back = a.stats().adjoint_bytes_received + b.stats().adjoint_bytes_received;
  expect(a.stats().exchanges + b.stats().exchanges == heat_steps, "heat: one exchange per step");
  expect(moved == heat_steps * ghost_bytes, "heat: bytes received = steps x ghost layers", double(moved),
         double(heat_steps * ghost_bytes));
  expect(sent == moved && back == moved, "heat: bytes sent and sent back = bytes received", double(sent), double(back));
  // Device blocks without a CUDA-aware MPI: per neighbour and step, the
  // forward copies the outgoing layer to the host and the incoming one back
  // (2 layers); the adjoint copies the outgoing ghost gradients and reads and
  // writes the owned rows it adds into (3 layers). With a CUDA-aware MPI only
  // the adjoint's addition is staged (2 layers). Host blocks stage nothing.
  long long const staged = a.stats().staged_bytes + b.stats().staged_bytes;
  bool const device = space == ctg::memory_space::device;
  long long const per_step = !device ? 0 : ctg::mpi::detail::mpi_takes_device_memory() ? 2 : 5;
  expect(staged == heat_steps * layers * per_step * layer_bytes, "heat: bytes staged through the host",
         double(staged), double(heat_steps * layers * per_step * layer_bytes));
  long long total = 0;
  MPI_Allreduce(&moved, &total, 1, MPI_LONG_LONG, MPI_SUM, world.comm());
  if (r == 0)
    std::printf("heat (%s blocks): %d ranks, %lld bytes received per step on rank 0, %lld on all ranks (2 x %d "
                "boundaries x %d rows x %d x 8), %lld bytes staged per step on rank 0\n",
                device ? "device" : "host", p, moved / heat_steps, total / heat_steps, p - 1, heat_ghost, heat_m,
                staged / heat_steps);
  expect(total == heat_steps * 2LL * (p - 1) * heat_ghost * heat_m * 8, "heat: bytes on all ranks", double(total));
  return {loss.to_vector()[0], ctg::mpi::gather_grad(kappa), ctg::mpi::gather_grad(u0)};
}

// Compares a decomposed run with the reference on rank 0 (1e-12 relative).
inline void expect_same_heat(ctg::mpi::grid const& world, heat_result const& h, heat_result const& href,
                             char const* label) {
  double total = h.loss;
  MPI_Bcast(&total, 1, MPI_DOUBLE, 0, world.comm());
  expect(h.loss == total, "heat: every rank holds the same loss", h.loss, total);
  if (world.rank() != 0) return;
  double const dl = std::abs(h.loss - href.loss) / std::abs(href.loss);
  double const dk = relative(h.grad_kappa, href.grad_kappa), du = relative(h.grad_u0, href.grad_u0);
  std::printf("heat 2-D (%s): %d ranks, loss %.15g (one process %.15g), relative difference %.2e, gradient of "
              "kappa %.2e, of u0 %.2e\n",
              label, world.size(), h.loss, href.loss, dl, dk, du);
  expect(dl <= 1e-12, "heat: loss", dl, 1e-12);
  expect(dk <= 1e-12, "heat: gradient of kappa", dk, 1e-12);
  expect(du <= 1e-12, "heat: gradient of u0", du, 1e-12);
}

}  // namespace mpi_test
