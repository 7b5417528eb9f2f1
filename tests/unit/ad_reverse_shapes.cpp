// Reverse mode, further loop and func shapes: nonlinear terms that do not
// involve carried locals need no adstack; an integer counter carried as an
// index; a 3-axis ndrange offload; a range with a nonzero begin; funcs that
// hold nested loops, called from a parallel loop and from each other.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

#include "ad_test_support.hpp"

using doctest::Approx;

TEST_CASE("no_adstack: a nested loop adding sin(x[i] w[j]) to an accumulator builds and is exact") {
  int const n = 3, m = 4;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), w({m}, {.name = "w"}), out({n}, {.name = "out"});
  for (int i = 0; i < n; ++i) x.at(i) = 0.3 * (i + 1);
  for (int j = 0; j < m; ++j) w.at(j) = 0.1 * (j + 1);
  // The accumulator enters linearly; sin's operand reads only fields and indices.
  auto k = ctg::kernel<"linear_acc", ctg::no_adstack>([](auto x, auto w, auto out, int m) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(0.0, [=](auto acc) {
        return ctg::block(ctg::range(m, [=](auto j) { return acc += ctg::sin(x[i] * w[j]); }), out[i] = acc);
      });
    });
  });
  k(x, w, out, m);
  out.grad().fill(1.0);
  k.grad(x, w, out, m);
  std::vector<double> gw(m, 0.0);
  for (int i = 0; i < n; ++i) {
    double gx = 0;
    for (int j = 0; j < m; ++j) {
      double const c = std::cos(x.at(i) * w.at(j));
      gx += c * w.at(j);
      gw[j] += c * x.at(i);
    }
    CHECK(x.grad().at(i) == Approx(gx).epsilon(1e-14));
  }
  for (int j = 0; j < m; ++j) CHECK(w.grad().at(j) == Approx(gw[j]).epsilon(1e-14));
}

TEST_CASE("an integer local carried through a nested loop and used as an index") {
  ctg::field<double, 1, ctg::grad> z({8}, {.name = "z"}), y({3}, {.name = "y"});
  for (int j = 0; j < 8; ++j) z.at(j) = 0.5 + j;
  auto k = ctg::kernel<"int_counter">([](auto z, auto y) {
    return ctg::range(y.size(), [=](auto i) {
      return ctg::let(0, 0.0, [=](auto kk, auto acc) {
        return ctg::block(ctg::range(4, [=](auto) {
                            return ctg::block(acc += z[kk] * z[kk] * ctg::cast<double>(i + 1), kk = kk + 2);
                          }),
                          y[i] = acc);
      });
    });
  });
  k(z, y);
  y.grad().fill(1.0);
  k.grad(z, y);
  // y_i = (i + 1) sum_{even j} z_j^2: dL/dz_j = 2 z_j (1 + 2 + 3) for even j, 0 for odd j
  for (int j = 0; j < 8; ++j) CHECK(z.grad().at(j) == Approx(j % 2 ? 0.0 : 12.0 * z.at(j)).epsilon(1e-14));
}

TEST_CASE("a 3-axis ndrange offload on 8 threads") {
  ad_test::thread_scope threads(8);
  int const A = 7, B = 9, C = 5;
  ctg::field<double, 3, ctg::grad> x({A, B, C}, {.name = "x"}), y({A, B, C}, {.name = "y"});
  ctg::field<double, 1, ctg::grad> w({C}, {.name = "w"});
  for (int i = 0; i < A; ++i)
    for (int j = 0; j < B; ++j)
      for (int l = 0; l < C; ++l) x.at(i, j, l) = 0.1 * i + 0.01 * j - 0.03 * l;
  for (int l = 0; l < C; ++l) w.at(l) = 1.0 + l;
  auto k = ctg::kernel<"nd3">([](auto x, auto w, auto y) {
    return ctg::ndrange(x.shape(ctg::c<0>), x.shape(ctg::c<1>), x.shape(ctg::c<2>),
                        [=](auto i, auto j, auto l) { return y(i, j, l) = ctg::sin(x(i, j, l)) * w[l]; });
  });
  k(x, w, y);
  y.grad().fill(1.0);
  k.grad(x, w, y);
  std::vector<double> gw(C, 0.0);
  int bad = 0;
  for (int i = 0; i < A; ++i)
    for (int j = 0; j < B; ++j)
      for (int l = 0; l < C; ++l) {
        bad += x.grad().at(i, j, l) != Approx(std::cos(x.at(i, j, l)) * w.at(l)).epsilon(1e-14);
        gw[l] += std::sin(x.at(i, j, l));
      }
  CHECK(bad == 0);
  for (int l = 0; l < C; ++l) CHECK(w.grad().at(l) == Approx(gw[l]).epsilon(1e-12));
}

TEST_CASE("range(2, n) with x[i - 2] and x[i]: shifted indices of the offload loop") {
  int const n = 10;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  for (int i = 0; i < n; ++i) x.at(i) = 0.2 * i - 0.7;
  auto k = ctg::kernel<"shifted">([](auto x, auto y, int n) {
    return ctg::range(2, n, [=](auto i) { return y[i] = x[i - 2] * x[i]; });
  });
  k(x, y, n);
  y.grad().fill(1.0);
  k.grad(x, y, n);
  // L = sum_{i=2}^{n-1} x_{i-2} x_i: dL/dx_j = x_{j+2} [j+2 < n] + x_{j-2} [j >= 2]
  for (int j = 0; j < n; ++j) {
    double const want = (j + 2 < n ? x.at(j + 2) : 0.0) + (j >= 2 ? x.at(j - 2) : 0.0);
    CHECK(x.grad().at(j) == Approx(want).epsilon(1e-14));
  }
  CHECK(y.grad().at(0) == 1.0);  // never written: left alone
  CHECK(y.grad().at(2) == 0.0);
}

TEST_CASE("funcs holding nested loops, one calling another, inside a parallel loop") {
  auto iterate = ctg::func<"iterate">([](auto x0, auto m) {
    return ctg::let(x0, [=](auto v) {
      return ctg::block(ctg::range(m, [=](auto) { return v = ctg::sin(v) + 0.5 * v; }), ctg::result(v));
    });
  });
  auto twice = ctg::func<"twice">([=](auto x0, auto m) { return iterate(iterate(x0, m) * 1.5, m); });
  ctg::field<double, 1, ctg::grad> a({3}, {.name = "a"}), out({3}, {.name = "out"});
  for (int i = 0; i < 3; ++i) a.at(i) = 0.2 + 0.3 * i;
  auto k = ctg::kernel<"func_loops">([=](auto a, auto out, int m) {
    return ctg::range(a.size(), [=](auto i) { return out[i] = twice(a[i], m) * a[i]; });
  });
  k(a, out, 3);
  out.grad().fill(1.0);
  k.grad(a, out, 3);
  auto it = [](double v, int m) {
    for (int j = 0; j < m; ++j) v = std::sin(v) + 0.5 * v;
    return v;
  };
  auto f = [&](std::vector<double> const& p) { return it(it(p[0], 3) * 1.5, 3) * p[0]; };
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(out.at(i) == Approx(f({a.at(i)})).epsilon(1e-14));
    CHECK(a.grad().at(i) == Approx(ad_test::central_difference(f, {a.at(i)}, 0)).epsilon(1e-7));
  }
}
