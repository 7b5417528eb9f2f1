// The tape keeps the field values each adjoint needs: simulations that update
// their state in place or ping-pong between two buffers get the gradient of
// the computation they ran, pinned against central finite differences of a
// plain C++ version of the same loop.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <thread>
#include <utility>
#include <vector>

#include "ad_test_support.hpp"

namespace {

using doctest::Approx;
using vec_t = ctg::field<double, 1, ctg::grad>;
using scal_t = ctg::field<double, 0, ctg::grad>;

constexpr int cells = 12;

// ---- a heat equation with two buffers -----------------------------------------------------------
// v = u + D (u[i-1] - 2 u[i] + u[i+1]) inside, v = u at the two ends.
constexpr auto heat_step = ctg::kernel<"heat_step">([](auto u, auto v, auto d) {
  return ctg::range(u.size(), [=](auto i) {
    return ctg::if_(i > 0 && i < u.size() - 1, v[i] = u[i] + d() * (u[i - 1] - 2.0 * u[i] + u[i + 1]),
                    v[i] = u[i]);
  });
});
constexpr auto sum_sq = ctg::kernel<"sum_sq">([](auto u, auto loss) {
  return ctg::range(u.size(), [=](auto i) { return loss() += u[i] * u[i] * u[i]; });
});

double heat_plain(std::vector<double> const& p, int pairs) {  // p: cells of u, then D
  std::vector<double> u(p.begin(), p.begin() + cells), v(cells);
  double const d = p[cells];
  auto step = [&](std::vector<double> const& a, std::vector<double>& b) {
    for (int i = 0; i < cells; ++i)
      b[i] = (i > 0 && i < cells - 1) ? a[i] + d * (a[i - 1] - 2 * a[i] + a[i + 1]) : a[i];
  };
  for (int k = 0; k < pairs; ++k) {
    step(u, v);
    step(v, u);
  }
  double loss = 0;
  for (double x : u) loss += x * x * x;
  return loss;
}

struct heat_problem {
  vec_t u{{cells}, {.name = "u"}}, v{{cells}, {.name = "v"}};
  scal_t d{{.name = "D"}}, loss{{.name = "loss"}};
  std::vector<double> start;
  heat_problem() {
    for (int i = 0; i < cells; ++i) start.push_back(std::sin(0.7 * i) + 0.2 * i);
    d.at() = 0.21;
  }
  void reset() {
    u.copy_from(start);
    loss.at() = 0;
  }
  void run(int pairs) {
    for (int k = 0; k < pairs; ++k) {
      heat_step(u, v, d);
      heat_step(v, u, d);
    }
    sum_sq(u, loss);
  }
  std::vector<double> params() const {
    std::vector<double> p = start;
    p.push_back(0.21);
    return p;
  }
};

}  // namespace

TEST_CASE("ping-pong buffers: the tape saves each overwritten version an adjoint needs") {
  heat_problem h;
  int const pairs = 6;
  h.reset();
  {
    ctg::tape tape(h.loss);
    h.run(pairs);
    // u and v are each overwritten once per step after an adjoint needed them.
    CHECK(tape.bytes_saved() > 0);
    tape.backward();
  }
  auto const p = h.params();
  auto const plain = [&](std::vector<double> const& q) { return heat_plain(q, pairs); };
  auto const g = ad_test::fd_gradient(plain, p);
  CHECK(h.d.grad().at() == Approx(g[cells]).epsilon(1e-6));
  // u's gradient is with respect to its values at the start: the tape put
  // them back for the first adjoint, then left the final values in place.
  for (int i = 0; i < cells; ++i) CHECK(h.u.grad().at(i) == Approx(g[i]).epsilon(1e-6));
  CHECK(std::as_const(h.loss).at() == Approx(plain(p)).epsilon(1e-12));
}

TEST_CASE("strict mode refuses to save and names the field, the needing and the overwriting launch") {
  heat_problem h;
  h.reset();
  ctg::tape tape(h.loss, ctg::tape_options{.strict = true});
  heat_step(h.u, h.v, h.d);  // #1 reads u
  try {
    heat_step(h.v, h.u, h.d);  // #2 overwrites u, which #1 needs: refused
    FAIL("no error");
  } catch (ctg::autodiff_error const& e) {
    std::string const what = e.what();
    CHECK(what.find("CTG-TAPE-002") != std::string::npos);
    CHECK(what.find("field 'u'") != std::string::npos);
    CHECK(what.find("launch #2 (kernel 'heat_step')") != std::string::npos);
    CHECK(what.find("launch #1") != std::string::npos);
  }
}

namespace {

// ---- in-place symplectic Euler ------------------------------------------------------------------
constexpr int masses = 7;
constexpr double dt = 0.05;
constexpr auto kick = ctg::kernel<"kick">([](auto x, auto v, auto k) {
  return ctg::range(x.size(), [=](auto i) { return v[i] += -dt * k() * ctg::sin(x[i]) * (1.0 + x[i] * x[i]); });
});
constexpr auto drift = ctg::kernel<"drift">([](auto x, auto v) {
  return ctg::range(x.size(), [=](auto i) { return x[i] += dt * v[i]; });
});

double euler_plain(std::vector<double> const& p, int steps) {  // p: x, v, k
  std::vector<double> x(p.begin(), p.begin() + masses), v(p.begin() + masses, p.begin() + 2 * masses);
  double const k = p[2 * masses];
  for (int s = 0; s < steps; ++s) {
    for (int i = 0; i < masses; ++i) v[i] += -dt * k * std::sin(x[i]) * (1 + x[i] * x[i]);
    for (int i = 0; i < masses; ++i) x[i] += dt * v[i];
  }
  double loss = 0;
  for (int i = 0; i < masses; ++i) loss += x[i] * x[i] + 0.5 * v[i] * v[i];
  return loss;
}
constexpr auto energy = ctg::kernel<"energy">([](auto x, auto v, auto loss) {
  return ctg::range(x.size(), [=](auto i) { return loss() += x[i] * x[i] + 0.5 * v[i] * v[i]; });
});

}  // namespace

TEST_CASE("in-place symplectic Euler: 25 steps, exact gradient") {
  vec_t x({masses}, {.name = "x"}), v({masses}, {.name = "v"});
  scal_t k({.name = "k"}), loss({.name = "loss"});
  std::vector<double> p;
  for (int i = 0; i < masses; ++i) p.push_back(0.3 + 0.4 * i);
  for (int i = 0; i < masses; ++i) p.push_back(0.1 * (i % 3) - 0.1);
  p.push_back(1.7);
  int const steps = 25;
  for (int i = 0; i < masses; ++i) x.at(i) = p[i], v.at(i) = p[masses + i];
  k.at() = p[2 * masses];
  {
    ctg::tape tape(loss);
    for (int s = 0; s < steps; ++s) {
      auto step_scope = tape.scope("step " + std::to_string(s));
      kick(x, v, k);
      drift(x, v);
    }
    energy(x, v, loss);
    // kick needs x; drift overwrites it every step: one copy of x per step.
    CHECK(tape.bytes_saved() == std::size_t(steps) * masses * sizeof(double));
    std::string const listing = tape.listing();
    CHECK(listing.find("#1 step 0: kernel 'kick'; adjoint reads x, k; writes v; saved 0 bytes") != std::string::npos);
    CHECK(listing.find("#2 step 0: kernel 'drift'; adjoint reads nothing; writes x; saved 56 bytes") !=
          std::string::npos);
    tape.backward();
  }
  auto const plain = [&](std::vector<double> const& q) { return euler_plain(q, steps); };
  auto const g = ad_test::fd_gradient(plain, p);
  CHECK(k.grad().at() == Approx(g[2 * masses]).epsilon(1e-6));
  for (int i = 0; i < masses; ++i) {
    CHECK(x.grad().at(i) == Approx(g[i]).epsilon(1e-6));
    CHECK(v.grad().at(i) == Approx(g[masses + i]).epsilon(1e-6));
  }
  // The fields hold the final forward values afterwards.
  std::vector<double> xs(p.begin(), p.begin() + masses), vs(p.begin() + masses, p.begin() + 2 * masses);
  for (int s = 0; s < steps; ++s) {
    for (int i = 0; i < masses; ++i) vs[i] += -dt * p[2 * masses] * std::sin(xs[i]) * (1 + xs[i] * xs[i]);
    for (int i = 0; i < masses; ++i) xs[i] += dt * vs[i];
  }
  for (int i = 0; i < masses; ++i) CHECK(std::as_const(x).at(i) == Approx(xs[i]).epsilon(1e-14));
}

TEST_CASE("a kernel that reads a field and overwrites it is exact on a tape") {
  // x[i] = x[i] + dt sin(x[i]): the adjoint needs x as it was before the
  // launch; the tape saves it (k.grad alone rejects this kernel: CTG-AD-004).
  constexpr auto flow = ctg::kernel<"flow">([](auto x) {
    return ctg::range(x.size(), [=](auto i) { return x[i] = x[i] + 0.1 * ctg::sin(x[i]); });
  });
  static_assert(decltype(flow)::diagnose<vec_t>().has(ctg::finding::overwritten_after_read));
  static_assert(decltype(flow)::diagnose<vec_t>().for_tape().ok());
  vec_t x({4}, {.name = "x"});
  scal_t loss({.name = "loss"});
  std::vector<double> p = {0.4, 1.1, -0.7, 2.5};
  x.copy_from(p);
  int const steps = 9;
  {
    ctg::tape tape(loss);
    for (int s = 0; s < steps; ++s) flow(x);
    sum_sq(x, loss);
    CHECK(tape.bytes_saved() == std::size_t(steps) * 4 * sizeof(double));
    tape.backward();
  }
  auto const plain = [&](std::vector<double> q) {
    for (int s = 0; s < steps; ++s)
      for (auto& e : q) e = e + 0.1 * std::sin(e);
    double l = 0;
    for (double e : q) l += e * e * e;
    return l;
  };
  auto const g = ad_test::fd_gradient(plain, p);
  for (int i = 0; i < 4; ++i) CHECK(x.grad().at(i) == Approx(g[i]).epsilon(1e-7));
}

TEST_CASE("a kernel that reads a field after overwriting it stays rejected, also on a tape") {
  // The second offload reads the values the first wrote, the first reads the
  // ones the launch began with: no single version serves both.
  constexpr auto both = ctg::kernel<"both">([](auto x, auto y) {
    return ctg::block(ctg::range(x.size(), [=](auto i) { return x[i] = ctg::sin(x[i]); }),
                      ctg::range(x.size(), [=](auto i) { return y[i] = ctg::cos(x[i]); }),
                      ctg::range(x.size(), [=](auto i) { return x[i] = x[i] * 2.0; }));
  });
  static_assert(decltype(both)::diagnose<vec_t, vec_t>().has(ctg::finding::overwritten_after_read));
  static_assert(!decltype(both)::diagnose<vec_t, vec_t>().for_tape().ok());
}

TEST_CASE("a read after the write that feeds only a field without a gradient is not needed by the adjoint") {
  // x[i] = |x[i] + 0.1 v[i]|, then a diagnostic copy of x[i]^2 into a field
  // without a gradient: the adjoint of a store into such a field evaluates
  // nothing, so the new x is never read by it and one version of x serves.
  // With a gradient on the copy, the new x is needed and the kernel stays
  // rejected on a tape.
  constexpr auto bounce = [](auto x, auto v, auto seen) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i] + 0.1 * v[i], [=](auto nx) {
        return ctg::block(ctg::if_(nx < 0.0, x[i] = -nx, x[i] = nx), seen[i] = x[i] * x[i]);
      });
    });
  };
  constexpr auto bounce_seen = ctg::kernel<"bounce_seen">(bounce);
  using plain_t = ctg::field<double, 1>;
  static_assert(decltype(bounce_seen)::diagnose<vec_t, vec_t, plain_t>().for_tape().ok());
  static_assert(!decltype(bounce_seen)::diagnose<vec_t, vec_t, vec_t>().for_tape().ok());
  std::vector<double> const x0{0.5, -0.5, 0.01}, v0{1.0, 1.0, -1.0};
  vec_t x({3}, {.name = "x"}), v({3}, {.name = "v"});
  plain_t seen({3}, {.name = "seen"});
  scal_t loss({.name = "loss"});
  x.copy_from(x0);
  v.copy_from(v0);
  {
    ctg::tape tape(loss);
    bounce_seen(x, v, seen);
    sum_sq(x, loss);  // loss = sum |x + 0.1 v|^3
    tape.backward();
  }
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    double const moved = x0[std::size_t(i)] + 0.1 * v0[std::size_t(i)];
    CHECK(std::as_const(seen).at(i) == Approx(moved * moved));
    // d/dx |m|^3 = 3 m |m|, d/dv = 0.3 m |m|
    CHECK(x.grad().at(i) == Approx(3 * moved * std::abs(moved)));
    CHECK(v.grad().at(i) == Approx(0.3 * moved * std::abs(moved)));
  }
}

TEST_CASE("a write in one arm of a branch does not come before a read in the other, on a tape") {
  // A wall: velocities of particles past it are reset, the others damped by
  // their own value. The reset arm writes v, the other reads it: in one
  // iteration only one arm runs, so every read sees v as the launch began
  // (the tape keeps it); so does the condition, which reads v itself.
  constexpr auto wall = ctg::kernel<"wall">([](auto x, auto v) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::if_(x[i] > 0.0, v[i] = -0.5 * x[i], v[i] -= 0.25 * v[i] * v[i]);
    });
  });
  constexpr auto clip = ctg::kernel<"clip">([](auto x, auto v) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::if_(v[i] > 0.5, v[i] = x[i] + 1.0, v[i] = v[i] * ctg::cos(x[i]));
    });
  });
  static_assert(decltype(wall)::diagnose<vec_t, vec_t>().for_tape().ok());
  static_assert(decltype(clip)::diagnose<vec_t, vec_t>().for_tape().ok());
  // Read after the write in program order outside a branch: still rejected.
  constexpr auto after = ctg::kernel<"after">([](auto x, auto v) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::block(ctg::if_(x[i] > 0.0, v[i] = -0.5 * x[i]), v[i] = v[i] * x[i]);
    });
  });
  static_assert(!decltype(after)::diagnose<vec_t, vec_t>().for_tape().ok());

  std::vector<double> const xs = {-0.8, 0.3, -0.2, 0.9, -1.1}, vs = {0.6, -0.4, 1.7, 0.2, 2.4};
  vec_t x({5}, {.name = "x"}), v({5}, {.name = "v"});
  scal_t loss({.name = "loss"});
  x.copy_from(xs);
  v.copy_from(vs);
  int const steps = 3;
  {
    ctg::tape tape(loss);
    for (int s = 0; s < steps; ++s) wall(x, v), clip(x, v);
    sum_sq(v, loss);
    tape.backward();
  }
  auto const plain = [&](std::vector<double> const& p) {  // p = (x, v)
    std::vector<double> xq(p.begin(), p.begin() + 5), vq(p.begin() + 5, p.end());
    for (int s = 0; s < steps; ++s)
      for (int i = 0; i < 5; ++i) {
        vq[i] = xq[i] > 0.0 ? -0.5 * xq[i] : vq[i] - 0.25 * vq[i] * vq[i];
        vq[i] = vq[i] > 0.5 ? xq[i] + 1.0 : vq[i] * std::cos(xq[i]);
      }
    double l = 0;
    for (double e : vq) l += e * e * e;
    return l;
  };
  std::vector<double> p = xs;
  p.insert(p.end(), vs.begin(), vs.end());
  auto const g = ad_test::fd_gradient(plain, p);
  for (int i = 0; i < 5; ++i) {
    CAPTURE(i);
    CHECK(x.grad().at(i) == Approx(g[i]).epsilon(1e-7));
    CHECK(v.grad().at(i) == Approx(g[5 + i]).epsilon(1e-7));
  }
}

namespace {

// ---- a grid cleared and reused every step (the MPM pattern) ----------------------------------------
constexpr int nodes = 9;
constexpr double h = 1.0 / (nodes - 1);
constexpr auto clear_grid = ctg::kernel<"clear_grid">([](auto grid) {
  return ctg::range(grid.size(), [=](auto i) { return grid[i] = 0.0; });
});
// Each particle spreads its weight to its two nodes (linear hat functions).
constexpr auto scatter = ctg::kernel<"scatter">([](auto x, auto grid) {
  return ctg::range(x.size(), [=](auto p) {
    return ctg::let(ctg::cast<int>(ctg::floor(x[p] / h)), [=](auto base) {
      return ctg::let(x[p] / h - ctg::cast<double>(base), [=](auto f) {
        return ctg::block(grid[base] += (1.0 - f) * (1.0 - f), grid[base + 1] += f * f);
      });
    });
  });
});
// Particles move down the gradient of a smooth function of the grid mass.
constexpr auto gather = ctg::kernel<"gather">([](auto x, auto grid) {
  return ctg::range(x.size(), [=](auto p) {
    return ctg::let(ctg::cast<int>(ctg::floor(x[p] / h)), [=](auto base) {
      return ctg::let(x[p] / h - ctg::cast<double>(base), [=](auto f) {
        return x[p] = x[p] + 0.01 * (ctg::tanh(grid[base]) * (1.0 - f) + ctg::tanh(grid[base + 1]) * f);
      });
    });
  });
});

}  // namespace

TEST_CASE("a grid cleared and reused every step") {
  ctg::field<double, 1, ctg::grad> x({5}, {.name = "x"}), grid({nodes}, {.name = "grid"});
  scal_t loss({.name = "loss"});
  std::vector<double> start = {0.13, 0.31, 0.42, 0.58, 0.77};
  auto forward = [&] {
    x.copy_from(start);
    loss.at() = 0;
    for (int s = 0; s < 6; ++s) {
      clear_grid(grid);
      scatter(x, grid);
      gather(x, grid);
    }
    sum_sq(x, loss);
  };
  {
    ctg::tape tape(loss);
    forward();
    // scatter's adjoint needs x and gather overwrites it; gather's adjoint
    // needs the grid and the next clear overwrites it.
    CHECK(tape.bytes_saved() == std::size_t(5 * 6 + nodes * 5) * sizeof(double));
    tape.backward();
  }
  auto const plain = [&](std::vector<double> q) {
    std::vector<double> g(nodes);
    for (int s = 0; s < 6; ++s) {
      std::fill(g.begin(), g.end(), 0.0);
      for (double e : q) {
        int const b = int(std::floor(e / h));
        double const f = e / h - b;
        g[b] += (1 - f) * (1 - f);
        g[b + 1] += f * f;
      }
      for (double& e : q) {
        int const b = int(std::floor(e / h));
        double const f = e / h - b;
        e = e + 0.01 * (std::tanh(g[b]) * (1 - f) + std::tanh(g[b + 1]) * f);
      }
    }
    double l = 0;
    for (double e : q) l += e * e * e;
    return l;
  };
  auto const g = ad_test::fd_gradient(plain, start, 1e-7);
  for (int i = 0; i < 5; ++i) CHECK(x.grad().at(i) == Approx(g[i]).epsilon(1e-6));
}

TEST_CASE("nothing overwritten, nothing saved") {
  vec_t x({4}, {.name = "x"}), y({4}, {.name = "y"});
  scal_t loss({.name = "loss"});
  constexpr auto square = ctg::kernel<"square">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = x[i] * x[i]; });
  });
  x.fill(0.5);
  ctg::tape tape(loss);
  square(x, y);
  sum_sq(y, loss);
  CHECK(tape.bytes_saved() == 0);
  tape.backward();
  CHECK(tape.bytes_saved() == 0);
  CHECK(x.grad().at(0) == Approx(6 * std::pow(0.5, 5)));
}

// ---- changes the tape did not see ------------------------------------------------------------------
TEST_CASE("a host write to a needed field between recording and backward raises CTG-TAPE-003") {
  for (int kind = 0; kind < 3; ++kind) {
    CAPTURE(kind);
    heat_problem h;
    h.reset();
    ctg::tape tape(h.loss);
    h.run(1);
    // Reading through a non-const handle is not a change.
    double const peek = h.u.at(3);
    (void)peek;
    if (kind == 0) h.u.at(3) = 99.0;
    if (kind == 1) h.u.map()(3) = 99.0;  // an Eigen view is writable: taking it counts as a touch
    if (kind == 2) h.u.flat()(3) = 99.0;
    CHECK_THROWS_WITH_AS(tape.backward(), doctest::Contains("CTG-TAPE-003"), ctg::autodiff_error);
  }
  // Whole-field writes (fill, copy_from) are recorded: the tape keeps the
  // values the adjoints need, and the gradient is that of the launches.
  heat_problem clean;
  clean.reset();
  {
    ctg::tape tape(clean.loss);
    clean.run(1);
    tape.backward();
  }
  for (int kind = 0; kind < 2; ++kind) {
    CAPTURE(kind);
    heat_problem h;
    h.reset();
    ctg::tape tape(h.loss);
    h.run(1);
    if (kind == 0) h.u.fill(1.0);
    if (kind == 1) h.d.copy_from(std::vector<double>{0.5});
    tape.backward();
    CHECK(h.d.grad().at() == Approx(clean.d.grad().at()));
    for (int i = 0; i < cells; ++i) CHECK(h.u.grad().at(i) == Approx(clean.u.grad().at(i)));
  }
  heat_problem h;
  h.reset();
  ctg::tape tape(h.loss);
  h.run(1);
  double const peek = h.u.at(3) + h.d.at() + h.u.map().sum();  // reads only
  (void)peek;
  CHECK_NOTHROW(tape.backward());
}

TEST_CASE("a launch the tape did not record, and a loop bound changed after the forward, raise CTG-TAPE-003") {
  heat_problem h;
  h.reset();
  ctg::tape tape(h.loss);
  h.run(1);
  // Another thread has no tape: its launch is not recorded.
  std::thread other([&] { heat_step(h.v, h.u, h.d); });
  other.join();
  CHECK_THROWS_WITH_AS(tape.backward(), doctest::Contains("field 'u'"), ctg::autodiff_error);

  ctg::field<int, 0> n({.name = "n"});
  n.at() = 3;
  vec_t x({4}, {.name = "x"});
  scal_t loss({.name = "loss"});
  constexpr auto partial = ctg::kernel<"partial">([](auto x, auto n, auto loss) {
    return ctg::range(n(), [=](auto i) { return loss() += x[i] * x[i]; });
  });
  ctg::tape t2(loss);
  partial(x, n, loss);
  n.at() = 4;
  CHECK_THROWS_WITH_AS(t2.backward(), doctest::Contains("field 'n'"), ctg::autodiff_error);
}

TEST_CASE("k.grad alone: a field its adjoint reads changed since the forward launch") {
  vec_t x({4}, {.name = "x"}), y({4}, {.name = "y"});
  constexpr auto square = ctg::kernel<"square2">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = x[i] * x[i]; });
  });
  constexpr auto shift = ctg::kernel<"shift">([](auto x) {
    return ctg::range(x.size(), [=](auto i) { return x[i] = x[i] + 1.0; });
  });
  x.fill(0.5);
  square(x, y);
  y.grad().fill(1.0);
  CHECK_NOTHROW(square.grad(x, y));
  shift(x);
  CHECK_THROWS_WITH_AS(square.grad(x, y), doctest::Contains("CTG-TAPE-003"), ctg::autodiff_error);
  square(x, y);
  CHECK_NOTHROW(square.grad(x, y));
  x.fill(2.0);
  CHECK_THROWS_WITH_AS(square.grad(x, y), doctest::Contains("field 'x'"), ctg::autodiff_error);
}

TEST_CASE("k.grad alone: a later launch of the same kernel at another step overwrote the rows it reads") {
  // Two rows used in turn: step(u, 0, 1) reads row 0, step(u, 1, 0) then
  // overwrites it. The adjoint of the first step must not read the new row
  // 0 (it would give d/du0 of u0^4 as 45.5625 instead of 13.5).
  ctg::field<double, 2, ctg::grad> u({2, 1}, {.name = "u"});
  scal_t loss({.name = "loss"});
  constexpr auto step = ctg::kernel<"step_rows">([](auto u, int r, int w) {
    return ctg::range(u.shape(ctg::c<1>), [=](auto i) { return u(w, i) = u(r, i) * u(r, i); });
  });
  constexpr auto measure = ctg::kernel<"measure_row">([](auto u, auto loss, int r) {
    return ctg::range(u.shape(ctg::c<1>), [=](auto i) { return loss() += u(r, i); });
  });
  u.at(0, 0) = 1.5;
  step(u, 0, 1);
  step(u, 1, 0);
  measure(u, loss, 0);
  loss.grad().at() = 1.0;
  measure.grad(u, loss, 0);
  CHECK_NOTHROW(step.grad(u, 1, 0));  // its row 1 is as that launch left it
  CHECK_THROWS_WITH_AS(step.grad(u, 0, 1), doctest::Contains("field 'u'"), ctg::autodiff_error);

  // The same two steps on three rows: nothing is overwritten, the adjoint is exact.
  ctg::field<double, 2, ctg::grad> v({3, 1}, {.name = "v"});
  scal_t loss2({.name = "loss2"});
  v.at(0, 0) = 1.5;
  step(v, 0, 1);
  step(v, 1, 2);
  measure(v, loss2, 2);
  loss2.grad().at() = 1.0;
  measure.grad(v, loss2, 2);
  step.grad(v, 1, 2);
  step.grad(v, 0, 1);
  CHECK(v.grad().at(0, 0) == Approx(4.0 * 1.5 * 1.5 * 1.5));
}

#if CTG_HOST_WRITE_CHECKS
TEST_CASE("k.grad alone: elements the host wrote since the forward launch, through at() and map()") {
  // y = x * c: the adjoint reads c (x.grad = c * y.grad), and c is written
  // between the forward launch and k.grad.
  vec_t x({3}, {.name = "x"}), y({3}, {.name = "y"});
  ctg::field<double, 1> c({3}, {.name = "c"});
  constexpr auto scale = ctg::kernel<"scale_by">([](auto x, auto c, auto y) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = x[i] * c[i]; });
  });
  for (int i = 0; i < 3; ++i) {
    x.at(i) = 0.5 + i;
    c.at(i) = 1.5 - i;
  }
  scale(x, c, y);
  y.grad().fill(1.0);
  c.at(1) = 7.0;
  CHECK_THROWS_WITH_AS(scale.grad(x, c, y), doctest::Contains("field 'c'"), ctg::autodiff_error);

  // Read through a non-const at(), or written back unchanged: the gradient is c.
  scale(x, c, y);
  double sum = 0;
  for (int i = 0; i < 3; ++i) sum += c.at(i);
  c.at(2) = c.at(2);
  CHECK(sum == Approx(1.5 + 7.0 - 0.5));
  x.zero_grad();
  CHECK_NOTHROW(scale.grad(x, c, y));
  CHECK(x.grad().at(0) == Approx(1.5));
  CHECK(x.grad().at(1) == Approx(7.0));
  CHECK(x.grad().at(2) == Approx(-0.5));

  // Written, then launched forward again: k.grad compares with that launch.
  c.at(0) = -2.0;
  scale(x, c, y);
  y.grad().fill(1.0);  // the adjoint of y's store used up its gradient
  x.zero_grad();
  CHECK_NOTHROW(scale.grad(x, c, y));
  CHECK(x.grad().at(0) == Approx(-2.0));

  // Through the Eigen view.
  c.map()(2) += 1.0;
  CHECK_THROWS_WITH_AS(scale.grad(x, c, y), doctest::Contains("CTG-TAPE-003"), ctg::autodiff_error);
}

TEST_CASE("k.grad alone: an index field the host wrote since the forward launch") {
  // y = u[r]^2 with r read from a field: the adjoint would send the gradient
  // to u[r] at the new r.
  vec_t u({4}, {.name = "u"});
  scal_t y({.name = "y"});
  ctg::field<int, 0> r({.name = "r"});
  constexpr auto pick = ctg::kernel<"pick_square">([](auto u, auto r, auto y) { return y() = u[r()] * u[r()]; });
  for (int i = 0; i < 4; ++i) u.at(i) = 1.0 + i;
  r.at() = 1;
  pick(u, r, y);
  y.grad().at() = 1.0;
  r.at() = 3;
  CHECK_THROWS_WITH_AS(pick.grad(u, r, y), doctest::Contains("field 'r'"), ctg::autodiff_error);
  pick(u, r, y);  // forward again at the new index
  CHECK_NOTHROW(pick.grad(u, r, y));
  CHECK(u.grad().at(1) == 0.0);
  CHECK(u.grad().at(3) == Approx(2.0 * 4.0));
}

TEST_CASE("k.grad alone: the host writing rows a field indexed by the step reads later passes") {
  // step(u, r, w): u(w, i) = u(r, i)^2. Its adjoint at (0, 1) reads row 0;
  // the host writing row 2 does not change that, writing row 0 does.
  ctg::field<double, 2, ctg::grad> u({3, 2}, {.name = "u"});
  constexpr auto step = ctg::kernel<"square_row">([](auto u, int r, int w) {
    return ctg::range(u.shape(ctg::c<1>), [=](auto i) { return u(w, i) = u(r, i) * u(r, i); });
  });
  u.at(0, 0) = 1.5;
  u.at(0, 1) = -0.5;
  step(u, 0, 1);
  u.grad().at(1, 0) = 1.0;
  u.grad().at(1, 1) = 1.0;
  u.at(2, 0) = 4.0;
  CHECK_NOTHROW(step.grad(u, 0, 1));
  CHECK(u.grad().at(0, 0) == Approx(2.0 * 1.5));
  CHECK(u.grad().at(0, 1) == Approx(2.0 * -0.5));
  step(u, 0, 1);
  u.at(0, 1) = 3.0;
  CHECK_THROWS_WITH_AS(step.grad(u, 0, 1), doctest::Contains("field 'u'"), ctg::autodiff_error);

  // A launch that writes other rows before k.grad (the next step) does not
  // hide the host's write to row 0.
  u.at(0, 1) = -0.5;
  step(u, 0, 1);
  u.at(0, 1) = 3.0;
  step(u, 1, 2);
  CHECK_THROWS_WITH_AS(step.grad(u, 0, 1), doctest::Contains("field 'u'"), ctg::autodiff_error);

  // Nor does a launch of another kernel, whose adjoint reads nothing, that
  // writes row 2 between the forward launch and the host's write.
  constexpr auto copy_row = ctg::kernel<"copy_row">([](auto u, int r, int w) {
    return ctg::range(u.shape(ctg::c<1>), [=](auto i) { return u(w, i) = u(r, i); });
  });
  u.at(0, 1) = -0.5;
  step(u, 0, 1);
  copy_row(u, 1, 2);
  u.at(0, 0) = 2.0;
  CHECK_THROWS_WITH_AS(step.grad(u, 0, 1), doctest::Contains("field 'u'"), ctg::autodiff_error);
}
#endif

TEST_CASE("k.grad before any forward launch: CTG-TAPE-013 when the adjoint reads what the kernel writes") {
  // z = sin(y) after y = x^2 in one kernel: the adjoint reads y, which only
  // the forward launch computes (dz/dx = 2x cos(x^2)).
  vec_t x({2}, {.name = "x"}), y({2}, {.name = "y"}), z({2}, {.name = "z"});
  constexpr auto chain = ctg::kernel<"square_then_sin">([](auto x, auto y, auto z) {
    return ctg::block(ctg::range(x.size(), [=](auto i) { return y[i] = x[i] * x[i]; }),
                      ctg::range(x.size(), [=](auto i) { return z[i] = ctg::sin(y[i]); }));
  });
  x.at(0) = 1.2;
  x.at(1) = -0.4;
  z.grad().fill(1.0);
  CHECK_THROWS_WITH_AS(chain.grad(x, y, z), doctest::Contains("CTG-TAPE-013"), ctg::autodiff_error);
  CHECK_THROWS_WITH_AS(chain.grad(x, y, z), doctest::Contains("field 'y'"), ctg::autodiff_error);
  chain(x, y, z);
  CHECK_NOTHROW(chain.grad(x, y, z));
  CHECK(x.grad().at(0) == Approx(2 * 1.2 * std::cos(1.44)));
  CHECK(x.grad().at(1) == Approx(2 * -0.4 * std::cos(0.16)));

  // An adjoint that reads only what the caller gives it needs no forward
  // launch: d(x^2)/dx = 2x.
  vec_t u({2}, {.name = "u"}), w({2}, {.name = "w"});
  constexpr auto square = ctg::kernel<"square_alone">([](auto u, auto w) {
    return ctg::range(u.size(), [=](auto i) { return w[i] = u[i] * u[i]; });
  });
  u.at(0) = 3.0;
  w.grad().fill(1.0);
  CHECK_NOTHROW(square.grad(u, w));
  CHECK(u.grad().at(0) == Approx(6.0));

  // State indexed by the step: the adjoint of the step from row 0 to row 1
  // reads row 0, which the caller filled, not row 1, which the kernel
  // writes.
  ctg::field<double, 2, ctg::grad> s({2, 1}, {.name = "s"});
  constexpr auto step = ctg::kernel<"square_row_once">([](auto s, int r, int w) {
    return ctg::range(s.shape(ctg::c<1>), [=](auto i) { return s(w, i) = s(r, i) * s(r, i); });
  });
  s.at(0, 0) = 1.5;
  s.grad().at(1, 0) = 1.0;
  CHECK_NOTHROW(step.grad(s, 0, 1));
  CHECK(s.grad().at(0, 0) == Approx(3.0));
}

TEST_CASE("a recorded launch reading what a launch on another thread wrote raises CTG-TAPE-011") {
  scal_t x({.name = "x"}), u({.name = "u"}), w({.name = "w"}), loss({.name = "loss"});
  constexpr auto copy = ctg::kernel<"copy">([](auto a, auto b) { return b() = a(); });
  constexpr auto twice = ctg::kernel<"twice">([](auto a, auto b) { return b() = 2.0 * a(); });
  constexpr auto square = ctg::kernel<"square0">([](auto a, auto loss) { return loss() = a() * a(); });
  x.at() = 1.5;
  {
    // w = 2 u is computed on a thread the tape does not record: the tape
    // would take w for an input and give x no gradient (the right one is
    // d (2 x)^2 / dx = 8 x).
    ctg::tape tape(loss);
    copy(x, u);
    std::thread other([&] { twice(u, w); });
    other.join();
    CHECK_THROWS_WITH_AS(copy(w, u), doctest::Contains("CTG-TAPE-011"), ctg::autodiff_error);
    CHECK_THROWS_WITH_AS(copy(w, u), doctest::Contains("field 'w'"), ctg::autodiff_error);
  }
  {
    // Launched on the tape's thread, the same steps give the gradient.
    ctg::tape tape(loss);
    copy(x, u);
    twice(u, w);
    copy(w, u);
    square(u, loss);
    tape.backward();
    CHECK(x.grad().at() == Approx(8.0 * 1.5));
  }
  {
    // Values written on another thread before the tape starts are inputs;
    // so are values the host writes over them: no error, and no gradient
    // through them.
    std::thread before([&] { twice(x, w); });
    before.join();
    x.zero_grad();  // x is no launch's argument on this tape: backward() leaves its gradient
    ctg::tape tape(loss);
    square(w, loss);
    tape.backward();
    CHECK(w.grad().at() == Approx(2.0 * 3.0));
    CHECK(x.grad().at() == 0.0);
  }
  {
    ctg::tape tape(loss);
    std::thread other([&] { twice(x, w); });
    other.join();
    w.fill(3.0);
    square(w, loss);
    tape.backward();
    CHECK(w.grad().at() == Approx(6.0));
  }
}

TEST_CASE("k.fwd writes like any launch: k.grad alone and tapes see what it overwrote") {
  constexpr auto both = ctg::grad | ctg::dual;
  ctg::field<double, 1, both> x({4}, {.name = "x"});
  ctg::field<double, 0, both> loss({.name = "loss"});
  ctg::field<double, 1, ctg::dual> c({4}, {.name = "c"}), d({4}, {.name = "d"});
  constexpr auto weighted = ctg::kernel<"weighted">([](auto c, auto x, auto loss) {
    return ctg::range(x.size(), [=](auto i) { return loss() += c[i] * x[i] * x[i]; });
  });
  constexpr auto assign = ctg::kernel<"assign">([](auto from, auto to) {
    return ctg::range(to.size(), [=](auto i) { return to[i] = from[i]; });
  });
  for (int i = 0; i < 4; ++i) x.at(i) = 1.0 + i, c.at(i) = 0.5, d.at(i) = 10.0;

  // k.grad alone after a k.fwd overwrote a field its adjoint reads: the
  // adjoint would use x = 10 (gradient 2 * 0.5 * 10), not x = 1 (2 * 0.5 * 1).
  weighted(c, x, loss);
  assign.fwd(d, x);
  loss.grad().at() = 1.0;
  CHECK_THROWS_WITH_AS(weighted.grad(c, x, loss), doctest::Contains("CTG-TAPE-003"), ctg::autodiff_error);

  // Under a tape, a k.fwd on fields without gradients is recorded: the tape
  // keeps the weights it overwrites, and the gradient uses those the
  // forward pass used.
  for (int i = 0; i < 4; ++i) x.at(i) = 1.0 + i;
  loss.at() = 0.0;
  {
    ctg::tape tape(loss);
    weighted(c, x, loss);
    assign.fwd(d, c);
    tape.backward();
  }
  for (int i = 0; i < 4; ++i) CHECK(x.grad().at(i) == Approx(2.0 * 0.5 * (1.0 + i)));

  // On fields with gradients it has no adjoint to record: CTG-TAPE-010.
  ctg::tape tape(loss);
  CHECK_THROWS_WITH_AS(assign.fwd(c, x), doctest::Contains("CTG-TAPE-010"), ctg::autodiff_error);
  CHECK_THROWS_WITH_AS(weighted.fwd(c, x, loss), doctest::Contains("'weighted'"), ctg::autodiff_error);
}

TEST_CASE("whole-field host writes on a tape: a grid cleared with fill, state copied with copy_from") {
  // y = x; two steps of { grid = 0; grid += y; y = y + grid }: y = 4 x,
  // loss = y^2, d loss / dx = 32 x. The grid's gradient from the second step
  // must not reach the first: fill overwrites the grid, so the adjoint
  // clears its gradient there, as the adjoint of a clearing kernel does.
  scal_t x({.name = "x"}), y({.name = "y"}), grid({.name = "grid"}), loss({.name = "loss"});
  constexpr auto init = ctg::kernel<"init0">([](auto x, auto y) { return y() = x(); });
  constexpr auto p2g = ctg::kernel<"p2g0">([](auto y, auto g) { return g() += y(); });
  constexpr auto g2p = ctg::kernel<"g2p0">([](auto y, auto g) { return y() = y() + g(); });
  constexpr auto square = ctg::kernel<"square1">([](auto y, auto loss) { return loss() = y() * y(); });
  x.at() = 1.25;
  {
    ctg::tape tape(loss);
    init(x, y);
    for (int s = 0; s < 2; ++s) {
      grid.fill(0.0);
      p2g(y, grid);
      g2p(y, grid);
    }
    square(y, loss);
    tape.backward();
  }
  CHECK(x.grad().at() == Approx(32.0 * 1.25));

  // u = x; two steps of { w = 2 u; u <- w }: u = 4 x, d u^2 / dx = 32 x. The
  // copy passes u's gradient back to w.
  scal_t u({.name = "u"}), w({.name = "w"});
  constexpr auto twice = ctg::kernel<"twice1">([](auto a, auto b) { return b() = 2.0 * a(); });
  {
    ctg::tape tape(loss);
    init(x, u);
    for (int s = 0; s < 2; ++s) {
      twice(u, w);
      u.copy_from(w);
    }
    square(u, loss);
    tape.backward();
  }
  CHECK(x.grad().at() == Approx(32.0 * 1.25));

  // Values the host writes over a field are constants: no gradient flows
  // to what the field held before (u = x, then u <- 3: d (u^2) / dx = 0).
  {
    ctg::tape tape(loss);
    init(x, u);
    u.fill(3.0);
    square(u, loss);
    tape.backward();
  }
  CHECK(x.grad().at() == 0.0);
  CHECK(u.grad().at() == 0.0);
}

TEST_CASE("elements the host writes into a field with a gradient between recorded launches raise CTG-TAPE-012") {
  scal_t x({.name = "x"}), y({.name = "y"}), loss({.name = "loss"});
  vec_t grid({3}, {.name = "grid"});
  constexpr auto init = ctg::kernel<"init2">([](auto x, auto y) { return y() = x(); });
  constexpr auto p2g = ctg::kernel<"p2g2">([](auto y, auto g) {
    return ctg::range(g.size(), [=](auto i) { return g[i] += y(); });
  });
  constexpr auto g2p = ctg::kernel<"g2p2">([](auto y, auto g) { return y() = y() + g[0] + g[2]; });
  constexpr auto square = ctg::kernel<"square2">([](auto y, auto loss) { return loss() = y() * y(); });
  x.at() = 0.75;
  for (int how = 0; how < 2; ++how) {
    CAPTURE(how);
    ctg::tape tape(loss);
    init(x, y);
    grid.fill(0.0);
    p2g(y, grid);
    g2p(y, grid);
    // Cleared element by element: the gradient of the second step's grid
    // would reach the first step's through the elements.
    if (how == 0) grid.map().setZero();
    if (how == 1)
      for (int i = 0; i < 3; ++i) grid.at(i) = 0.0;
    CHECK_THROWS_WITH_AS(p2g(y, grid), doctest::Contains("CTG-TAPE-012"), ctg::autodiff_error);
  }
  // Reading through a non-const handle between launches is no write: the
  // rollout goes on, and y = 3 x after each step gives d (9 x)^2 / dx = 162 x.
  {
    ctg::tape tape(loss);
    init(x, y);
    double seen = 0;
    for (int s = 0; s < 2; ++s) {
      grid.fill(0.0);
      p2g(y, grid);
      seen += grid.at(1) + grid.map().sum();
      g2p(y, grid);
    }
    square(y, loss);
    tape.backward();
    CHECK(seen > 0);
  }
  CHECK(x.grad().at() == Approx(162.0 * 0.75));
}

TEST_CASE("k.grad alone finds its forward launch among thousands of the kernel's launches on other fields") {
  constexpr auto square = ctg::kernel<"square3">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = x[i] * x[i]; });
  });
  constexpr auto shift = ctg::kernel<"shift3">([](auto x) {
    return ctg::range(x.size(), [=](auto i) { return x[i] = x[i] + 1.0; });
  });
  vec_t x({2}, {.name = "x"}), y({2}, {.name = "y"});
  std::vector<vec_t> others;
  for (int k = 0; k < 40; ++k) others.push_back(vec_t({2}, {.name = "other"}));
  vec_t out({2}, {.name = "out"});
  x.fill(1.0);
  square(x, y);
  shift(x);  // x changes after the forward launch: its adjoint would read 2, not 1
  for (int round = 0; round < 3; ++round)
    for (auto const& o : others) square(o, out);  // 40 other fields, 3 times each
  y.grad().fill(1.0);
  CHECK_THROWS_WITH_AS(square.grad(x, y), doctest::Contains("CTG-TAPE-003"), ctg::autodiff_error);
}

TEST_CASE("a kernel's forward records: the last 4096 distinct launches, updated in place") {
  ctg::detail::forward_records records;
  int marks[5000];
  auto list = [&](int k) {
    ctg::detail::buffer_list b;
    b.push(&marks[k % 5000]);
    return b;
  };
  for (int k = 0; k < 5000; ++k) records.remember(list(k), std::uint64_t(k % 7), std::uint64_t(10 + k));
  CHECK(records.size() == ctg::detail::forward_records::kept);
  for (int k = 0; k < 5000; ++k) {
    CAPTURE(k);
    auto const stamp = records.stamp_of(list(k), std::uint64_t(k % 7));
    if (k < 5000 - 4096)
      CHECK(!stamp.has_value());
    else
      CHECK(stamp == std::uint64_t(10 + k));
  }
  // A launch again makes its record the latest: it outlives those launched
  // after its first launch (least recently used first out).
  int filler[4096];
  auto filler_list = [&](int k) {
    ctg::detail::buffer_list b;
    b.push(&filler[k]);
    return b;
  };
  records.remember(list(904), 904 % 7, 777);
  for (int k = 0; k < 4095; ++k) records.remember(filler_list(k), 0, std::uint64_t(k));
  CHECK(records.stamp_of(list(904), 904 % 7) == 777u);
  records.remember(filler_list(4095), 0, 1);
  CHECK(!records.stamp_of(list(904), 904 % 7).has_value());
  for (int k = 0; k < 5000; ++k) records.remember(list(k), std::uint64_t(k % 7), std::uint64_t(10 + k));
  // Launched again: one record, its stamp the latest.
  records.remember(list(4999), 4999 % 7, 99999);
  CHECK(records.stamp_of(list(4999), 4999 % 7) == 99999u);
  CHECK(records.size() == ctg::detail::forward_records::kept);
  // Other numbers on the same buffers: the latest launch on them.
  records.remember(list(4998), 100, 123456);
  CHECK(records.stamp_of(list(4998), 555) == 123456u);
  CHECK(records.stamp_of(list(4998), 4998 % 7) == std::uint64_t(10 + 4998));
}

TEST_CASE("host copies on a tape: into itself, from a field no launch has used, partly overwritten") {
  scal_t x({.name = "x"}), u({.name = "u"}), loss({.name = "loss"});
  constexpr auto init = ctg::kernel<"init4">([](auto x, auto y) { return y() = x(); });
  constexpr auto square = ctg::kernel<"square4">([](auto y, auto loss) { return loss() = y() * y(); });
  x.at() = 1.5;
  {
    // A field copied into itself is unchanged: d (x^2) / dx = 2 x.
    ctg::tape tape(loss);
    init(x, u);
    u.copy_from(u);
    square(u, loss);
    tape.backward();
    CHECK(x.grad().at() == Approx(3.0));
  }
  {
    // A copy from a field no launch has used yet (a learned initial state)
    // passes the gradient to it, in place of what its gradient held.
    x.grad().at() = 7.0;
    ctg::tape tape(loss);
    u.copy_from(x);
    square(u, loss);
    tape.backward();
    CHECK(x.grad().at() == Approx(3.0));
  }
  {
    // An element the host wrote, then a launch that writes another one: the
    // launch must not hide the change from the read after it.
    vec_t f({2}, {.name = "f"});
    constexpr auto spread = ctg::kernel<"spread4">([](auto x, auto f) {
      return ctg::range(f.size(), [=](auto i) { return f[i] = x(); });
    });
    constexpr auto first = ctg::kernel<"first4">([](auto x, auto f) { return f[0] = 2.0 * x(); });
    ctg::tape tape(loss);
    spread(x, f);
    f.at(1) = 5.0;
    CHECK_THROWS_WITH_AS(first(x, f), doctest::Contains("CTG-TAPE-012"), ctg::autodiff_error);
  }
}

TEST_CASE("CTG-TAPE-012 before a checkpointed rollout's first launch on the field") {
  scal_t x({.name = "x"}), p({.name = "p"}), loss({.name = "loss"});
  constexpr auto init = ctg::kernel<"init5">([](auto x, auto p) { return p() = x(); });
  constexpr auto grow = ctg::kernel<"grow5">([](auto p) { return p() = p() * 1.1; });
  x.at() = 0.5;
  ctg::tape tape(loss);
  init(x, p);
  p.at() = 0.75;  // a constant now: the gradient to x must stop here
  CHECK_THROWS_WITH_AS(tape.rollout(4, [&](int) { grow(p); }, ctg::checkpoint{.snapshots = 2}),
                       doctest::Contains("CTG-TAPE-012"), ctg::autodiff_error);
}

TEST_CASE("host writes around checkpointed rollouts: checked after them, whole-field writes pass, reads pass") {
  scal_t x({.name = "x"}), p({.name = "p"}), loss({.name = "loss"});
  constexpr auto init = ctg::kernel<"init6">([](auto x, auto p) { return p() = x(); });
  constexpr auto times = ctg::kernel<"times6">([](auto p, auto x) { return p() = p() * x(); });
  constexpr auto square = ctg::kernel<"square6">([](auto p, auto loss) { return loss() = p() * p(); });
  constexpr auto add = ctg::kernel<"add6">([](auto p, auto loss) { return loss() += 2.0 * p(); });
  x.at() = 1.2;
  SUBCASE("an element written after a checkpointed rollout that first used the field") {
    ctg::tape tape(loss);
    p.fill(1.0);
    tape.rollout(4, [&](int) { times(p, x); }, ctg::checkpoint{.snapshots = 2});
    p.at() = 0.75;
    CHECK_THROWS_WITH_AS(square(p, loss), doctest::Contains("CTG-TAPE-012"), ctg::autodiff_error);
  }
  SUBCASE("reads through a non-const handle inside and between checkpointed rollouts") {
    // p = x^9 after init and two rollouts of 4 steps: d (x^18) / dx = 18 x^17.
    ctg::tape tape(loss);
    init(x, p);
    double seen = x.at() + p.at();
    tape.rollout(4, [&](int) {
      times(p, x);
      seen += p.at();
    }, ctg::checkpoint{.snapshots = 2});
    seen += x.at() + p.at();
    tape.rollout(4, [&](int) { times(p, x); }, ctg::checkpoint{.snapshots = 2});
    square(p, loss);
    tape.backward();
    CHECK(seen > 0);
    CHECK(x.grad().at() == Approx(18.0 * std::pow(1.2, 17)));
  }
  SUBCASE("an element write, then the whole field written again") {
    // loss = 2 p with p = x, then p <- 0.5: d loss / dx = 2.
    ctg::tape tape(loss);
    loss.fill(0.0);
    init(x, p);
    add(p, loss);
    p.at() = 3.0;
    p.fill(0.5);
    add(p, loss);
    tape.backward();
    CHECK(x.grad().at() == Approx(2.0));
  }
  SUBCASE("a rollout that fails on its budget, then an element write") {
    ctg::tape tape(loss);
    init(x, p);
    CHECK_THROWS_WITH_AS(tape.rollout(4, [&](int) { times(p, x); }, ctg::checkpoint{.bytes = 1}),
                         doctest::Contains("CTG-TAPE-005"), ctg::autodiff_error);
    p.at() = 0.75;
    CHECK_THROWS_WITH_AS(square(p, loss), doctest::Contains("CTG-TAPE-012"), ctg::autodiff_error);
  }
}
