// The state layouts of the examples on a tape: particles updated in place
// around a grid cleared and refilled by the same kernel (diffmpm), and three
// buffers rotated for a scheme with two earlier time levels (wave). Gradients
// against central differences of the same loops in plain C++; the bytes the
// tape keeps against what its rule gives.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <utility>
#include <vector>

#include "ad_test_support.hpp"

namespace {

using doctest::Approx;
using vec_t = ctg::field<double, 1, ctg::grad>;
using scal_t = ctg::field<double, 0, ctg::grad>;

// ---- a 1-D particle-in-cell step in one kernel ----------------------------------------------------
constexpr int particles = 4, nodes = 8, pic_steps = 5;
constexpr double h = 1.0 / (nodes - 1), dt = 0.05;

// Clear the grid; scatter mass and momentum with linear weights, updating
// the particle's stretch s in place; grid velocity = momentum / mass (plus a
// pull to the right); gather it back, moving the particles in place.
constexpr auto pic_step = ctg::kernel<"pic_step">([](auto x, auto v, auto s, auto mass, auto momentum, auto velocity) {
  return ctg::block(
      ctg::range(mass.size(), [=](auto i) { return ctg::block(mass[i] = 0.0, momentum[i] = 0.0); }),
      ctg::range(x.size(), [=](auto p) {
        return ctg::let(ctg::cast<int>(ctg::floor(x[p] / h)), s[p] * (1.0 + dt * v[p]), [=](auto base, auto new_s) {
          return ctg::let(x[p] / h - ctg::cast<double>(base), [=](auto f) {
            return ctg::block(s[p] = new_s, mass[base] += (1.0 - f) * new_s, mass[base + 1] += f * new_s,
                              momentum[base] += (1.0 - f) * new_s * v[p], momentum[base + 1] += f * new_s * v[p]);
          });
        });
      }),
      ctg::range(mass.size(), [=](auto i) { return velocity[i] = momentum[i] / (mass[i] + 0.1) + 0.2; }),
      ctg::range(x.size(), [=](auto p) {
        return ctg::let(ctg::cast<int>(ctg::floor(x[p] / h)), [=](auto base) {
          return ctg::let(x[p] / h - ctg::cast<double>(base), [=](auto f) {
            return ctg::let((1.0 - f) * velocity[base] + f * velocity[base + 1], [=](auto new_v) {
              return ctg::block(v[p] = new_v, x[p] = x[p] + dt * new_v);
            });
          });
        });
      }));
});
constexpr auto pic_loss = ctg::kernel<"pic_loss">([](auto x, auto s, auto loss) {
  return ctg::range(x.size(), [=](auto p) { return loss() += x[p] * x[p] * s[p]; });
});

// p: x, then v, of the particles (s starts at 1).
double pic_plain(std::vector<double> const& p) {
  std::vector<double> x(p.begin(), p.begin() + particles), v(p.begin() + particles, p.end()), s(particles, 1.0);
  std::vector<double> mass(nodes), momentum(nodes), velocity(nodes);
  for (int t = 0; t < pic_steps; ++t) {
    std::fill(mass.begin(), mass.end(), 0.0);
    std::fill(momentum.begin(), momentum.end(), 0.0);
    for (std::size_t q = 0; q < x.size(); ++q) {
      auto const base = std::size_t(std::floor(x[q] / h));
      double const f = x[q] / h - double(base);
      s[q] = s[q] * (1 + dt * v[q]);
      mass[base] += (1 - f) * s[q];
      mass[base + 1] += f * s[q];
      momentum[base] += (1 - f) * s[q] * v[q];
      momentum[base + 1] += f * s[q] * v[q];
    }
    for (std::size_t i = 0; i < mass.size(); ++i) velocity[i] = momentum[i] / (mass[i] + 0.1) + 0.2;
    for (std::size_t q = 0; q < x.size(); ++q) {
      auto const base = std::size_t(std::floor(x[q] / h));
      double const f = x[q] / h - double(base);
      v[q] = (1 - f) * velocity[base] + f * velocity[base + 1];
      x[q] = x[q] + dt * v[q];
    }
  }
  double l = 0;
  for (std::size_t q = 0; q < x.size(); ++q) l += x[q] * x[q] * s[q];
  return l;
}

}  // namespace

TEST_CASE("particles in place around a grid the same kernel clears and refills") {
  vec_t x({particles}, {.name = "x"}), v({particles}, {.name = "v"}), s({particles}, {.name = "s"});
  vec_t mass({nodes}, {.name = "mass"}), momentum({nodes}, {.name = "momentum"}), velocity({nodes}, {.name = "velocity"});
  scal_t loss({.name = "loss"});
  std::vector<double> const start = {0.21, 0.38, 0.52, 0.66, 0.3, -0.1, 0.2, 0.05};
  std::size_t kept = 0;
  {
    ctg::tape tape(loss);
    x.copy_from(std::vector<double>(start.begin(), start.begin() + particles));
    v.copy_from(std::vector<double>(start.begin() + particles, start.end()));
    s.fill(1.0);
    for (int t = 0; t < pic_steps; ++t) pic_step(x, v, s, mass, momentum, velocity);
    pic_loss(x, s, loss);
    kept = tape.bytes_saved();
    tape.backward();
  }
  // Every step reads x, v and s before it overwrites them (copied by the
  // step itself), and leaves the grid its adjoint reads (copied by the next
  // step, which clears it): 5 copies of each particle field, 4 of each grid
  // field.
  CHECK(kept == (std::size_t(pic_steps) * 3 * particles + std::size_t(pic_steps - 1) * 3 * nodes) * sizeof(double));
  auto const g = ad_test::fd_gradient(pic_plain, start);
  for (int q = 0; q < particles; ++q) {
    CHECK(x.grad().at(q) == Approx(g[std::size_t(q)]).epsilon(1e-6));
    CHECK(v.grad().at(q) == Approx(g[std::size_t(particles + q)]).epsilon(1e-6));
  }
  CHECK(std::as_const(loss).at() == Approx(pic_plain(start)).epsilon(1e-13));
}

namespace {

// ---- three buffers rotated: a scheme with two earlier time levels ------------------------------------
constexpr int cells = 9, wave_steps = 7;
constexpr auto leapfrog = ctg::kernel<"leapfrog">([](auto prev, auto now, auto next) {
  return ctg::range(now.size(), [=](auto i) {
    return ctg::if_(i > 0 && i < now.size() - 1,
                    next[i] = 2.0 * now[i] - prev[i] + 0.3 * (now[i - 1] - 2.0 * now[i] + now[i + 1]),
                    next[i] = 0.0);
  });
});
constexpr auto cubes = ctg::kernel<"cubes">([](auto u, auto loss) {
  return ctg::range(u.size(), [=](auto i) { return loss() += u[i] * u[i] * u[i]; });
});

double wave_plain(std::vector<double> const& start) {
  std::vector<double> prev = start, now = start, next(start.size());
  for (int t = 0; t < wave_steps; ++t) {
    for (std::size_t i = 0; i < now.size(); ++i)
      next[i] = (i > 0 && i + 1 < now.size()) ? 2 * now[i] - prev[i] + 0.3 * (now[i - 1] - 2 * now[i] + now[i + 1])
                                              : 0.0;
    std::swap(prev, now);
    std::swap(now, next);
  }
  double l = 0;
  for (double e : now) l += e * e * e;
  return l;
}

}  // namespace

TEST_CASE("three buffers rotated by their handles: a linear scheme keeps nothing") {
  vec_t a({cells}, {.name = "a"}), b({cells}, {.name = "b"}), c({cells}, {.name = "c"});
  scal_t loss({.name = "loss"});
  std::vector<double> start(cells);
  for (int i = 0; i < cells; ++i) start[std::size_t(i)] = std::sin(0.6 * i) + 0.1 * i;
  vec_t const first = a, second = b;  // the buffers that hold the two initial levels
  {
    ctg::tape tape(loss);
    vec_t prev = a, now = b, next = c;
    prev.copy_from(start);
    now.copy_from(start);
    for (int t = 0; t < wave_steps; ++t) {
      leapfrog(prev, now, next);
      std::swap(prev, now);
      std::swap(now, next);
    }
    cubes(now, loss);
    CHECK(tape.bytes_saved() == 0);  // no adjoint of leapfrog reads a value
    tape.backward();
    CHECK(tape.bytes_saved() == 0);
  }
  // Both initial levels are the start: its gradient is the sum of theirs.
  auto const g = ad_test::fd_gradient(wave_plain, start);
  for (int i = 0; i < cells; ++i)
    CHECK(first.grad().at(i) + second.grad().at(i) == Approx(g[std::size_t(i)]).epsilon(1e-6));
}
