// The adjoint of a store clears the stored element's gradient; it may do so
// after propagating into the rhs only when the rhs cannot add into that very
// element. These pin both orders against hand-derived gradients.
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
