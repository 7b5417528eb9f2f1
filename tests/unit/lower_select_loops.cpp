// select of let-block funcs in ndrange, each and static_range bodies, through
// a func and nested in another select (see lower_select.cpp); and let-blocks
// whose value takes no gradient (stop_grad, a condition): their statements'
// partials must not turn a zero adjoint into NaN.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

#include "lower_select_support.hpp"

using doctest::Approx;
using namespace lower_select_test;

TEST_CASE("a select of let-block funcs inside a func, in ndrange") {
  auto bend = ctg::func<"bend">([](auto x, auto y) { return ctg::select(x > 1.0, root(x - 1.0), x * y); });
  auto k = ctg::kernel<"select_in_func">([=](auto a, auto w, auto out) {
    return ctg::ndrange(2, 3, [=](auto i, auto j) { return out[3 * i + j] = bend(a[3 * i + j], w()) + 0.5 * j; });
  });
  check_against(k, straddling, -0.7, [](std::vector<double> const& p) {
    std::vector<double> y(n);
    for (int i = 0; i < n; ++i) y[i] = (p[i] > 1 ? std::sqrt(p[i] - 1) : p[i] * p[n]) + 0.5 * (i % 3);
    return y;
  });
}

TEST_CASE("a select nested in a select, each side a different let-block func, in each") {
  auto k = ctg::kernel<"select_nested">([](auto a, auto w, auto out) {
    return ctg::each(out, [=](auto i) {
      return out[i] = ctg::select(a[i] > 1.0, ctg::select(a[i] > 2.0, 3.0 * root(a[i] - 2.0), log_of_excess(a[i])),
                                  a[i] * w());
    });
  });
  check_against(k, straddling, 1.5, [](std::vector<double> const& p) {
    std::vector<double> y(n);
    for (int i = 0; i < n; ++i)
      y[i] = p[i] > 1 ? (p[i] > 2 ? 3 * std::sqrt(p[i] - 2) : std::log(p[i] - 1)) : p[i] * p[n];
    return y;
  });
}

TEST_CASE("a let-block func on both sides of a select, unrolled by static_range") {
  auto k = ctg::kernel<"select_both_sides">([](auto a, auto w, auto out) {
    return ctg::range(n / 2, [=](auto i) {
      return ctg::static_range<2>([=](auto s) {
        auto const x = a[2 * i + s];
        return out[2 * i + s] = ctg::select(x > 1.0, root(x - 1.0), root(1.0 - x) * w());
      });
    });
  });
  check_against(k, straddling, 1.5, [](std::vector<double> const& p) {
    std::vector<double> y(n);
    for (int i = 0; i < n; ++i) y[i] = p[i] > 1 ? std::sqrt(p[i] - 1) : std::sqrt(1 - p[i]) * p[n];
    return y;
  });
}

TEST_CASE("a let-block func whose value takes no gradient: no NaN from sqrt at 0") {
  // d/da [(a + 1) * stop_grad(sqrt a)] = sqrt a, and a comparison carries no
  // gradient: at a = 0 the statements' sqrt has an infinite partial, which a
  // zero adjoint must not turn into NaN.
  ctg::field<double, 1, ctg::grad> a({n}, {.name = "a"}), out({n}, {.name = "out"});
  std::vector<double> const av{0.0, 4.0, 0.0, 2.25, 9.0, 0.0};
  a.copy_from(av);
  auto k = ctg::kernel<"detached">([](auto a, auto out) {
    return ctg::range(n, [=](auto i) {
      return out[i] = (a[i] + 1.0) * ctg::stop_grad(root(a[i])) + ctg::select(root(a[i]) > 1.0, a[i], 0.0);
    });
  });
  k(a, out);
  out.grad().fill(1.0);
  k.grad(a, out);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    double const x = av[i];
    CHECK(out.at(i) == Approx((x + 1) * std::sqrt(x) + (std::sqrt(x) > 1 ? x : 0.0)).epsilon(1e-14));
    CHECK(a.grad().at(i) == Approx(std::sqrt(x) + (std::sqrt(x) > 1 ? 1.0 : 0.0)).epsilon(1e-14));
  }
}
