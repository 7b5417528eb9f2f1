// Reverse mode through while_ (trip counts and snapshots on the adstack, with
// an explicit ctg::adstack_capacity), and the overflow error.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <string>
#include <vector>

#include "ad_test_support.hpp"

using doctest::Approx;

namespace {
// Plain C++ versions of the kernels below; `count` receives the trip count.
double grow_linear(double x, int& count) {
  double v = x;
  count = 0;
  while (v < 10.0) v = v * 1.3 + x, ++count;
  return v;
}
double grow_nonlinear(double x, int& count) {
  double v = x;
  count = 0;
  while (v < 10.0) v = v * 1.1 + 0.05 * v * v * x + std::sin(v) * 0.1 + x, ++count;
  return v;
}
// Central difference, after checking that x +- h take the same number of
// iterations as x (otherwise the function is not differentiable there).
template <class F>
double fd(F f, double x, double h = 1e-6) {
  int c0 = 0, cp = 0, cm = 0;
  f(x, c0);
  double const plus = f(x + h, cp), minus = f(x - h, cm);
  REQUIRE(c0 == cp);
  REQUIRE(c0 == cm);
  return (plus - minus) / (2 * h);
}
}  // namespace

TEST_CASE("while_ with ctg::adstack_capacity<64>: v = 1.3 v + x[i] until v >= 10") {
  std::vector<double> const xv{0.37, 1.1, 2.9, 0.61, 4.2};
  int const n = int(xv.size());
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), out({n}, {.name = "out"});
  x.copy_from(xv);
  auto k = ctg::kernel<"grow", ctg::adstack_capacity<64>>([](auto x, auto out) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::while_(v < 10.0, v = v * 1.3 + x[i]), out[i] = v);
      });
    });
  });
  k(x, out);
  out.grad().fill(1.0);
  k.grad(x, out);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    int count = 0;
    CHECK(out.at(i) == Approx(grow_linear(xv[i], count)).epsilon(1e-14));
    CHECK(count > 1);
    CHECK(x.grad().at(i) == Approx(fd(grow_linear, xv[i])).epsilon(1e-7));
  }
}

TEST_CASE("while_ with a nonlinear body: every iteration's v comes back from the adstack") {
  std::vector<double> const xv{0.23, 0.71, 1.45, 3.3};
  int const n = int(xv.size());
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), out({n}, {.name = "out"});
  x.copy_from(xv);
  auto k = ctg::kernel<"grow_nl", ctg::adstack_capacity<64>>([](auto x, auto out) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(
            ctg::while_(v < 10.0, v = v * 1.1 + 0.05 * v * v * x[i] + ctg::sin(v) * 0.1 + x[i]), out[i] = v);
      });
    });
  });
  k(x, out);
  out.grad().fill(1.0);
  k.grad(x, out);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    int count = 0;
    CHECK(out.at(i) == Approx(grow_nonlinear(xv[i], count)).epsilon(1e-14));
    CHECK(count >= 2);
    CHECK(x.grad().at(i) == Approx(fd(grow_nonlinear, xv[i])).epsilon(1e-7));
  }
}

TEST_CASE("while_ inside a nested range: one trip count per outer iteration") {
  // For each j < 3: v = v + 0.5 until v > j + 2, then v = sin(v) * w.
  ctg::field<double, 1, ctg::grad> x({2}, {.name = "x"}), out({2}, {.name = "out"});
  ctg::field<double, 0, ctg::grad> w({.name = "w"});
  std::vector<double> const xv{0.13, 0.77};
  x.copy_from(xv);
  w.at() = 1.7;
  auto k = ctg::kernel<"inner_while", ctg::adstack_capacity<32>>([](auto x, auto w, auto out) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::range(3, [=](auto j) {
                            return ctg::block(ctg::while_(v <= ctg::cast<double>(j) + 2.0, v = v + 0.5),
                                              v = ctg::sin(v) * w() + v);
                          }),
                          out[i] = v);
      });
    });
  });
  auto plain = [](double x, double w, int& count) {
    double v = x;
    count = 0;
    for (int j = 0; j < 3; ++j) {
      while (v <= j + 2.0) v = v + 0.5, ++count;
      v = std::sin(v) * w + v;
    }
    return v;
  };
  k(x, w, out);
  out.grad().fill(1.0);
  k.grad(x, w, out);
  double dw = 0;
  for (int i = 0; i < 2; ++i) {
    CAPTURE(i);
    int count = 0;
    CHECK(out.at(i) == Approx(plain(xv[i], 1.7, count)).epsilon(1e-14));
    CHECK(x.grad().at(i) == Approx(fd([&](double t, int& c) { return plain(t, 1.7, c); }, xv[i])).epsilon(1e-7));
    dw += fd([&](double t, int& c) { return plain(xv[i], t, c); }, 1.7);
  }
  CHECK(w.grad().at() == Approx(dw).epsilon(1e-7));
}

TEST_CASE("adstack overflow: more while_ iterations than ctg::adstack_capacity<4> raises autodiff_error") {
  ctg::field<double, 1, ctg::grad> x({3}, {.name = "x"}), out({3}, {.name = "out"});
  x.copy_from(std::vector<double>{0.5, 0.6, 0.7});
  auto body = [](auto x, auto out) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::while_(v < 100.0, v = v * 1.2 + v * v * 0.001 + x[i]), out[i] = v);
      });
    });
  };
  auto small = ctg::kernel<"overflowing", ctg::adstack_capacity<4>>(body);
  small(x, out);  // the forward pass has no adstack
  int count = 0;
  for (double v = 0.5; v < 100.0; v = v * 1.2 + v * v * 0.001 + 0.5) ++count;
  REQUIRE(count > 4);
  out.grad().fill(1.0);
  bool thrown = false;
  try {
    small.grad(x, out);
  } catch (ctg::autodiff_error const& e) {
    thrown = true;
    std::string const what = e.what();
    CHECK(what.find("overflowing") != std::string::npos);
    CHECK(what.find("adstack overflow") != std::string::npos);
    CHECK(what.find("while_ loop at level 1") != std::string::npos);  // names the loop too (DESIGN.md section 3)
    // and says how many iterations the longest one needed (x = 0.5: count)
    CHECK(what.find("at least " + std::to_string(count) + " iterations") != std::string::npos);
  }
  CHECK(thrown);
  // The same loop with room for it runs.
  auto roomy = ctg::kernel<"roomy", ctg::adstack_capacity<64>>(body);
  x.zero_grad();
  out.grad().fill(1.0);
  CHECK_NOTHROW(roomy.grad(x, out));
  auto plain = [](double t, int& c) {
    double v = t;
    c = 0;
    while (v < 100.0) v = v * 1.2 + v * v * 0.001 + t, ++c;
    return v;
  };
  for (int i = 0; i < 3; ++i) CHECK(x.grad().at(i) == Approx(fd(plain, 0.5 + 0.1 * i)).epsilon(1e-7));
}
