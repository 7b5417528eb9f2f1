// ctg::tape (records launches, replays their adjoints in reverse) and
// ctg::check_gradient.
#include <doctest/doctest.h>

#include <utility>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <string>
#include <vector>

#include "ad_test_support.hpp"

using doctest::Approx;

namespace {
int const n = 1000;

struct problem {
  ctg::field<double, 1, ctg::grad> x{{n}, {.name = "x"}}, y{{n}, {.name = "y"}};
  ctg::field<double, 0, ctg::grad> w{{.name = "w"}}, loss{{.name = "loss"}};
  ctg::field<int, 1> marks{{n}, {.name = "marks"}};
  ctg::field<double, 1> plain_out{{n}, {.name = "plain_out"}};
  problem() {
    for (int i = 0; i < n; ++i) x.at(i) = std::sin(0.05 * i);
    w.at() = 0.8;
  }
  // d loss / d x_i for loss = sum_i w y_i^2, y_i = sin(x_i) w + x_i
  double dx(int i) const {
    double const xi = x.at(i), yi = std::sin(xi) * 0.8 + xi;
    return 0.8 * 2 * yi * (std::cos(xi) * 0.8 + 1);
  }
  double dw() const {
    double s = 0;
    for (int i = 0; i < n; ++i) {
      double const xi = x.at(i), yi = std::sin(xi) * 0.8 + xi;
      s += yi * yi + 0.8 * 2 * yi * std::sin(xi);
    }
    return s;
  }
};

auto const step = ctg::kernel<"step">([](auto x, auto w, auto y) {
  return ctg::range(x.size(), [=](auto i) { return y[i] = ctg::sin(x[i]) * w() + x[i]; });
});
auto const measure = ctg::kernel<"measure">([](auto y, auto w, auto loss) {
  return ctg::range(y.size(), [=](auto i) { return loss() += w() * y[i] * y[i]; });
});
// Touches no field with a gradient: never recorded.
auto const bookkeeping = ctg::kernel<"bookkeeping">([](auto marks, auto plain_out) {
  return ctg::range(marks.size(), [=](auto i) { return ctg::block(marks[i] = i * 2, plain_out[i] = 1.5); });
});
}  // namespace

TEST_CASE("tape.backward() gives the gradients of the adjoints called by hand in reverse order") {
  problem by_hand, taped;
  step(by_hand.x, by_hand.w, by_hand.y);
  measure(by_hand.y, by_hand.w, by_hand.loss);
  by_hand.loss.grad().at() = 1.0;
  measure.grad(by_hand.y, by_hand.w, by_hand.loss);
  step.grad(by_hand.x, by_hand.w, by_hand.y);
  {
    ctg::tape tape(taped.loss);
    step(taped.x, taped.w, taped.y);
    bookkeeping(taped.marks, taped.plain_out);
    measure(taped.y, taped.w, taped.loss);
    CHECK(tape.size() == 2);
    tape.backward();
  }
  CHECK(taped.loss.at() == Approx(by_hand.loss.at()).epsilon(1e-14));
  for (int i = 0; i < n; ++i) {
    CHECK(taped.x.grad().at(i) == Approx(by_hand.x.grad().at(i)).epsilon(1e-13));
    CHECK(taped.x.grad().at(i) == Approx(taped.dx(i)).epsilon(1e-12));
  }
  CHECK(taped.w.grad().at() == Approx(by_hand.w.grad().at()).epsilon(1e-12));
  CHECK(taped.w.grad().at() == Approx(taped.dw()).epsilon(1e-11));
  CHECK(taped.marks.at(7) == 14);  // the unrecorded kernel still ran forward
}

TEST_CASE("backward() zeroes the recorded fields' gradients first, unless ctg::keep_gradients") {
  SUBCASE("default: stale gradients are cleared") {
    problem p;
    p.x.grad().fill(100.0);
    p.y.grad().fill(-7.0);
    p.w.grad().at() = 42.0;
    ctg::tape tape(p.loss);
    step(p.x, p.w, p.y);
    measure(p.y, p.w, p.loss);
    tape.backward();
    for (int i = 0; i < n; i += 37) CHECK(p.x.grad().at(i) == Approx(p.dx(i)).epsilon(1e-12));
    CHECK(p.w.grad().at() == Approx(p.dw()).epsilon(1e-11));
  }
  SUBCASE("keep_gradients: the adjoint adds to what is there") {
    problem p;
    p.x.grad().fill(100.0);
    p.w.grad().at() = 42.0;
    ctg::tape tape(p.loss, ctg::keep_gradients);
    step(p.x, p.w, p.y);
    measure(p.y, p.w, p.loss);
    tape.backward();
    for (int i = 0; i < n; i += 37) CHECK(p.x.grad().at(i) == Approx(100.0 + p.dx(i)).epsilon(1e-12));
    CHECK(p.w.grad().at() == Approx(42.0 + p.dw()).epsilon(1e-11));
  }
  SUBCASE("keep_gradients: an intermediate field's gradient from an earlier backward() flows nowhere") {
    // Two batches, each h = w x_b, loss = h^2: d loss / dw summed is
    // 2 w (1^2 + 2^2) = 15 at w = 1.5. The gradient h kept from the first
    // batch must not act as a seed of the second's adjoint (21 if it does).
    ctg::field<double, 0, ctg::grad> w({.name = "w"}), h({.name = "h"}), loss({.name = "loss"});
    constexpr auto scale = ctg::kernel<"scale_batch">([](auto w, auto h, double x) { return h() += w() * x; });
    constexpr auto square = ctg::kernel<"square_batch">([](auto h, auto loss) { return loss() = h() * h(); });
    w.at() = 1.5;
    for (double x : {1.0, 2.0}) {
      h.fill(0.0);
      ctg::tape tape(loss, ctg::keep_gradients);
      scale(w, h, x);
      square(h, loss);
      tape.backward();
    }
    CHECK(w.grad().at() == Approx(15.0));
  }
}

TEST_CASE("backward() twice throws; a second tape cannot record while one is active") {
  problem p;
  ctg::tape tape(p.loss);
  CHECK_THROWS_AS([&] { ctg::tape other(p.loss); }(), ctg::autodiff_error);
  step(p.x, p.w, p.y);
  tape.backward();
  CHECK_THROWS_AS(tape.backward(), ctg::autodiff_error);
}

TEST_CASE("only launches that touch a field with a gradient are recorded") {
  problem p;
  ctg::tape tape(p.loss);
  CHECK(tape.size() == 0);
  bookkeeping(p.marks, p.plain_out);
  CHECK(tape.size() == 0);
  step(p.x, p.w, p.y);
  CHECK(tape.size() == 1);
  bookkeeping(p.marks, p.plain_out);
  measure(p.y, p.w, p.loss);
  measure(p.y, p.w, p.loss);
  CHECK(tape.size() == 3);
  tape.backward();
  // loss was accumulated twice: the gradient doubles.
  for (int i = 0; i < n; i += 101) CHECK(p.x.grad().at(i) == Approx(2 * p.dx(i)).epsilon(1e-12));
}

TEST_CASE("a time-stepped simulation on a tape: one launch per step with the step as a scalar") {
  int const steps = 30, m = 3;
  ctg::field<double, 2, ctg::grad> s({steps + 1, m}, {.name = "s"});
  ctg::field<double, 1, ctg::grad> s0({m}, {.name = "s0"});
  ctg::field<double, 0, ctg::grad> k({.name = "k"}), loss({.name = "loss"});
  std::vector<double> const init{0.5, -0.2, 1.1};
  s0.copy_from(init);
  k.at() = 0.3;
  auto start = ctg::kernel<"start">(
      [](auto s, auto s0) { return ctg::range(s0.size(), [=](auto j) { return s(0, j) = s0[j]; }); });
  auto advance = ctg::kernel<"advance">([](auto s, auto k, int t) {
    return ctg::range(s.shape(ctg::c<1>),
                      [=](auto j) { return s(t + 1, j) = s(t, j) + 0.1 * ctg::sin(s(t, j) * k()); });
  });
  auto final_loss = ctg::kernel<"final">([](auto s, auto loss, int t) {
    return ctg::range(s.shape(ctg::c<1>), [=](auto j) { return loss() += s(t, j) * s(t, j); });
  });
  auto plain = [&](std::vector<double> const& p) {  // p = (s0, k)
    double L = 0;
    for (int j = 0; j < m; ++j) {
      double v = p[j];
      for (int t = 0; t < steps; ++t) v = v + 0.1 * std::sin(v * p[m]);
      L += v * v;
    }
    return L;
  };
  ctg::tape tape(loss);
  start(s, s0);
  for (int t = 0; t < steps; ++t) advance(s, k, t);
  final_loss(s, loss, steps);
  CHECK(tape.size() == std::size_t(steps + 2));
  tape.backward();
  std::vector<double> p = init;
  p.push_back(0.3);
  CHECK(loss.at() == Approx(plain(p)).epsilon(1e-13));
  auto const g = ad_test::fd_gradient(plain, p);
  for (int j = 0; j < m; ++j) CHECK(s0.grad().at(j) == Approx(g[j]).epsilon(1e-7));
  CHECK(k.grad().at() == Approx(g[m]).epsilon(1e-7));
}

TEST_CASE("a forward-only kernel runs on fields with gradients, but not under a tape") {
  ctg::field<double, 1, ctg::grad> x({2}, {.name = "x"}), out({2}, {.name = "out"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  x.fill(0.5);
  // A nonlinear carried local in a nested loop needs the adstack: without it
  // the kernel cannot be differentiated, and says so at compile time unless
  // it is declared forward-only.
  auto k = ctg::kernel<"needs_stack", ctg::no_adstack, ctg::forward_only>([](auto x, auto out, int iters) {
    return ctg::range(2, [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::range(iters, [=](auto) { return v = ctg::sin(v); }), out[i] = v);
      });
    });
  });
  k(x, out, 3);
  CHECK(std::as_const(out).at(0) == Approx(std::sin(std::sin(std::sin(0.5)))));
  ctg::tape tape(loss);
  CHECK_THROWS_WITH_AS(k(x, out, 3), doctest::Contains("CTG-TAPE-004"), ctg::autodiff_error);
  CHECK_THROWS_WITH_AS(k(x, out, 3), doctest::Contains("needs_stack"), ctg::autodiff_error);
}

TEST_CASE("check_gradient: small error on a correct adjoint, large on a deliberately wrong one") {
  problem p;
  auto forward = [&] {
    p.loss.at() = 0.0;
    step(p.x, p.w, p.y);
    measure(p.y, p.w, p.loss);
  };
  auto r = ctg::check_gradient(forward, p.loss, p.x, p.w);
  CHECK(r.checked + r.both_zero == 17);  // 16 samples of x and the single w
  CHECK(r.worst_relative_error < 1e-6);
  // The gradients are left in place, the parameters restored.
  CHECK(p.x.grad().at(0) == Approx(p.dx(0)).epsilon(1e-12));
  CHECK(p.w.at() == 0.8);
  for (int i = 0; i < n; i += 97) CHECK(p.x.at(i) == std::sin(0.05 * i));

  // stop_grad hides half of d(x^2)/dx = 2x from the adjoint: relative error 1/2.
  ctg::field<double, 1, ctg::grad> x({5}, {.name = "x"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  for (int i = 0; i < 5; ++i) x.at(i) = 0.3 + 0.2 * i;
  auto wrong = ctg::kernel<"wrong">([](auto x, auto loss) {
    return ctg::range(5, [=](auto i) { return loss() += x[i] * ctg::stop_grad(x[i]); });
  });
  auto bad = ctg::check_gradient([&] { loss.at() = 0.0, wrong(x, loss); }, loss, x);
  CHECK(bad.checked == 5);
  CHECK(bad.worst_relative_error == Approx(0.5).epsilon(1e-4));
  CHECK(bad.worst.find("'x'") != std::string::npos);
}

TEST_CASE("check_gradient reports a NaN adjoint as an infinite error") {
  ctg::field<double, 1, ctg::grad> x({2}, {.name = "x"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  x.at(0) = 1.0, x.at(1) = -1.0;
  // At |x| = 1, sqrt'(0) is infinite and times zero the adjoint is NaN, while
  // the finite difference sees only the `+ x[i]` term.
  auto k = ctg::kernel<"k">([](auto x, auto loss) {
    return ctg::range(2, [=](auto i) { return loss() += ctg::sqrt(ctg::abs(x[i]) - 1.0) * 0.0 + x[i]; });
  });
  auto r = ctg::check_gradient([&] { loss.at() = 0; k(x, loss); }, loss, x);
  CHECK(std::isinf(r.worst_relative_error));
}
