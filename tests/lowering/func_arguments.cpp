// A func's arguments are evaluated once, like the arguments of a C++ call:
// an argument that computes something (a let-block, arithmetic) is bound to a
// local of the call, however many times the func uses it and however deep the
// calls nest. Values and gradients against the plain C++ functions and their
// derivatives written by hand; the argument's statements counted as they run.
// Built at -O1 and run under valgrind memcheck in CI.
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

using doctest::Approx;
using namespace ctg::literals;

TEST_CASE("an argument with statements runs once, however often nested funcs use it") {
  // counted(a) = 2a, and every evaluation adds 1 to calls[i].
  auto counted = ctg::func<"counted">([](auto a, auto calls, auto i) {
    return ctg::let(a, [=](auto v) { return ctg::block(calls[i] += 1.0, v = v * 2.0, ctg::result(v)); });
  });
  auto cube = ctg::func<"cube">([](auto a) { return a * a * a; });
  auto cube_plus = ctg::func<"cube_plus">([=](auto a) { return cube(a) + a; });
  std::vector<double> const xv{-0.6, 0.3, 1.2};
  ctg::field<double, 1, ctg::grad> x({3}, {.name = "x"}), out({3}, {.name = "out"});
  ctg::field<double, 1> calls({3}, {.name = "calls"});
  x.copy_from(xv);
  auto k = ctg::kernel<"counted_argument">([=](auto x, auto out, auto calls) {
    return ctg::range(3, [=](auto i) { return out[i] = cube_plus(cube_plus(counted(x[i], calls, i))); });
  });
  k(x, out, calls);
  out.grad().fill(1.0);
  k.grad(x, out, calls);
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    // Substituted by name, the let-block would run 16 times: cube_plus uses
    // its argument 4 times, and the outer call passes the inner one on.
    CHECK(calls.at(i) == 1.0);
    double const t = xv[std::size_t(i)];
    double const a = 2 * t, b = a * a * a + a, value = b * b * b + b;
    double const db_da = 3 * a * a + 1, dvalue_db = 3 * b * b + 1;
    CHECK(out.at(i) == Approx(value).epsilon(1e-14));
    CHECK(x.grad().at(i) == Approx(dvalue_db * db_da * 2).epsilon(1e-13));
  }
}

TEST_CASE("vector arguments bound to locals: components, dot, and the tangent") {
  // spring(d) = |d|^2 + d_0 d_1 for d = p[i] * s[i] - q (q a constant vector).
  auto spring = ctg::func<"spring">([](auto d) { return ctg::dot(d, d) + d[0_c] * d[1_c]; });
  constexpr ctg::flags both = ctg::grad | ctg::dual;
  using V3 = Eigen::Vector3d;
  ctg::field<V3, 1, both> p({2}, {.name = "p"});
  ctg::field<double, 1, both> s({2}, {.name = "s"}), energy({2}, {.name = "energy"});
  std::vector<V3> const pv{V3(0.5, -1.0, 2.0), V3(-0.3, 0.7, 0.1)};
  std::vector<double> const sv{1.5, -0.4};
  for (int i = 0; i < 2; ++i) p.at(i) = pv[std::size_t(i)], s.at(i) = sv[std::size_t(i)];
  V3 const q(0.25, 0.5, -1.0);
  auto k = ctg::kernel<"spring_energy">([=](auto p, auto s, auto energy) {
    return ctg::range(2, [=](auto i) { return energy[i] = spring(p[i] * s[i] - q); });
  });
  k(p, s, energy);
  energy.grad().fill(1.0);
  k.grad(p, s, energy);
  s.dual().fill(1.0);
  k.fwd(p, s, energy);
  for (int i = 0; i < 2; ++i) {
    CAPTURE(i);
    V3 const d = pv[std::size_t(i)] * sv[std::size_t(i)] - q;
    // dE/dd = 2d + (d_1, d_0, 0); dd/dp = s I, dd/ds = p.
    V3 const de_dd = 2 * d + V3(d[1], d[0], 0.0);
    CHECK(energy.at(i) == Approx(d.squaredNorm() + d[0] * d[1]).epsilon(1e-14));
    for (int c = 0; c < 3; ++c) CHECK(p.grad().at(i)[c] == Approx(de_dd[c] * sv[std::size_t(i)]).epsilon(1e-13));
    CHECK(s.grad().at(i) == Approx(de_dd.dot(pv[std::size_t(i)])).epsilon(1e-13));
    CHECK(energy.dual().at(i) == Approx(de_dd.dot(pv[std::size_t(i)])).epsilon(1e-13));
  }
}

TEST_CASE("a bound argument inside a select arm and a func in a while_ condition") {
  auto cube = ctg::func<"cube">([](auto a) { return a * a * a; });
  auto above = ctg::func<"above">([](auto v, auto limit) { return v * v > limit * limit; });
  std::vector<double> const xv{-0.8, 0.4, 1.7};
  ctg::field<double, 1, ctg::grad> x({3}, {.name = "x"}), out({3}, {.name = "out"});
  x.copy_from(xv);
  auto k = ctg::kernel<"select_while_arguments", ctg::adstack_capacity<64>>([=](auto x, auto out) {
    return ctg::range(3, [=](auto i) {
      return ctg::let(ctg::select(x[i] > 0.0, cube(x[i] + 1.0), x[i] * 3.0), [=](auto v) {
        // Halve v while |v / 2 + 0.1| > 1: the condition is evaluated before every iteration.
        return ctg::block(ctg::while_(above(v * 0.5 + 0.1, 1.0), v = v * 0.5), out[i] = v);
      });
    });
  });
  k(x, out);
  out.grad().fill(1.0);
  k.grad(x, out);
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    double const t = xv[std::size_t(i)];
    double v = t > 0 ? std::pow(t + 1, 3) : 3 * t;
    double dv = t > 0 ? 3 * std::pow(t + 1, 2) : 3.0;
    int halvings = 0;
    while (std::abs(v * 0.5 + 0.1) > 1.0) v *= 0.5, dv *= 0.5, ++halvings;
    CHECK(out.at(i) == Approx(v).epsilon(1e-14));
    CHECK(x.grad().at(i) == Approx(dv).epsilon(1e-13));
    if (t > 1) CHECK(halvings > 1);
  }
}

TEST_CASE("a func holding the kernel's loop, called with a computed argument at the top level") {
  auto scale_all = ctg::func<"scale_all">([](auto x, auto out, auto factor) {
    return ctg::range(x.size(), [=](auto i) { return out[i] = x[i] * factor + factor * factor; });
  });
  std::vector<double> const xv{0.5, -1.5, 2.0, 0.25};
  ctg::field<double, 1, ctg::grad> x({4}, {.name = "x"}), out({4}, {.name = "out"});
  ctg::field<double, 0, ctg::grad> gain({.name = "gain"});
  x.copy_from(xv);
  gain.at() = 0.7;
  auto k = ctg::kernel<"top_level_call">([=](auto x, auto out, auto gain) { return scale_all(x, out, gain() * 2.0); });
  k(x, out, gain);
  out.grad().fill(1.0);
  k.grad(x, out, gain);
  double const f = 1.4;
  double dgain = 0;
  for (int i = 0; i < 4; ++i) {
    double const t = xv[std::size_t(i)];
    CHECK(out.at(i) == Approx(t * f + f * f).epsilon(1e-15));
    CHECK(x.grad().at(i) == Approx(f).epsilon(1e-15));
    dgain += (t + 2 * f) * 2;
  }
  CHECK(gain.grad().at() == Approx(dgain).epsilon(1e-14));
}

TEST_CASE("a statement passed to a func is not bound, even when it holds a bound call") {
  auto sq = ctg::func<"sq">([](auto a) { return a * a; });
  auto twice = ctg::func<"twice">([](auto s) { return ctg::block(s, s); });
  std::vector<double> const xv{-1.5, 0.25, 2.0};
  ctg::field<double, 1, ctg::grad> x({3}, {.name = "x"}), out({3}, {.name = "out"});
  x.copy_from(xv);
  auto k = ctg::kernel<"statement_argument">([=](auto x, auto out) {
    return ctg::range(3, [=](auto i) {
      // The let-block's value is dropped: a let used as a statement.
      return ctg::block(ctg::let(x[i], [=](auto v) { return ctg::result(sq(v * 3.0)); }),
                        twice(out[i] += sq(x[i] * 2.0)));
    });
  });
  k(x, out);
  out.grad().fill(1.0);
  k.grad(x, out);
  for (int i = 0; i < 3; ++i) {
    double const t = xv[std::size_t(i)];
    CHECK(out.at(i) == Approx(8 * t * t).epsilon(1e-15));
    CHECK(x.grad().at(i) == Approx(16 * t).epsilon(1e-15));
  }
}
