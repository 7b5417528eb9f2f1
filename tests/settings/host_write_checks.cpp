// Built with the host-write checks on (tests/CMakeLists.txt), against a
// runtime compiled once in a unit built with them off (runtime_unchecked.cpp):
// the checks are this unit's setting, whatever the runtime's unit had.
#include <doctest/doctest.h>

#include <ctgrad/ctgrad.hpp>
#include <utility>

static_assert(CTG_HOST_WRITE_CHECKS, "this unit is built with the host-write checks on");
static_assert(CTG_SEPARATE_COMPILATION, "this program compiles the runtime once");

TEST_CASE("an element written through at() after the forward raises CTG-TAPE-003 at the adjoint") {
  ctg::field<double, 1, ctg::grad> x({4}, {.name = "x"}), y({4}, {.name = "y"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  x.fill(1.5);
  y.fill(2.0);
  auto const k = ctg::kernel<"product">([](auto x, auto y, auto loss) {
    return ctg::range(4, [=](auto i) { return loss() += x[i] * y[i]; });
  });
  k(x, y, loss);
  loss.grad().at() = 1.0;
  // The adjoint reads y (d loss / d x = y): the gradient of the launch
  // needs the values it ran with.
  y.at(1) = -3.0;
  CHECK_THROWS_WITH_AS(k.grad(x, y, loss), doctest::Contains("CTG-TAPE-003"), ctg::autodiff_error);
}

TEST_CASE("without a write, the same adjoint runs") {
  ctg::field<double, 1, ctg::grad> x({4}, {.name = "x"}), y({4}, {.name = "y"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  x.fill(1.5);
  y.fill(2.0);
  auto const k = ctg::kernel<"product">([](auto x, auto y, auto loss) {
    return ctg::range(4, [=](auto i) { return loss() += x[i] * y[i]; });
  });
  k(x, y, loss);
  loss.grad().at() = 1.0;
  double const peek = std::as_const(y).at(1);  // a read is not a write
  CHECK(peek == 2.0);
  k.grad(x, y, loss);
  auto const gx = x.grad();
  auto const gy = y.grad();
  CHECK(gx.at(2) == 2.0);
  CHECK(gy.at(2) == 1.5);
}
