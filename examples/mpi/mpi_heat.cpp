// A 2-D heat problem decomposed over MPI ranks, solved backwards by gradient
// descent: which initial temperature, diffused for T steps through a plate
// of uneven conductivity, ends as a target pattern (a ring)?
//
// The kernels are those a single process would run; the fields are
// ctg::mpi::dfield, split into blocks of rows over the ranks with one ghost
// row on either side. Each step exchanges the ghost rows, then updates; the
// loss is summed over the ranks. One ctg::tape per rank records it all, the
// exchanges and the sum with their adjoints, and backward() gives every rank
// the gradient of its own rows. Rank 0 prints each iteration with what each
// rank did, checks the gradient against central differences, and writes the
// pictures.
//
//   mpirun -np 4 example_mpi_heat            default size
//   mpirun -np 3 example_mpi_heat --quick    small and fast; checks loss and gradient
#include <ctgrad/ctgrad.hpp>
#include <ctgrad/mpi/mpi.hpp>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "../common.hpp"
#include "../svg.hpp"

using namespace ctg::literals;

namespace {

constexpr double dt = 0.2;

// [snippet: kernels]
using namespace ctg::literals;  // for 0_c, 1_c, ...
// One explicit step of du/dt = kappa lap u; the edges keep their values.
auto const diffuse = ctg::kernel<"diffuse">([](auto now, auto next, auto kappa) {
  auto const n = now.shape(0_c), m = now.shape(1_c);
  return ctg::ndrange(n, m, [=](auto i, auto j) {
    auto const lap = now(i + 1, j) + now(i - 1, j) + now(i, j + 1) + now(i, j - 1) - 4 * now(i, j);
    return ctg::if_(i > 0 && i < n - 1 && j > 0 && j < m - 1, next(i, j) = now(i, j) + dt * kappa(i, j) * lap,
                    next(i, j) = now(i, j));
  });
});
auto const start = ctg::kernel<"start">([](auto u, auto initial) {
  return ctg::each(initial, [=](auto i, auto j) { return u(i, j) = initial(i, j); });
});
auto const mismatch = ctg::kernel<"mismatch">([](auto u, auto target, auto loss) {
  return ctg::each(u, [=](auto i, auto j) { return loss() += ctg::pow(u(i, j) - target(i, j), 2.0); });
});
// [snippet end]

std::vector<double> ring(int n) {
  std::vector<double> v(std::size_t(n * n));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      double const r = std::hypot(i - 0.5 * (n - 1), j - 0.5 * (n - 1)) / n;
      v[std::size_t(i * n + j)] = std::exp(-std::pow((r - 0.28) / 0.06, 2));
    }
  return v;
}
std::vector<double> conductivity(int n) {
  std::vector<double> v(std::size_t(n * n));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) v[std::size_t(i * n + j)] = 0.6 + 0.35 * std::sin(6.0 * i / n) * std::cos(4.0 * j / n);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  {
    ctg::mpi::grid world;
    bool const root = world.rank() == 0;
    auto const opt = example::parse(argc, argv, "mpi_heat: the initial temperature whose diffusion draws a ring");
    int const n = opt.quick ? 32 : 96;
    int const steps = opt.quick ? 20 : 60;
    int const iterations = opt.iterations >= 0 ? opt.iterations : opt.quick ? 30 : 80;
    if (root)
      std::printf("mpi_heat: %dx%d plate over %d ranks, %d steps, %d iterations\n", n, n, world.size(), steps,
                  iterations);

    // [snippet: fields]
    using D = ctg::mpi::dfield<double, 2, ctg::grad>;
    D now(world, {n, n}, 1, {.name = "u_a"}), next(world, {n, n}, 1, {.name = "u_b"});
    D initial(world, {n, n}, 0, {.name = "initial"});
    ctg::mpi::dfield<double, 2> kappa(world, {n, n}, 0, {.name = "kappa"}), target(world, {n, n}, 0, {.name = "target"});
    ctg::field<double, 0, ctg::grad> loss(ctg::field_options{.name = "loss"});
    ctg::mpi::copy_from_global(kappa, conductivity(n));
    ctg::mpi::copy_from_global(target, ring(n));
    // [snippet end]
    if (root)
      for (int r = 0; r < world.size(); ++r)
        std::printf("  rank %d: rows [%d, %d)\n", r, world.lo(n, r), world.hi(n, r));

    // [snippet: simulate]
    auto simulate = [&] {
      start(now, initial);
      for (int t = 0; t < steps; ++t) {
        ctg::mpi::exchange(now);  // ghost rows of `now` from the neighbours
        diffuse(now, next, kappa);
        std::swap(now, next);
      }
      loss.at() = 0;
      mismatch(now, target, loss);  // this rank's rows
      ctg::mpi::sum(world, loss);   // the whole plate's, on every rank
    };
    // [snippet end]

    // The gradient against central differences of the decomposed loss, at a
    // few cells (the owner perturbs; every rank runs).
    double worst = 0;
    {
      ctg::tape tape(loss);
      simulate();
      tape.backward();
    }
    std::vector<double> const grad = ctg::mpi::gather_grad(initial);
    int const probes[3][2] = {{n / 2, n / 2}, {n / 3, 2 * n / 3}, {n - 3, 4}};
    for (auto const& p : probes) {
      double const h = 1e-5;
      auto at = [&](double delta) {
        bool const mine = p[0] >= initial.owned_lo() && p[0] < initial.owned_hi();
        if (mine) initial.at(p[0], p[1]) += delta;
        simulate();
        if (mine) initial.at(p[0], p[1]) -= delta;
        return loss.at();
      };
      double const fd = (at(h) - at(-h)) / (2 * h);
      if (root) {
        double const g = grad[std::size_t(p[0] * n + p[1])];
        worst = std::max(worst, std::abs(g - fd) / std::max(std::abs(fd), 1e-8));
      }
    }
    if (root) std::printf("gradient check: worst relative error %.2e at 3 cells (central differences)\n", worst);

    // [snippet: descent]
    double const learning_rate = 0.2;  // the held edges feed every step: their curvature is high
    std::vector<double> history;
    for (int it = 0; it < iterations; ++it) {
      example::stopwatch clock;
      now.reset_stats();
      next.reset_stats();
      ctg::tape tape(loss);
      simulate();
      tape.backward();
      initial.map() -= learning_rate * initial.grad().map();  // this rank's rows (no ghosts: width 0)
      // What each rank did, for rank 0 to print.
      double const mine[3] = {clock.seconds(), double(now.stats().bytes_sent + next.stats().bytes_sent),
                              double(now.stats().adjoint_bytes_sent + next.stats().adjoint_bytes_sent)};
      std::vector<double> all(std::size_t(3 * world.size()));
      MPI_Gather(mine, 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, 0, world.comm());
      double norm2 = initial.grad().map().squaredNorm(), total2 = 0;
      MPI_Reduce(&norm2, &total2, 1, MPI_DOUBLE, MPI_SUM, 0, world.comm());
      if (root) {
        history.push_back(loss.at());
        example::progress(it, loss.at(), std::sqrt(total2), clock.seconds());
        if (it == 0 || it + 1 == iterations)
          for (int r = 0; r < world.size(); ++r)
            std::printf("    rank %d: %6.1f ms, sent %.0f bytes of values, %.0f bytes of gradients\n", r,
                        1e3 * all[std::size_t(3 * r)], all[std::size_t(3 * r + 1)], all[std::size_t(3 * r + 2)]);
      }
    }
    // [snippet end]
    simulate();
    std::vector<double> const start_values = ctg::mpi::gather(initial), end_values = ctg::mpi::gather(now);
    std::vector<double> const goal = ctg::mpi::gather(target);
    if (root) {
      history.push_back(loss.at());
      svg::write_loss_curve(example::picture(opt, "mpi_heat_loss.svg"), history, "mpi_heat: loss per iteration");
      svg::document doc(960, 370);
      auto panel = [&](int k, std::vector<double> const& values, std::string const& title) {
        doc.panel(k, values, n, n, title);
        for (int r = 1; r < world.size(); ++r) {  // the blocks' edges
          double const y = 50 + 300.0 * world.lo(n, r) / n;
          doc.line(10 + 320 * k, y, 310 + 320 * k, y, "#888", 1);
        }
      };
      panel(0, goal, "target");
      panel(1, start_values, "optimised initial temperature");
      panel(2, end_values, "after " + std::to_string(steps) + " steps (" + std::to_string(world.size()) + " ranks)");
      doc.save(example::picture(opt, "mpi_heat_final.svg"));
      status = example::finish(opt, "mpi_heat", history.front(), history.back(), 3.0, worst);
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, world.comm());
  }
  MPI_Finalize();
  return status;
}
