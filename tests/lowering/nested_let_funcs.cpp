// Let-block funcs nested inside each other's arguments, around an index with
// a literal: hoisting moves each let-block in front of the statement and the
// literal (the `% 3`) must survive every rebuild of the tree by value. Built
// at -O1 and run under valgrind memcheck in CI, where a reference into a
// temporary of the lowering shows as an uninitialised read.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

using doctest::Approx;

namespace {
// v <- sin(v) + v / 2, n times, and its derivative by the chain rule.
double iterate(double v, int n) {
  for (int k = 0; k < n; ++k) v = std::sin(v) + 0.5 * v;
  return v;
}
double iterate_slope(double v, int n) {
  double slope = 1;
  for (int k = 0; k < n; ++k) slope *= std::cos(v) + 0.5, v = std::sin(v) + 0.5 * v;
  return slope;
}
}  // namespace

TEST_CASE("three nested let-block funcs around a[(i + 1) % 3]: values and the exact gradient") {
  auto f = ctg::func<"iterate">([](auto x, auto n) {
    return ctg::let(x, [=](auto v) {
      return ctg::block(ctg::range(n, [=](auto) { return v = ctg::sin(v) + 0.5 * v; }), ctg::result(v));
    });
  });
  std::vector<double> const av{0.5, 2.0, -0.3};
  int const n = 2;
  ctg::field<double, 1, ctg::grad> a({3}, {.name = "a"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  a.copy_from(av);
  auto k = ctg::kernel<"nested_lets">([f](auto a, auto loss, int n) {
    return ctg::range(3, [=](auto i) { return loss() += f(f(f(a[(i + 1) % 3], n), n), n); });
  });
  k(a, loss, n);
  loss.grad().fill(1.0);
  k.grad(a, loss, n);
  double want = 0;
  for (int j = 0; j < 3; ++j) want += iterate(av[j], 3 * n);
  CHECK(loss.at() == Approx(want).epsilon(1e-14));
  // Each a[j] is read by exactly one iteration ((i + 1) % 3 is a permutation).
  for (int j = 0; j < 3; ++j) {
    CAPTURE(j);
    CHECK(a.grad().at(j) == Approx(iterate_slope(av[j], 3 * n)).epsilon(1e-13));
  }
}
