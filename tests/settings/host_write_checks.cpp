// Built with the host-write checks on (tests/CMakeLists.txt), against a
// runtime compiled once in a unit built with them off (runtime_unchecked.cpp):
// the checks are this unit's setting, whatever the runtime's unit had
// (a tape's verify_contents default among them).
#include <doctest/doctest.h>

#include <ctgrad/ctgrad.hpp>
#include <utility>

static_assert(CTG_HOST_WRITE_CHECKS, "this unit is built with the host-write checks on");
static_assert(CTG_SEPARATE_COMPILATION, "this program compiles the runtime once");

// loss = sum x y, launched once; the adjoint reads y (d loss / d x = y),
// so it needs the values the launch ran with.
struct product_launched {
  ctg::field<double, 1, ctg::grad> x{{4}, {.name = "x"}}, y{{4}, {.name = "y"}};
  ctg::field<double, 0, ctg::grad> loss{{}, {.name = "loss"}};
  static constexpr auto k = ctg::kernel<"product">([](auto x, auto y, auto loss) {
    return ctg::range(4, [=](auto i) { return loss() += x[i] * y[i]; });
  });
  product_launched() {
    x.fill(1.5);
    y.fill(2.0);
    k(x, y, loss);
    loss.grad().at() = 1.0;
  }
  void adjoint() { k.grad(x, y, loss); }
};

TEST_CASE("an element written through at() after the forward raises CTG-TAPE-003 at the adjoint") {
  product_launched p;
  p.y.at(1) = -3.0;
  CHECK_THROWS_WITH_AS(p.adjoint(), doctest::Contains("CTG-TAPE-003"), ctg::autodiff_error);
}

TEST_CASE("without a write, the same adjoint runs") {
  product_launched p;
  double const peek = std::as_const(p.y).at(1);  // a read is not a write
  CHECK(peek == 2.0);
  p.adjoint();
  auto const gx = p.x.grad();
  auto const gy = p.y.grad();
  CHECK(gx.at(2) == 2.0);
  CHECK(gy.at(2) == 1.5);
}

TEST_CASE("a tape of this unit verifies contents: a write through data() before backward() raises CTG-TAPE-014") {
  CHECK(ctg::tape_options{}.verify_contents);
  ctg::field<double, 1, ctg::grad> x{{4}, {.name = "x"}}, y{{4}, {.name = "y"}};
  ctg::field<double, 0, ctg::grad> loss{{}, {.name = "loss"}};
  x.fill(1.5);
  y.fill(2.0);
  ctg::tape tape(loss);
  product_launched::k(x, y, loss);
  y.data()[3] = -1.0;
  CHECK_THROWS_WITH_AS(tape.backward(), doctest::Contains("CTG-TAPE-014 backward() uses field 'y'"),
                       ctg::autodiff_error);
}
