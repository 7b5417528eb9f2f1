// Shared by lower_select*.cpp: let-block funcs that are NaN outside their
// domain, and a check of a kernel k(a, w, out) against plain C++ in all three
// passes.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <functional>
#include <vector>

#include "ad_test_support.hpp"

namespace lower_select_test {
inline constexpr ctg::flags both = ctg::grad | ctg::dual;
inline constexpr int n = 6;

// sqrt and log computed in statements: NaN when evaluated outside their
// domain, which is exactly what the side not chosen must never be.
inline auto const root = ctg::func<"root">(
    [](auto x) { return ctg::let(x, [=](auto v) { return ctg::block(v = ctg::sqrt(v), ctg::result(v)); }); });
inline auto const log_of_excess = ctg::func<"log_of_excess">([](auto x) {
  return ctg::let(x, 0.0, [=](auto v, auto r) { return ctg::block(v = v - 1.0, r = ctg::log(v), ctg::result(r)); });
});

// The outputs of a kernel written in plain C++, from (a_0..a_{n-1}, w).
using plain_kernel = std::function<std::vector<double>(std::vector<double> const&)>;

// Runs k(a, w, out) forward, in reverse (with out.grad = seed) and in forward
// mode, and compares each with `plain` and its central differences.
template <class K>
void check_against(K const& k, std::vector<double> const& av, double wv, plain_kernel const& plain) {
  std::vector<double> p = av;
  p.push_back(wv);
  std::vector<double> const want = plain(p);
  ctg::field<double, 1, both> a({n}, {.name = "a"}), out({n}, {.name = "out"});
  ctg::field<double, 0, both> w({.name = "w"});
  a.copy_from(av);
  w.at() = wv;

  k(a, w, out);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    CHECK(out.at(i) == doctest::Approx(want[std::size_t(i)]).epsilon(1e-14));
  }

  std::vector<double> seed(n);
  for (int i = 0; i < n; ++i) seed[std::size_t(i)] = 1.0 + 0.25 * i;
  out.grad().copy_from(seed);
  k.grad(a, w, out);
  auto loss = [&](std::vector<double> const& q) {
    std::vector<double> const y = plain(q);
    double s = 0;
    for (int i = 0; i < n; ++i) s += seed[std::size_t(i)] * y[std::size_t(i)];
    return s;
  };
  std::vector<double> const g = ad_test::fd_gradient(loss, p);
  for (int j = 0; j < n; ++j) {
    CAPTURE(j);
    CHECK(a.grad().at(j) == doctest::Approx(g[std::size_t(j)]).epsilon(1e-7));
  }
  CHECK(w.grad().at() == doctest::Approx(g[n]).epsilon(1e-7));

  // Tangent along d: out.dual_i against (plain_i(p + h d) - plain_i(p - h d)) / 2h.
  std::vector<double> d(n + 1);
  for (int j = 0; j <= n; ++j) d[std::size_t(j)] = std::cos(1.3 * j) + 0.2;
  a.dual().copy_from(std::vector<double>(d.begin(), d.begin() + n));
  w.dual().at() = d[n];
  k.fwd(a, w, out);
  double const h = 1e-6;
  std::vector<double> plus = p, minus = p;
  for (std::size_t j = 0; j <= std::size_t(n); ++j) plus[j] += h * d[j], minus[j] -= h * d[j];
  std::vector<double> const yp = plain(plus), ym = plain(minus);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    CHECK(out.dual().at(i) == doctest::Approx((yp[std::size_t(i)] - ym[std::size_t(i)]) / (2 * h)).epsilon(1e-7));
  }
}

// a straddles 1 and 2, away from both (central differences stay on one side).
inline std::vector<double> const straddling{0.5, 2.6, 0.3, 3.0, 1.7, -0.8};
}  // namespace lower_select_test
