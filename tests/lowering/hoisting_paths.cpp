// Each way hoisting moves a let-block, in one kernel run forward, in reverse
// and in forward mode: a select of one (it becomes an if_), one in an if_
// condition and one under stop_grad (their statements take no gradient: at
// x = 0 the sqrt inside has an infinite partial that must not become NaN).
// Built at -O1 and run under valgrind memcheck in CI.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

using doctest::Approx;
using namespace ctg::literals;

TEST_CASE("select, if_ condition and stop_grad around let-block funcs: values, gradient, tangent") {
  auto root = ctg::func<"root">(
      [](auto x) { return ctg::let(x, [=](auto v) { return ctg::block(v = ctg::sqrt(v), ctg::result(v)); }); });
  constexpr ctg::flags both = ctg::grad | ctg::dual;
  std::vector<double> const xv{0.0, 0.81, -1.44};
  ctg::field<double, 1, both> x({3}, {.name = "x"});
  ctg::field<double, 2, both> out({3, 3}, {.name = "out"});
  x.copy_from(xv);
  x.dual().fill(1.0);
  auto k = ctg::kernel<"hoisting_paths">([=](auto x, auto out) {
    return ctg::range(3, [=](auto i) {
      return ctg::block(out(i, 0_c) = ctg::select(x[i] > 0.0, root(x[i]), -2.0 * x[i]),
                        ctg::if_(root(x[i] * x[i]) > 0.5, out(i, 1_c) = 3.0 * x[i], out(i, 1_c) = x[i]),
                        out(i, 2_c) = x[i] * ctg::stop_grad(root(x[i] * x[i])));
    });
  });
  k(x, out);
  out.grad().fill(1.0);
  k.grad(x, out);
  k.fwd(x, out);
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    double const t = xv[std::size_t(i)];
    double const magnitude = std::abs(t);
    CHECK(out.at(i, 0) == Approx(t > 0 ? std::sqrt(t) : -2 * t).epsilon(1e-15));
    CHECK(out.at(i, 1) == Approx(magnitude > 0.5 ? 3 * t : t).epsilon(1e-15));
    CHECK(out.at(i, 2) == Approx(t * magnitude).epsilon(1e-15));
    // d/dt of each output; stop_grad keeps |t| constant.
    double const slope = (t > 0 ? 0.5 / std::sqrt(t) : -2.0) + (magnitude > 0.5 ? 3.0 : 1.0) + magnitude;
    CHECK(x.grad().at(i) == Approx(slope).epsilon(1e-14));
    CHECK(out.dual().at(i, 0) + out.dual().at(i, 1) + out.dual().at(i, 2) == Approx(slope).epsilon(1e-14));
  }
}
