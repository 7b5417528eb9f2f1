// The adjoint of a store clears the stored element's gradient; it may do so
// after propagating into the rhs only when the rhs cannot add into that very
// element. An update in place (x = x + r) leaves it as it is instead. These
// pin each case against hand-derived gradients.
#include <doctest/doctest.h>

#include <ctgrad/ctgrad.hpp>

TEST_CASE("time-indexed store: a different time slot, cleared after propagation") {
  ctg::field<double, 2, ctg::grad> u(3, 4);
  for (int i = 0; i < 4; ++i) u.at(1, i) = 1.0 + i;
  auto step = ctg::kernel<"step">([](auto u, int t) {
    return ctg::range(4, [=](auto i) { return u(t + 1, i) = u(t, i) * u(t, i) + u(t + 1, i) * 0.0; });
  });
  step(u, 1);
  for (int i = 0; i < 4; ++i) u.grad().at(2, i) = 1.0;
  step.grad(u, 1);
  for (int i = 0; i < 4; ++i) {
    CHECK(u.grad().at(1, i) == doctest::Approx(2.0 * (1.0 + i)));  // d(u1^2)/du1
    CHECK(u.grad().at(2, i) == 0.0);  // overwritten: the old u(2, i) only entered times zero
  }
}

TEST_CASE("in-place store on the same time slot: cleared first") {
  ctg::field<double, 2, ctg::grad> u(3, 4);
  for (int i = 0; i < 4; ++i) u.at(1, i) = 1.0 + i;
  auto scale = ctg::kernel<"scale">([](auto u, int t, double c) {
    return ctg::range(4, [=](auto i) { return u(t, i) = u(t, i) * c; });
  });
  scale(u, 1, 3.0);
  for (int i = 0; i < 4; ++i) u.grad().at(1, i) = 1.0;
  scale.grad(u, 1, 3.0);
  // new = old * c: the gradient of the old value is c, not c + 1.
  for (int i = 0; i < 4; ++i) CHECK(u.grad().at(1, i) == doctest::Approx(3.0));
}

// An update in place, x = x + r: the old element's gradient is the new one's
// (coefficient one), so only r's operands receive.
TEST_CASE("in-place sum: the element's gradient stays, the other terms receive") {
  ctg::field<double, 1, ctg::grad> x(4), a(4);
  ctg::field<double, 1> b(4);
  for (int i = 0; i < 4; ++i) {
    x.at(i) = 1.0 + i;
    a.at(i) = 0.5 * i;
    b.at(i) = 0.25 * (i + 1);
  }
  auto update = ctg::kernel<"update">([](auto x, auto a, auto b, double c) {
    return ctg::range(4, [=](auto i) { return x[i] = x[i] - b[i] * x[i] + c * a[i]; });
  });
  update(x, a, b, 3.0);
  for (int i = 0; i < 4; ++i) x.grad().at(i) = 2.0 + i;
  update.grad(x, a, b, 3.0);
  for (int i = 0; i < 4; ++i) {
    double const seed = 2.0 + i;
    CHECK(x.grad().at(i) == doctest::Approx(seed * (1.0 - 0.25 * (i + 1))));  // d/dx of x - b x + c a
    CHECK(a.grad().at(i) == doctest::Approx(3.0 * seed));
  }
}

TEST_CASE("in-place sum on vector elements, the element last") {
  using V = Eigen::Vector3d;
  ctg::field<V, 1, ctg::grad> v(3), w(3);
  for (int i = 0; i < 3; ++i) {
    v.at(i) = V(1.0, 2.0, 3.0) * (i + 1);
    w.at(i) = V(-1.0, 0.5, 2.0) * (i + 1);
  }
  auto push = ctg::kernel<"push">([](auto v, auto w, double dt) {
    return ctg::range(3, [=](auto i) { return v[i] = dt * w[i] * ctg::norm(w[i]) + v[i]; });
  });
  push(v, w, 0.5);
  for (int i = 0; i < 3; ++i) v.grad().at(i) = V(1.0, -1.0, 2.0);
  push.grad(v, w, 0.5);
  for (int i = 0; i < 3; ++i) {
    V const g(1.0, -1.0, 2.0);
    V const wi = V(-1.0, 0.5, 2.0) * (i + 1);
    double const r = wi.norm();
    // d(dt w |w|)/dw applied to g: dt (|w| g + w (w . g) / |w|)
    V const want = 0.5 * (r * g + wi * (wi.dot(g) / r));
    CHECK(v.grad().at(i).isApprox(g));
    CHECK(w.grad().at(i).isApprox(want, 1e-12));
  }
}

// Reads of one type whose indices differ at run time (x[o] against x[p]):
// the overwritten element is cleared and the read one receives.
TEST_CASE("update of one element from another: compared at run time") {
  auto move = ctg::kernel<"move">([](auto x, auto y, int to, int from) {
    return ctg::range(1, [=](auto i) { return x[to] = x[from] + 2.0 * y[i]; });
  });
  for (int to : {0, 1}) {
    ctg::field<double, 1, ctg::grad> x(2), y(1);
    x.at(0) = 1.0, x.at(1) = 4.0, y.at(0) = 0.5;
    move(x, y, to, 1);
    x.grad().at(0) = 1.0, x.grad().at(1) = 5.0;
    move.grad(x, y, to, 1);
    double const seed = to == 0 ? 1.0 : 5.0;
    CHECK(y.grad().at(0) == doctest::Approx(2.0 * seed));
    if (to == 0) {  // x[0] = x[1] + 2 y: x[0]'s old value is lost, x[1] receives
      CHECK(x.grad().at(0) == 0.0);
      CHECK(x.grad().at(1) == doctest::Approx(6.0));
    } else {  // x[1] = x[1] + 2 y
      CHECK(x.grad().at(0) == doctest::Approx(1.0));
      CHECK(x.grad().at(1) == doctest::Approx(5.0));
    }
  }
}
