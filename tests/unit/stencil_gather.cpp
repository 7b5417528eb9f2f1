// Stencil adjoints as gathers (ad/gather.hpp): the adjoint of an offload
// whose differentiable reads are shifts of the loop index runs over the
// elements the reads reach, each replaying the iterations that read it.
// Every gradient is checked against a hand-written adjoint or against the
// plain adjoint of the same body (the race-checking backend, which never
// gathers), on one thread and on several; which kernels gather is asserted,
// so that a test of the gather cannot pass on the plain path.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

#include "ad_test_support.hpp"

using doctest::Approx;
using namespace ctg::literals;

namespace {


// The 1-D wave: row t + 1 from rows t and t - 1, zero outside the domain.
constexpr auto wave_body = [](auto u, int t, double c) {
  return ctg::range(u.shape(1_c), [=](auto i) {
    auto const n = u.shape(1_c);
    return u(t + 1, i) = 2.0 * u(t, i) - u(t - 1, i) +
                         c * (ctg::select(i > 0, u(t, i - 1), 0.0) - 2.0 * u(t, i) +
                              ctg::select(i < n - 1, u(t, i + 1), 0.0));
  });
};
auto wave = ctg::kernel<"wave">(wave_body);

}  // namespace

TEST_CASE("stencil gather: the wave's adjoint against the hand-written one, every row, 1 and 3 threads") {
  constexpr int n = 257, steps = 12;
  constexpr double c = 0.3;
  using field = ctg::field<double, 2, ctg::grad>;
  static_assert(decltype(wave)::gathers_adjoint<field, int, double>());
  for (int threads : {1, 3}) {
    ad_test::thread_scope scope(threads);
    field u({steps + 2, n}, {.name = "u"});
    for (int i = 0; i < n; ++i) {
      u.at(0, i) = std::sin(0.05 * i);
      u.at(1, i) = std::cos(0.03 * i);
    }
    for (int t = 1; t <= steps; ++t) wave(u, t, c);
    std::vector<std::vector<double>> g(steps + 2, std::vector<double>(n, 0.0));
    for (int i = 0; i < n; ++i) g[steps + 1][i] = u.grad().at(steps + 1, i) = 1.0 + 0.25 * std::cos(0.2 * i);
    for (int t = steps; t >= 1; --t) wave.grad(u, t, c);
    // By hand: row t + 1's gradient goes to rows t and t - 1, then is cleared.
    for (int t = steps; t >= 1; --t) {
      std::vector<double> const next = g[t + 1];
      for (int i = 0; i < n; ++i) {
        double const left = i > 0 ? next[i - 1] : 0.0, right = i < n - 1 ? next[i + 1] : 0.0;
        g[t][i] += (2.0 - 2.0 * c) * next[i] + c * (left + right);
        g[t - 1][i] -= next[i];
      }
      std::fill(g[t + 1].begin(), g[t + 1].end(), 0.0);
    }
    for (int t = 0; t < steps + 2; ++t)
      for (int i = 0; i < n; ++i) REQUIRE(u.grad().at(t, i) == Approx(g[t][i]).epsilon(1e-12).scale(1.0));
  }
}

TEST_CASE("stencil gather: a nonlinear stencil with a shift read at launch, locals and if_ arms, against finite differences") {
  // y[i] from x[i - k], x[i], x[i + k] (k a launch argument), through a
  // local and an if_ whose arms store into different fields.
  auto k = ctg::kernel<"blur">([](auto x, auto y, auto z, int shift) {
    return ctg::range(shift, x.size() - shift, [=](auto i) {
      return ctg::let(x[i - shift] * x[i + shift], [=](auto p) {
        return ctg::if_(x[i] > 0.0, y[i] = ctg::sin(p) + x[i] * x[i], z[i] = ctg::exp(0.5 * p) - x[i]);
      });
    });
  });
  using f1 = ctg::field<double, 1, ctg::grad>;
  static_assert(decltype(k)::gathers_adjoint<f1, f1, f1, int>());
  constexpr int n = 61, shift = 2;
  auto x_at = [](int i) { return std::sin(0.7 * i) + 0.05 * i - 1.0; };
  // loss = sum_i wy[i] y[i] + wz[i] z[i], differenced in plain C++.
  auto wy = [](int i) { return 1.0 + 0.1 * i; };
  auto wz = [](int i) { return 0.5 - 0.02 * i; };
  auto loss = [&](std::vector<double> const& x) {
    double s = 0;
    for (int i = shift; i < n - shift; ++i) {
      double const p = x[std::size_t(i - shift)] * x[std::size_t(i + shift)];
      if (x[std::size_t(i)] > 0.0)
        s += wy(i) * (std::sin(p) + x[std::size_t(i)] * x[std::size_t(i)]);
      else
        s += wz(i) * (std::exp(0.5 * p) - x[std::size_t(i)]);
    }
    return s;
  };
  std::vector<double> x0(n);
  for (int i = 0; i < n; ++i) x0[std::size_t(i)] = x_at(i);
  std::vector<double> const expected = ad_test::fd_gradient(loss, x0);
  for (int threads : {1, 2, 4}) {
    ad_test::thread_scope scope(threads);
    f1 x({n}, {.name = "x"}), y({n}, {.name = "y"}), z({n}, {.name = "z"});
    for (int i = 0; i < n; ++i) x.at(i) = x0[std::size_t(i)];
    k(x, y, z, shift);
    for (int i = 0; i < n; ++i) y.grad().at(i) = wy(i), z.grad().at(i) = wz(i);
    k.grad(x, y, z, shift);
    for (int i = 0; i < n; ++i) {
      CHECK(x.grad().at(i) == Approx(expected[std::size_t(i)]).epsilon(1e-6).scale(1.0));
      // The stores' seeds are cleared where an arm stored, kept elsewhere.
      bool const stored = i >= shift && i < n - shift;
      CHECK(y.grad().at(i) == (stored && x0[std::size_t(i)] > 0.0 ? 0.0 : wy(i)));
      CHECK(z.grad().at(i) == (stored && x0[std::size_t(i)] <= 0.0 ? 0.0 : wz(i)));
    }
  }
}

TEST_CASE("stencil gather: 2-D five-point heat steps on a time-indexed field agree with the plain adjoint") {
  // Interior points (a + 1, b + 1) of an (nx - 2) x (ny - 2) box; kappa a
  // plain number. The same body under ctg::race_check runs the plain adjoint.
  constexpr auto heat_body = [](auto u, double kappa, int t) {
    return ctg::ndrange(u.shape(1_c) - 2, u.shape(2_c) - 2, [=](auto a, auto b) {
      return u(t + 1, a + 1, b + 1) =
                 u(t, a + 1, b + 1) + kappa * (u(t, a, b + 1) + u(t, a + 2, b + 1) + u(t, a + 1, b) +
                                               u(t, a + 1, b + 2) - 4.0 * u(t, a + 1, b + 1) * u(t, a + 1, b + 1));
    });
  };
  auto gathered = ctg::kernel<"heat">(heat_body);
  auto raced = ctg::kernel<"heat_raced", ctg::race_check>(heat_body);
  using f3 = ctg::field<double, 3, ctg::grad>;
  static_assert(decltype(gathered)::gathers_adjoint<f3, double, int>());
  static_assert(!decltype(raced)::gathers_adjoint<f3, double, int>());
  constexpr int steps = 4, nx = 13, ny = 9;
  auto run = [&](auto& k, int threads, f3& u) {
    ad_test::thread_scope scope(threads);
    for (int i = 0; i < nx; ++i)
      for (int j = 0; j < ny; ++j) u.at(0, i, j) = 0.1 * std::sin(0.4 * i + 0.3 * j);
    for (int t = 0; t < steps; ++t) k(u, 0.15, t);
    for (int i = 0; i < nx; ++i)
      for (int j = 0; j < ny; ++j) u.grad().at(steps, i, j) = std::cos(0.1 * i * j);
    for (int t = steps - 1; t >= 0; --t) k.grad(u, 0.15, t);
  };
  for (int threads : {1, 3}) {
    f3 ua({steps + 1, nx, ny}, {.name = "u"}), ub({steps + 1, nx, ny}, {.name = "u"});
    run(gathered, threads, ua);
    run(raced, 1, ub);
    for (int t = 0; t <= steps; ++t)
      for (int i = 0; i < nx; ++i)
        for (int j = 0; j < ny; ++j)
          REQUIRE(ua.grad().at(t, i, j) == Approx(ub.grad().at(t, i, j)).epsilon(1e-12).scale(1.0));
  }
}

TEST_CASE("stencil gather: a differentiable number read by every iteration keeps the plain adjoint") {
  // kappa[0] is one element every iteration reads: its gradient is a sum
  // over the iterations, not a tap of a stencil, so the body is not gathered.
  constexpr auto body = [](auto u, auto v, auto kappa) {
    return ctg::range(1, u.size() - 1, [=](auto i) { return v[i] = kappa[0] * (u[i - 1] - 2.0 * u[i] + u[i + 1]); });
  };
  auto k = ctg::kernel<"smooth">(body);
  auto raced = ctg::kernel<"smooth_raced", ctg::race_check>(body);
  using f1 = ctg::field<double, 1, ctg::grad>;
  static_assert(!decltype(k)::gathers_adjoint<f1, f1, f1>());
  constexpr int n = 50;
  auto run = [&](auto& kern, f1& u, f1& v, f1& kappa) {
    ad_test::thread_scope scope(2);
    for (int i = 0; i < n; ++i) u.at(i) = std::sin(0.2 * i) * i;
    kappa.at(0) = 0.7;
    kern(u, v, kappa);
    for (int i = 0; i < n; ++i) v.grad().at(i) = 1.0 / (1 + i);
    kern.grad(u, v, kappa);
  };
  f1 ua({n}, {.name = "u"}), va({n}, {.name = "v"}), ka({1}, {.name = "kappa"});
  f1 ub({n}, {.name = "u"}), vb({n}, {.name = "v"}), kb({1}, {.name = "kappa"});
  run(k, ua, va, ka);
  run(raced, ub, vb, kb);
  CHECK(ka.grad().at(0) == Approx(kb.grad().at(0)).epsilon(1e-12));
  for (int i = 0; i < n; ++i) CHECK(ua.grad().at(i) == Approx(ub.grad().at(i)).epsilon(1e-12).scale(1.0));
}

TEST_CASE("stencil gather: vector elements read by component, and a field read at both sides of its axis") {
  // Two fields: p holds 2-vectors (read by component at i - 1 and i + 1),
  // s scalars read at i + 2 and i; the sums of products go to q.
  constexpr auto body = [](auto p, auto s, auto q) {
    return ctg::range(1, q.size() - 2, [=](auto i) {
      return q[i] = p[i - 1][0_c] * s[i + 2] + p[i + 1][1_c] * s[i] + ctg::cos(p[i][0_c]);
    });
  };
  auto gathered = ctg::kernel<"pairs">(body);
  auto raced = ctg::kernel<"pairs_raced", ctg::race_check>(body);
  using v2 = ctg::field<Eigen::Vector2d, 1, ctg::grad>;
  using f1 = ctg::field<double, 1, ctg::grad>;
  static_assert(decltype(gathered)::gathers_adjoint<v2, f1, f1>());
  constexpr int n = 40;
  auto run = [&](auto& k, int threads, v2& p, f1& s, f1& q) {
    ad_test::thread_scope scope(threads);
    for (int i = 0; i < n; ++i) {
      p.at(i) = Eigen::Vector2d(std::sin(0.3 * i), 0.2 * i - 1.0);
      s.at(i) = std::cos(0.17 * i);
    }
    k(p, s, q);
    for (int i = 0; i < n; ++i) q.grad().at(i) = 1.0 + 0.01 * i * i;
    k.grad(p, s, q);
  };
  for (int threads : {1, 2}) {
    v2 pa({n}, {.name = "p"}), pb({n}, {.name = "p"});
    f1 sa({n}, {.name = "s"}), sb({n}, {.name = "s"}), qa({n}, {.name = "q"}), qb({n}, {.name = "q"});
    run(gathered, threads, pa, sa, qa);
    run(raced, 1, pb, sb, qb);
    for (int i = 0; i < n; ++i) {
      CHECK(pa.grad().at(i)[0] == Approx(pb.grad().at(i)[0]).epsilon(1e-13).scale(1.0));
      CHECK(pa.grad().at(i)[1] == Approx(pb.grad().at(i)[1]).epsilon(1e-13).scale(1.0));
      CHECK(sa.grad().at(i) == Approx(sb.grad().at(i)).epsilon(1e-13).scale(1.0));
      CHECK(qa.grad().at(i) == qb.grad().at(i));
    }
    // By hand at one interior element: s[7] is read as s[i + 2] by i = 5
    // (times p[4][0]) and as s[i] by i = 7 (times p[8][1]).
    double const expected = (1.0 + 0.01 * 25) * std::sin(0.3 * 4) + (1.0 + 0.01 * 49) * (0.2 * 8 - 1.0);
    CHECK(sa.grad().at(7) == Approx(expected).epsilon(1e-13));
  }
}

TEST_CASE("stencil gather: a launch whose store meets its reads runs the plain adjoint, with the same result") {
  // u(s, i) = 2 u(t, i) + u(r, i - 1) u(r, i + 1). With s == t the store
  // updates its own element in place (valid: its value is not needed), and
  // the seeds of row s are elements a read gathers into: that launch runs
  // the plain adjoint. With s != t it gathers. Both against a hand adjoint.
  auto k = ctg::kernel<"rows">([](auto u, int s, int t, int r) {
    return ctg::range(1, u.shape(1_c) - 1,
                      [=](auto i) { return u(s, i) = 2.0 * u(t, i) + u(r, i - 1) * u(r, i + 1); });
  });
  using f2 = ctg::field<double, 2, ctg::grad>;
  static_assert(decltype(k)::gathers_adjoint<f2, int, int, int>());
  constexpr int n = 11;
  for (int threads : {1, 2}) {
    ad_test::thread_scope scope(threads);
    for (int t : {0, 1}) {  // 0: in place, 1: from another row
      constexpr int s = 0, r = 2;
      f2 u({3, n}, {.name = "u"});
      std::vector<double> w(n), g(n);
      for (int i = 0; i < n; ++i) {
        u.at(0, i) = 0.3 * i;
        u.at(1, i) = 1.0 - 0.1 * i;
        w[std::size_t(i)] = u.at(r, i) = std::cos(0.5 * i);
      }
      k(u, s, t, r);
      for (int i = 0; i < n; ++i) g[std::size_t(i)] = u.grad().at(s, i) = 1.0 + 0.2 * i;
      k.grad(u, s, t, r);
      for (int i = 0; i < n; ++i) {
        bool const stored = i >= 1 && i <= n - 2;
        double const seed = g[std::size_t(i)];
        // Row s: its seed is cleared where stored; row t gets 2 * seed.
        double const row_s = (stored ? 0.0 : seed) + (t == s && stored ? 2.0 * seed : 0.0);
        CHECK(u.grad().at(s, i) == Approx(row_s));
        if (t != s) CHECK(u.grad().at(t, i) == Approx(stored ? 2.0 * seed : 0.0));
        // Row r: read as u(r, i - 1) by i + 1 and as u(r, i + 1) by i - 1.
        double expected = 0.0;
        if (i + 1 >= 1 && i + 1 <= n - 2) expected += g[std::size_t(i + 1)] * w[std::size_t(i + 2)];
        if (i - 1 >= 1 && i - 1 <= n - 2) expected += g[std::size_t(i - 1)] * w[std::size_t(i - 2)];
        CHECK(u.grad().at(r, i) == Approx(expected));
      }
    }
  }
}

TEST_CASE("stencil gather: index guards inside the loop, their interval in the middle, at the edges, empty or wider") {
  // The guards' interval (a select on i > lo and on i < hi, an if_ on
  // a <= i && i < b, all launch arguments) decides which replays run with
  // the guards known true (cpu::run_gather_chunk); a select on a value
  // stays a test there. Against finite differences of the same loss in
  // plain C++, for guards that cut the loop anywhere.
  auto k = ctg::kernel<"guarded">([](auto x, auto y, auto z, int lo, int hi, int a, int b) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(ctg::select(i > lo, x[i - 1], 0.25) * ctg::select(i < hi, x[i + 1], 0.5), [=](auto p) {
        // An arm with its own local, and a select on a value beside them.
        return ctg::if_(a <= i && i < b, ctg::let(ctg::sin(p), [=](auto q) {
                          return y[i] = q * q + ctg::select(x[i] > 0.3, x[i] * x[i], 0.5 * x[i]);
                        }),
                        z[i] = p * x[i] - 2.0 * x[i]);
      });
    });
  });
  using f1 = ctg::field<double, 1, ctg::grad>;
  static_assert(decltype(k)::gathers_adjoint<f1, f1, f1, int, int, int, int>());
  constexpr int n = 70;
  auto x_at = [](int i) { return std::sin(0.37 * i) + 0.02 * i; };
  auto wy = [](int i) { return 1.0 + 0.05 * i; };
  auto wz = [](int i) { return 0.75 - 0.01 * i; };
  struct guards {
    int lo, hi, a, b;
  };
  for (guards const gs : {guards{3, n - 5, 2, n - 2}, guards{0, n - 1, 0, n}, guards{n, 0, 5, 5},
                          guards{0, n - 1, -1, n + 7}, guards{40, 10, 30, 31}}) {
    auto loss = [&](std::vector<double> const& x) {
      double s = 0;
      for (int i = 0; i < n; ++i) {
        double const left = i > gs.lo ? x[std::size_t(i - 1)] : 0.25;
        double const right = i < gs.hi ? x[std::size_t(i + 1)] : 0.5;
        double const p = left * right, xi = x[std::size_t(i)];
        double const q = std::sin(p);
        s += gs.a <= i && i < gs.b ? wy(i) * (q * q + (xi > 0.3 ? xi * xi : 0.5 * xi)) : wz(i) * (p * xi - 2.0 * xi);
      }
      return s;
    };
    std::vector<double> x0(n);
    for (int i = 0; i < n; ++i) x0[std::size_t(i)] = x_at(i);
    std::vector<double> const expected = ad_test::fd_gradient(loss, x0);
    for (int threads : {1, 2, 3}) {
      CAPTURE(gs.lo);
      CAPTURE(gs.hi);
      CAPTURE(gs.a);
      CAPTURE(threads);
      ad_test::thread_scope scope(threads);
      f1 x({n}, {.name = "x"}), y({n}, {.name = "y"}), z({n}, {.name = "z"});
      for (int i = 0; i < n; ++i) x.at(i) = x0[std::size_t(i)];
      k(x, y, z, gs.lo, gs.hi, gs.a, gs.b);
      for (int i = 0; i < n; ++i) y.grad().at(i) = wy(i), z.grad().at(i) = wz(i);
      k.grad(x, y, z, gs.lo, gs.hi, gs.a, gs.b);
      for (int i = 0; i < n; ++i) {
        CAPTURE(i);
        CHECK(x.grad().at(i) == Approx(expected[std::size_t(i)]).epsilon(1e-6).scale(1.0));
        bool const first_arm = gs.a <= i && i < gs.b;
        CHECK(y.grad().at(i) == (first_arm ? 0.0 : wy(i)));
        CHECK(z.grad().at(i) == (first_arm ? wz(i) : 0.0));
      }
    }
  }
}

TEST_CASE("stencil gather: seeds read across chunk boundaries are cleared only after both sides, on many chunks") {
  // y[i] = x[i - 2] x[i + 3] + sin(x[i]): iteration i's seed is read by
  // the elements i - 3 .. i + 2. Each chunk of elements clears the seeds
  // only it reads, and the calling thread those read from both sides of a
  // boundary. Launches above the pool's inline size (2048), with up to 64
  // threads, so that chunks are shorter than the taps' spread.
  auto k = ctg::kernel<"taps">([](auto x, auto y) {
    return ctg::range(2, x.size() - 3, [=](auto i) { return y[i] = x[i - 2] * x[i + 3] + ctg::sin(x[i]); });
  });
  using f1 = ctg::field<double, 1, ctg::grad>;
  static_assert(decltype(k)::gathers_adjoint<f1, f1>());
  for (int n : {2100, 5003}) {
    auto x_at = [](int i) { return std::cos(0.013 * i) + 0.001 * i; };
    auto w_at = [](int i) { return 1.0 + 0.5 * std::sin(0.07 * i); };
    for (int threads : {1, 2, 3, 64}) {
      CAPTURE(n);
      CAPTURE(threads);
      ad_test::thread_scope scope(threads);
      f1 x({n}, {.name = "x"}), y({n}, {.name = "y"});
      for (int i = 0; i < n; ++i) x.at(i) = x_at(i);
      k(x, y);
      for (int i = 0; i < n; ++i) y.grad().at(i) = w_at(i);
      k.grad(x, y);
      auto stored = [&](int i) { return i >= 2 && i < n - 3; };
      int wrong_x = 0, wrong_y = 0;
      for (int j = 0; j < n; ++j) {
        // By hand: x[j] is read as x[i - 2] by i = j + 2, as x[i + 3] by
        // i = j - 3, and as x[i] by i = j.
        double expected = 0.0;
        if (stored(j + 2)) expected += w_at(j + 2) * x_at(j + 5);
        if (stored(j - 3)) expected += w_at(j - 3) * x_at(j - 5);
        if (stored(j)) expected += w_at(j) * std::cos(x_at(j));
        if (x.grad().at(j) != Approx(expected).epsilon(1e-12).scale(1.0)) ++wrong_x;
        if (y.grad().at(j) != (stored(j) ? 0.0 : w_at(j))) ++wrong_y;
      }
      CHECK(wrong_x == 0);
      CHECK(wrong_y == 0);
    }
  }
}
