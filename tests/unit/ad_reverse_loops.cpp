// Reverse mode through nested loops: carried nonlinear recurrences on the
// adstack, linear ones without it, bounds that depend on outer indices,
// two-level nesting, serial_range with a cross-iteration dependency and
// static_range. Expected values: central differences of plain C++ versions,
// or closed forms.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

#include "ad_test_support.hpp"

using doctest::Approx;

TEST_CASE("nonlinear carried recurrence v = sin(v) a + x[i] b over a runtime bound read from a field") {
  int const n = 5;
  std::vector<double> const xv{0.3, -0.5, 1.2, 0.8, -1.1};
  std::vector<double> const seed{1.0, 0.5, -2.0, 1.5, 0.25};
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), out({n}, {.name = "out"});
  ctg::field<double, 0, ctg::grad> a({.name = "a"}), b({.name = "b"});
  ctg::field<int, 0> n_iter({.name = "n_iter"});
  x.copy_from(xv);
  a.at() = 0.9;
  b.at() = 0.7;
  auto k = ctg::kernel<"recurrence">([](auto x, auto a, auto b, auto n_iter, auto out) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(0.0, [=](auto v) {
        return ctg::block(ctg::range(n_iter(), [=](auto) { return v = ctg::sin(v) * a() + x[i] * b(); }),
                          out[i] = v);
      });
    });
  });
  // Plain C++: parameters p = (x_0..x_4, a, b), L = sum_i seed_i out_i.
  auto plain = [&](std::vector<double> const& p, int iters) {
    double L = 0;
    for (int i = 0; i < n; ++i) {
      double v = 0;
      for (int j = 0; j < iters; ++j) v = std::sin(v) * p[n] + p[i] * p[n + 1];
      L += seed[i] * v;
    }
    return L;
  };
  // A short and a long trip count: the adstack is sized from n_iter at each launch.
  for (int iters : {7, 400}) {
    CAPTURE(iters);
    n_iter.at() = iters;
    x.zero_grad(), a.zero_grad(), b.zero_grad();
    k(x, a, b, n_iter, out);
    out.grad().copy_from(seed);
    k.grad(x, a, b, n_iter, out);
    std::vector<double> p = xv;
    p.push_back(0.9);
    p.push_back(0.7);
    auto const g = ad_test::fd_gradient([&](std::vector<double> const& q) { return plain(q, iters); }, p);
    for (int i = 0; i < n; ++i) CHECK(x.grad().at(i) == Approx(g[i]).epsilon(1e-7));
    CHECK(a.grad().at() == Approx(g[n]).epsilon(1e-7));
    CHECK(b.grad().at() == Approx(g[n + 1]).epsilon(1e-7));
    double leftover = 0;
    for (int i = 0; i < n; ++i) leftover += std::abs(out.grad().at(i));
    CHECK(leftover == 0.0);
  }
}

TEST_CASE("linear recurrence v = 0.95 v + 0.01 under ctg::no_adstack: x.grad == 0.95^n") {
  int const n = 4, iters = 37;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), out({n}, {.name = "out"});
  ctg::field<int, 0> n_iter({.name = "n_iter"});
  for (int i = 0; i < n; ++i) x.at(i) = 0.5 * i;
  n_iter.at() = iters;
  auto k = ctg::kernel<"decay", ctg::no_adstack>([](auto x, auto out, auto n_iter) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::range(n_iter(), [=](auto) { return v = v * 0.95 + 0.01; }), out[i] = v);
      });
    });
  });
  k(x, out, n_iter);
  out.grad().fill(1.0);
  k.grad(x, out, n_iter);
  double const want = std::pow(0.95, iters);
  for (int i = 0; i < n; ++i) {
    // v_n = 0.95^n x + 0.01 (1 - 0.95^n) / 0.05
    CHECK(out.at(i) == Approx(want * 0.5 * i + 0.2 * (1 - want)).epsilon(1e-13));
    CHECK(x.grad().at(i) == Approx(want).epsilon(1e-13));
  }
}

TEST_CASE("inner loop bounds depend on the outer index: range(i, n)") {
  int const n = 6;
  std::vector<double> const xv{0.4, -0.2, 0.9, 1.3, -0.6, 0.1};
  std::vector<double> const wv{0.8, 1.1, 0.6, 0.9, 1.2, 0.7};
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), w({n}, {.name = "w"}), out({n}, {.name = "out"});
  x.copy_from(xv);
  w.copy_from(wv);
  auto k = ctg::kernel<"triangle">([](auto x, auto w, auto out, int n) {
    return ctg::range(n, [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::range(i, n, [=](auto j) { return v = v * w[j] + ctg::sin(v) * 0.1; }), out[i] = v);
      });
    });
  });
  k(x, w, out, n);
  out.grad().fill(1.0);
  k.grad(x, w, out, n);
  auto plain = [&](std::vector<double> const& p) {  // p = (x, w)
    double L = 0;
    for (int i = 0; i < n; ++i) {
      double v = p[i];
      for (int j = i; j < n; ++j) v = v * p[n + j] + std::sin(v) * 0.1;
      L += v;
    }
    return L;
  };
  std::vector<double> p = xv;
  p.insert(p.end(), wv.begin(), wv.end());
  auto const g = ad_test::fd_gradient(plain, p);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    CHECK(x.grad().at(i) == Approx(g[i]).epsilon(1e-7));
    CHECK(w.grad().at(i) == Approx(g[n + i]).epsilon(1e-7));
  }
}

TEST_CASE("two levels of nested loops with a carried local, an accumulator and the index in the body") {
  int const n = 3, m = 4, q = 3;
  std::vector<double> const xv{0.5, -0.4, 1.0};
  std::vector<double> const wv{0.3, -0.2, 0.6, 0.1};
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), w({m}, {.name = "w"}), out({n}, {.name = "out"});
  x.copy_from(xv);
  w.copy_from(wv);
  auto k = ctg::kernel<"two_levels">([](auto x, auto w, auto out, int m, int q) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], 0.0, [=](auto v, auto acc) {
        return ctg::block(ctg::range(m, [=](auto j) {
                            return ctg::block(ctg::range(q, [=](auto kk) {
                                                return v = ctg::sin(v + w[kk]) * 1.1 + ctg::cast<double>(j) * 0.05;
                                              }),
                                              acc += v * w[j]);
                          }),
                          out[i] = acc + v * v);
      });
    });
  });
  k(x, w, out, m, q);
  out.grad().fill(1.0);
  k.grad(x, w, out, m, q);
  auto plain = [&](std::vector<double> const& p) {  // p = (x, w)
    double L = 0;
    for (int i = 0; i < n; ++i) {
      double v = p[i], acc = 0;
      for (int j = 0; j < m; ++j) {
        for (int kk = 0; kk < q; ++kk) v = std::sin(v + p[n + kk]) * 1.1 + j * 0.05;
        acc += v * p[n + j];
      }
      L += acc + v * v;
    }
    return L;
  };
  std::vector<double> p = xv;
  p.insert(p.end(), wv.begin(), wv.end());
  auto const g = ad_test::fd_gradient(plain, p);
  for (int i = 0; i < n; ++i) CHECK(x.grad().at(i) == Approx(g[i]).epsilon(1e-7));
  for (int j = 0; j < m; ++j) CHECK(w.grad().at(j) == Approx(g[n + j]).epsilon(1e-7));
}

TEST_CASE("serial_range at the top level: out[i] = out[i-1] c + x() gives x.grad = sum of powers of c") {
  int const n = 12;
  double const c = 0.8;
  ctg::field<double, 0, ctg::grad> x({.name = "x"});
  ctg::field<double, 1, ctg::grad> out({n}, {.name = "out"});
  ctg::field<int, 0> n_iter({.name = "n_iter"});
  x.at() = 0.3;
  n_iter.at() = n;
  auto k = ctg::kernel<"prefix">([](auto x, auto out, auto n_iter, double c) {
    return ctg::serial_range(n_iter(), [=](auto i) {
      return ctg::if_(i == 0, out[i] = x(), out[i] = out[i - 1] * c + x());
    });
  });
  k(x, out, n_iter, c);
  // out[i] = x (1 - c^(i+1)) / (1 - c)
  for (int i = 0; i < n; ++i) CHECK(out.at(i) == Approx(0.3 * (1 - std::pow(c, i + 1)) / (1 - c)).epsilon(1e-13));
  SUBCASE("seed on the last element only") {
    out.grad().at(n - 1) = 1.0;
    k.grad(x, out, n_iter, c);
    CHECK(x.grad().at() == Approx((1 - std::pow(c, n)) / (1 - c)).epsilon(1e-13));
  }
  SUBCASE("seed on every element") {
    out.grad().fill(1.0);
    k.grad(x, out, n_iter, c);
    double want = 0;
    for (int i = 0; i < n; ++i) want += (1 - std::pow(c, i + 1)) / (1 - c);
    CHECK(x.grad().at() == Approx(want).epsilon(1e-13));
  }
  for (int i = 0; i < n; ++i) CHECK(out.grad().at(i) == 0.0);
}

TEST_CASE("static_range is unrolled and swept in reverse order") {
  int const n = 3;
  std::vector<double> const xv{0.2, 0.9, -0.7};
  std::vector<double> const wv{1.3, 0.4, -0.8, 0.6};
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), w({4}, {.name = "w"}), out({n}, {.name = "out"});
  x.copy_from(xv);
  w.copy_from(wv);
  auto k = ctg::kernel<"unrolled">([](auto x, auto w, auto out) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::static_range<4>([=](auto kk) { return v = ctg::sin(v) * w[kk] + x[i] * x[i]; }),
                          out[i] = v);
      });
    });
  });
  k(x, w, out);
  out.grad().fill(1.0);
  k.grad(x, w, out);
  auto plain = [&](std::vector<double> const& p) {
    double L = 0;
    for (int i = 0; i < n; ++i) {
      double v = p[i];
      for (int kk = 0; kk < 4; ++kk) v = std::sin(v) * p[n + kk] + p[i] * p[i];
      L += v;
    }
    return L;
  };
  std::vector<double> p = xv;
  p.insert(p.end(), wv.begin(), wv.end());
  auto const g = ad_test::fd_gradient(plain, p);
  for (int i = 0; i < n; ++i) CHECK(x.grad().at(i) == Approx(g[i]).epsilon(1e-7));
  for (int kk = 0; kk < 4; ++kk) CHECK(w.grad().at(kk) == Approx(g[n + kk]).epsilon(1e-7));
}
