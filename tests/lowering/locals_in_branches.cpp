// Matrix-valued locals assigned in an if_ arm: the adjoint restores such a
// local from its assignment's site slot only in the arm that saved it, which
// GCC cannot follow. Built at -O1 without sanitizers (the memcheck preset,
// -Werror), where GCC's -Wmaybe-uninitialized once stopped the build of the
// first kernel here, and run under valgrind memcheck, which would see a read
// of an unset slot. Gradients against derivatives written by hand.
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

using doctest::Approx;
using namespace ctg::literals;

namespace {
// out = y(x): w = (x^2, sin x), then w0 = 5x; for x < 0, w = (w1, w0 w1);
// y = w0 + 2 w1. An ordinary C++ function that builds kernel code, so that
// a parallel loop, a serial loop and a kernel's top level run one body.
auto swap_in_branch(auto x, auto out) {
  return ctg::let(ctg::vec(0.0, 0.0), [=](auto w) {
    return ctg::block(w = ctg::vec(x * x, ctg::sin(x)), w[0_c] = x * 5.0,
                      ctg::if_(x < 0.0, w = ctg::vec(w[1_c], w[0_c] * w[1_c])), out = w[0_c] + w[1_c] * 2.0);
  });
}
// x >= 0: y = 5x + 2 sin x; x < 0: y = sin x + 10 x sin x.
double swapped_value(double x) { return x >= 0 ? 5 * x + 2 * std::sin(x) : std::sin(x) + 10 * x * std::sin(x); }
double swapped_slope(double x) {
  return x >= 0 ? 5 + 2 * std::cos(x) : std::cos(x) + 10 * std::sin(x) + 10 * x * std::cos(x);
}
}  // namespace

TEST_CASE("a vector local written by component, then reassigned whole in one arm of an if_") {
  std::vector<double> const xv{0.3, -0.5, 1.7, -2.2};
  int const n = int(xv.size());
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  x.copy_from(xv);
  auto k = ctg::kernel<"swap_in_branch">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return swap_in_branch(x[i], y[i]); });
  });
  k(x, y);
  y.grad().fill(1.0);
  k.grad(x, y);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    CHECK(y.at(i) == Approx(swapped_value(xv[i])).epsilon(1e-14));
    CHECK(x.grad().at(i) == Approx(swapped_slope(xv[i])).epsilon(1e-13));
  }
}

TEST_CASE("a matrix local reassigned in both arms inside a loop that carries it") {
  // m starts as diag(x, 1) and is multiplied, twice, by [[1, x], [0, 1]]
  // (x > 0) or by [[1, 0], [x, 1]] (otherwise); y = sum of m's coefficients.
  using mat2 = Eigen::Matrix2d;
  auto const run = [](double x) {
    mat2 m;
    m << x, 0, 0, 1;
    mat2 step;
    if (x > 0)
      step << 1, x, 0, 1;
    else
      step << 1, 0, x, 1;
    for (int s = 0; s < 2; ++s) m = m * step;
    return m.sum();
  };
  std::vector<double> const xv{0.4, -0.9, 1.3};
  int const n = int(xv.size());
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  x.copy_from(xv);
  auto k = ctg::kernel<"matrix_in_branch">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(ctg::mat<2, 2>(x[i], 0.0, 0.0, 1.0), [=](auto m) {
        return ctg::block(ctg::static_range<2>([=](auto) {
                            return ctg::if_(x[i] > 0.0, m = m * ctg::mat<2, 2>(1.0, x[i], 0.0, 1.0),
                                            m = m * ctg::mat<2, 2>(1.0, 0.0, x[i], 1.0));
                          }),
                          y[i] = m(0_c, 0_c) + m(0_c, 1_c) + m(1_c, 0_c) + m(1_c, 1_c));
      });
    });
  });
  k(x, y);
  y.grad().fill(1.0);
  k.grad(x, y);
  double const h = 1e-6;
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    CHECK(y.at(i) == Approx(run(xv[i])).epsilon(1e-14));
    CHECK(x.grad().at(i) == Approx((run(xv[i] + h) - run(xv[i] - h)) / (2 * h)).epsilon(1e-8));
  }
}

TEST_CASE("the same locals in a serial loop and at a kernel's top level") {
  std::vector<double> const xv{-0.8, 0.6, -1.9};
  int const n = int(xv.size());
  ctg::field<double, 1, ctg::grad> a({n}, {.name = "a"}), b({n}, {.name = "b"});
  a.copy_from(xv);
  auto in_order = ctg::kernel<"swap_in_serial_loop">([](auto a, auto b) {
    return ctg::serial_range(a.size(), [=](auto i) { return swap_in_branch(a[i], b[i]); });
  });
  in_order(a, b);
  b.grad().fill(1.0);
  in_order.grad(a, b);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    CHECK(a.grad().at(i) == Approx(swapped_slope(xv[i])).epsilon(1e-13));
  }

  ctg::field<double, 0, ctg::grad> x({.name = "x"}), y({.name = "y"});
  x.at() = -0.7;
  auto top_level = ctg::kernel<"swap_at_top_level">([](auto x, auto y) { return swap_in_branch(x(), y()); });
  top_level(x, y);
  y.grad().fill(1.0);
  top_level.grad(x, y);
  CHECK(x.grad().at() == Approx(swapped_slope(-0.7)).epsilon(1e-13));
}
