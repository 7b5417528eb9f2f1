// Custom gradients: a functor's hand-written backward and tangent replace the
// derived rules, through nested loops and in forward mode.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>

#include "ad_test_support.hpp"

namespace {

using ad_test::soft_abs;

// A deliberately "wrong" backward (scaled by 10) shows it is the one used.
struct scaled_product {
  template <class T>
  CTG_HOST_DEVICE T forward(T a, T b) const {
    return a * b;
  }
  template <class T>
  CTG_HOST_DEVICE auto backward(T a, T b, T g) const {
    return ctg::gradients(T(10) * g * b, T(10) * g * a);
  }
};

}  // namespace

TEST_CASE("a custom backward is what the adjoint uses") {
  ctg::field<double, 1, ctg::grad> a(3), b(3), y(3);
  for (int i = 0; i < 3; ++i) a.at(i) = 1.0 + i, b.at(i) = 2.0 - i;
  auto mul = ctg::custom_gradient<"scaled_product">(scaled_product{});
  auto k = ctg::kernel<"custom">([=](auto a, auto b, auto y) {
    return ctg::range(3, [=](auto i) { return y[i] = mul(a[i], b[i]) + 1.0; });
  });
  k(a, b, y);
  for (int i = 0; i < 3; ++i) CHECK(y.at(i) == doctest::Approx((1.0 + i) * (2.0 - i) + 1.0));
  for (int i = 0; i < 3; ++i) y.grad().at(i) = 1.0;
  k.grad(a, b, y);
  for (int i = 0; i < 3; ++i) {
    CHECK(a.grad().at(i) == doctest::Approx(10 * (2.0 - i)));
    CHECK(b.grad().at(i) == doctest::Approx(10 * (1.0 + i)));
  }
}

TEST_CASE("custom gradients inside a nonlinear recurrence, reverse and forward mode") {
  ctg::field<double, 1, ctg::grad | ctg::dual> x(4), y(4);
  for (int i = 0; i < 4; ++i) x.at(i) = -0.6 + 0.4 * i;
  auto sabs = ctg::custom_gradient<"soft_abs">(soft_abs{1e-3});
  auto k = ctg::kernel<"chain">([=](auto x, auto y) {
    return ctg::range(4, [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::range(5, [=](auto) { return v = sabs(v - 0.3) * 0.9 + x[i] * 0.1; }), y[i] = v);
      });
    });
  });
  auto plain = [](double x0) {
    double v = x0;
    for (int k2 = 0; k2 < 5; ++k2) v = std::sqrt((v - 0.3) * (v - 0.3) + 1e-3) * 0.9 + x0 * 0.1;
    return v;
  };
  k(x, y);
  for (int i = 0; i < 4; ++i) y.grad().at(i) = 1.0, x.dual().at(i) = 1.0;
  k.grad(x, y);
  k.fwd(x, y);
  for (int i = 0; i < 4; ++i) {
    double const h = 1e-6, x0 = x.at(i);
    double const fd = (plain(x0 + h) - plain(x0 - h)) / (2 * h);
    CHECK(x.grad().at(i) == doctest::Approx(fd).epsilon(1e-6));
    CHECK(y.dual().at(i) == doctest::Approx(fd).epsilon(1e-6));
  }
}
