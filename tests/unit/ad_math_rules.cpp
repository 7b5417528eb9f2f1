// Reverse-mode derivative of every scalar math operation against its closed
// form, and the documented edge rules (comment at the top of ad/derivatives.hpp).
// Each output reads its own input element, so each input's gradient is the
// derivative of exactly one operation.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

using doctest::Approx;

TEST_CASE("unary math: the adjoint is f'(x) times the seed") {
  std::vector<double> const xv{0.3, 0.7, 0.4, -0.6, 0.25, -0.35, 1.7, 0.9, 2.5, 1.3, 0.8, -1.2, 0.6, 0.45};
  int const n = int(xv.size());
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  x.copy_from(xv);
  auto k = ctg::kernel<"unary">([](auto x, auto y) {
    return ctg::block(y[0] = ctg::sin(x[0]), y[1] = ctg::cos(x[1]), y[2] = ctg::tan(x[2]), y[3] = ctg::tanh(x[3]),
                      y[4] = ctg::asin(x[4]), y[5] = ctg::acos(x[5]), y[6] = ctg::atan(x[6]), y[7] = ctg::exp(x[7]),
                      y[8] = ctg::log(x[8]), y[9] = ctg::sqrt(x[9]), y[10] = ctg::rsqrt(x[10]),
                      y[11] = ctg::abs(x[11]), y[12] = ctg::abs(x[12]), y[13] = -x[13]);
  });
  k(x, y);
  std::vector<double> seed(n);
  for (int i = 0; i < n; ++i) seed[i] = 1.0 + 0.125 * i;
  y.grad().copy_from(seed);
  k.grad(x, y);
  auto const& v = xv;
  double const want[] = {std::cos(v[0]),
                         -std::sin(v[1]),
                         1.0 / (std::cos(v[2]) * std::cos(v[2])),
                         1.0 - std::tanh(v[3]) * std::tanh(v[3]),
                         1.0 / std::sqrt(1.0 - v[4] * v[4]),
                         -1.0 / std::sqrt(1.0 - v[5] * v[5]),
                         1.0 / (1.0 + v[6] * v[6]),
                         std::exp(v[7]),
                         1.0 / v[8],
                         0.5 / std::sqrt(v[9]),
                         -0.5 * std::pow(v[10], -1.5),
                         -1.0,
                         1.0,
                         -1.0};
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    CHECK(x.grad().at(i) == Approx(seed[i] * want[i]).epsilon(1e-13));
    CHECK(y.grad().at(i) == 0.0);
  }
}

TEST_CASE("binary math: atan2, pow, min, max, division, product, difference") {
  std::vector<double> const av{0.8, -0.6, 0.3, 1.7, 0.4, 2.5, 1.5, -0.7, 3.0};
  std::vector<double> const bv{0.5, -1.1, -0.9, 2.3, 0.9, 1.2, -4.0, 1.3, 2.0};
  int const n = int(av.size());
  ctg::field<double, 1, ctg::grad> a({n}, {.name = "a"}), b({n}, {.name = "b"}), y({n}, {.name = "y"});
  a.copy_from(av);
  b.copy_from(bv);
  auto k = ctg::kernel<"binary">([](auto a, auto b, auto y) {
    return ctg::block(y[0] = ctg::atan2(a[0], b[0]), y[1] = ctg::atan2(a[1], b[1]), y[2] = ctg::atan2(a[2], b[2]),
                      y[3] = ctg::pow(a[3], b[3]), y[4] = ctg::min(a[4], b[4]), y[5] = ctg::max(a[5], b[5]),
                      y[6] = a[6] / b[6], y[7] = a[7] * b[7], y[8] = a[8] - b[8]);
  });
  k(a, b, y);
  y.grad().fill(2.0);
  k.grad(a, b, y);
  std::vector<double> da(n), db(n);
  for (int i = 0; i < 3; ++i) {  // atan2(y, x): d/dy = x / r^2, d/dx = -y / r^2
    double const r2 = av[i] * av[i] + bv[i] * bv[i];
    da[i] = bv[i] / r2;
    db[i] = -av[i] / r2;
  }
  da[3] = bv[3] * std::pow(av[3], bv[3] - 1);  // pow(x, y)
  db[3] = std::pow(av[3], bv[3]) * std::log(av[3]);
  da[4] = 1, db[4] = 0;  // min(0.4, 0.9) picks a
  da[5] = 1, db[5] = 0;  // max(2.5, 1.2) picks a
  da[6] = 1 / bv[6], db[6] = -av[6] / (bv[6] * bv[6]);
  da[7] = bv[7], db[7] = av[7];
  da[8] = 1, db[8] = -1;
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    CHECK(a.grad().at(i) == Approx(2 * da[i]).epsilon(1e-13));
    CHECK(b.grad().at(i) == Approx(2 * db[i]).epsilon(1e-13));
  }
}

TEST_CASE("min and max ties send the gradient to the second operand") {
  ctg::field<double, 1, ctg::grad> a({4}, {.name = "a"}), b({4}, {.name = "b"}), y({4}, {.name = "y"});
  a.fill(1.25);
  b.fill(1.25);
  auto k = ctg::kernel<"ties">([](auto a, auto b, auto y) {
    return ctg::block(y[0] = ctg::min(a[0], b[0]), y[1] = ctg::max(a[1], b[1]), y[2] = ctg::min(b[2], a[2]),
                      y[3] = ctg::max(b[3], a[3]));
  });
  k(a, b, y);
  y.grad().fill(1.0);
  k.grad(a, b, y);
  CHECK(a.grad().at(0) == 0.0);
  CHECK(b.grad().at(0) == 1.0);
  CHECK(a.grad().at(1) == 0.0);
  CHECK(b.grad().at(1) == 1.0);
  // Operands swapped: now a is second.
  CHECK(a.grad().at(2) == 1.0);
  CHECK(b.grad().at(2) == 0.0);
  CHECK(a.grad().at(3) == 1.0);
  CHECK(b.grad().at(3) == 0.0);
}

TEST_CASE("clamp = min(max(x, lo), hi): slope 1 strictly inside, 0 outside and at the bounds (ties)") {
  std::vector<double> const xv{-2.0, 0.0, 0.5, 1.0, 3.0};
  ctg::field<double, 1, ctg::grad> x({5}, {.name = "x"}), y({5}, {.name = "y"});
  x.copy_from(xv);
  auto k = ctg::kernel<"clamp">(
      [](auto x, auto y) { return ctg::range(5, [=](auto i) { return y[i] = ctg::clamp(x[i], 0.0, 1.0); }); });
  k(x, y);
  y.grad().fill(1.0);
  k.grad(x, y);
  double const want[] = {0, 0, 1, 0, 0};
  for (int i = 0; i < 5; ++i) CHECK(x.grad().at(i) == want[i]);
}

TEST_CASE("sqrt'(0) = +inf, as the math says") {
  ctg::field<double, 0, ctg::grad> x({.name = "x"}), y({.name = "y"});
  auto k = ctg::kernel<"sqrt0">([](auto x, auto y) { return y() = ctg::sqrt(x()); });
  k(x, y);
  y.grad().at() = 1.0;
  k.grad(x, y);
  CHECK(std::isinf(x.grad().at()));
  CHECK(x.grad().at() > 0);
}

TEST_CASE("abs'(0) = 0; floor, ceil, round, sign and comparisons carry no gradient") {
  ctg::field<double, 1, ctg::grad> x({6}, {.name = "x"}), y({6}, {.name = "y"});
  x.copy_from(std::vector<double>{0.0, 2.7, 2.2, -1.6, 0.8, 0.3});
  auto k = ctg::kernel<"piecewise">([](auto x, auto y) {
    return ctg::block(
        y[0] = ctg::abs(x[0]),
        // floor(x) * x: the product rule leaves floor(x) because floor' = 0.
        y[1] = ctg::floor(x[1]) * x[1], y[2] = ctg::ceil(x[2]) * x[2], y[3] = ctg::round(x[3]) * x[3],
        y[4] = ctg::sign(x[4]) * 5.0 + ctg::floor(x[4] * 3.0),
        y[5] = ctg::cast<double>(x[5] > 0.25) * 4.0 + ctg::cast<double>(x[5] <= 1.0) + ctg::cast<double>(x[5] == x[5]));
  });
  k(x, y);
  y.grad().fill(1.0);
  k.grad(x, y);
  CHECK(y.at(5) == 6.0);
  CHECK(x.grad().at(0) == 0.0);
  CHECK(x.grad().at(1) == Approx(2.0));   // floor(2.7)
  CHECK(x.grad().at(2) == Approx(3.0));   // ceil(2.2)
  CHECK(x.grad().at(3) == Approx(-2.0));  // round(-1.6)
  CHECK(x.grad().at(4) == 0.0);
  CHECK(x.grad().at(5) == 0.0);
}

TEST_CASE("integer casts stop the gradient; float <-> double casts pass it") {
  ctg::field<double, 1, ctg::grad> x({2}, {.name = "x"}), y({2}, {.name = "y"});
  ctg::field<float, 1, ctg::grad> xf({1}, {.name = "xf"});
  ctg::field<float, 1, ctg::grad> yf({1}, {.name = "yf"});
  x.copy_from(std::vector<double>{1.37, 0.6});
  xf.at(0) = 1.5f;
  auto k = ctg::kernel<"casts">([](auto x, auto y, auto xf, auto yf) {
    return ctg::block(
        // cast<int>(10 x) / 10 + x: only the last term carries a gradient.
        y[0] = ctg::cast<double>(ctg::cast<int>(x[0] * 10.0)) * 0.1 + x[0],
        y[1] = ctg::cast<double>(xf[0]) * ctg::cast<double>(xf[0]) + ctg::cast<double>(ctg::cast<long long>(xf[0])),
        yf[0] = ctg::cast<float>(x[1] * x[1] * x[1]));
  });
  k(x, y, xf, yf);
  CHECK(y.at(0) == Approx(1.3 + 1.37));
  y.grad().fill(1.0);
  yf.grad().fill(1.0f);
  k.grad(x, y, xf, yf);
  CHECK(x.grad().at(0) == Approx(1.0).epsilon(1e-14));
  CHECK(xf.grad().at(0) == Approx(3.0).epsilon(1e-6));            // 2 * 1.5
  CHECK(x.grad().at(1) == Approx(3 * 0.6 * 0.6).epsilon(1e-6));  // through a float result
}

TEST_CASE("pow: d/dy = 0 where x <= 0, d/dx = y x^(y-1) still holds there") {
  std::vector<double> const xv{-2.0, 0.0, 2.0, 0.5};
  std::vector<double> const ev{2.0, 2.0, 3.0, 0.0};
  ctg::field<double, 1, ctg::grad> x({4}, {.name = "x"}), e({4}, {.name = "e"}), y({4}, {.name = "y"});
  x.copy_from(xv);
  e.copy_from(ev);
  auto k = ctg::kernel<"pow">(
      [](auto x, auto e, auto y) { return ctg::range(4, [=](auto i) { return y[i] = ctg::pow(x[i], e[i]); }); });
  k(x, e, y);
  CHECK(y.at(0) == 4.0);
  y.grad().fill(1.0);
  k.grad(x, e, y);
  CHECK(x.grad().at(0) == Approx(-4.0));  // 2 * (-2)^1
  CHECK(e.grad().at(0) == 0.0);
  CHECK(x.grad().at(1) == 0.0);  // 2 * 0^1
  CHECK(e.grad().at(1) == 0.0);
  CHECK(x.grad().at(2) == Approx(12.0));                // 3 * 2^2
  CHECK(e.grad().at(2) == Approx(8.0 * std::log(2.0)));  // 2^3 ln 2
  CHECK(x.grad().at(3) == 0.0);                          // d/dx x^0 = 0
  CHECK(e.grad().at(3) == Approx(std::log(0.5)));        // 0.5^0 ln 0.5
}

TEST_CASE("fmod: C's remainder, d/dx = 1 and d/dy = -trunc(x / y), against central differences and in tangents") {
  // Signs of both operands, a quotient below one, a multiple-of-y neighbourhood avoided.
  std::vector<double> const xv{5.3, -5.3, 5.3, -5.3, 0.4, 7.9};
  std::vector<double> const mv{1.5, 1.5, -1.5, -1.5, 2.5, 0.75};
  int const n = int(xv.size());
  ctg::field<double, 1, ctg::grad | ctg::dual> x({n}, {.name = "x"}), m({n}, {.name = "m"}), y({n}, {.name = "y"});
  x.copy_from(xv);
  m.copy_from(mv);
  auto k = ctg::kernel<"fmod">([](auto x, auto m, auto y) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = ctg::fmod(x[i], m[i]) * (1.0 + 0.1 * x[i]); });
  });
  auto plain = [](double a, double b) { return std::fmod(a, b) * (1.0 + 0.1 * a); };
  k(x, m, y);
  y.grad().fill(1.0);
  k.grad(x, m, y);
  x.dual().fill(1.0);
  m.dual().fill(-0.5);
  k.fwd(x, m, y);
  double const h = 1e-6;
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    double const a = xv[std::size_t(i)], b = mv[std::size_t(i)];
    CHECK(y.at(i) == Approx(plain(a, b)).epsilon(1e-15));
    double const dx = (plain(a + h, b) - plain(a - h, b)) / (2 * h);
    double const dm = (plain(a, b + h) - plain(a, b - h)) / (2 * h);
    CHECK(x.grad().at(i) == Approx(dx).epsilon(1e-8));
    CHECK(m.grad().at(i) == Approx(dm).epsilon(1e-8));
    CHECK(y.dual().at(i) == Approx(dx - 0.5 * dm).epsilon(1e-8));
  }
}

TEST_CASE("fmod: the quotient in d/dy is fmod's own where x / y rounds to the next integer") {
  // 1.0 / 0.1 rounds to 10, but fmod(1.0, 0.1) = 0.0999... = 1.0 - 9 * 0.1
  // (0.1 is a little above a tenth): d/dy = -9, from the right (y + h) too.
  ctg::field<double, 1, ctg::grad | ctg::dual> x({1}, {.name = "x"}), m({1}, {.name = "m"}), y({1}, {.name = "y"});
  x.at(0) = 1.0;
  m.at(0) = 0.1;
  auto k = ctg::kernel<"fmod_edge">([](auto x, auto m, auto y) {
    return ctg::range(1, [=](auto i) { return y[i] = ctg::fmod(x[i], m[i]); });
  });
  k(x, m, y);
  CHECK(y.at(0) == std::fmod(1.0, 0.1));
  CHECK(std::fmod(1.0, 0.1) > 0.09);
  y.grad().fill(1.0);
  k.grad(x, m, y);
  double const h = 1e-7;
  CHECK((std::fmod(1.0, 0.1 + h) - std::fmod(1.0, 0.1)) / h == Approx(-9.0).epsilon(1e-6));
  CHECK(m.grad().at(0) == -9.0);
  CHECK(x.grad().at(0) == 1.0);
  x.dual().fill(0.0);
  m.dual().fill(1.0);
  k.fwd(x, m, y);
  CHECK(y.dual().at(0) == -9.0);
}

TEST_CASE("stop_grad stops the gradient of its operand only") {
  ctg::field<double, 1, ctg::grad> x({3}, {.name = "x"}), y({3}, {.name = "y"});
  x.copy_from(std::vector<double>{0.7, 1.9, -0.4});
  auto k = ctg::kernel<"stopped">([](auto x, auto y) {
    return ctg::block(y[0] = ctg::stop_grad(x[0] * x[0]) + x[0], y[1] = x[1] * ctg::stop_grad(x[1]),
                      y[2] = ctg::stop_grad(ctg::sin(x[2])));
  });
  k(x, y);
  y.grad().fill(1.0);
  k.grad(x, y);
  CHECK(x.grad().at(0) == Approx(1.0));
  CHECK(x.grad().at(1) == Approx(1.9));  // not 2 * 1.9
  CHECK(x.grad().at(2) == 0.0);
}

// The adjoint records only the side a select takes, as the forward pass
// evaluates it: the other side's integer division by zero would stop the
// process. Its record is storage that constructs nothing, because
// constructing a math record computes the operation.
TEST_CASE("select: the side not taken is not evaluated by the adjoint") {
  std::vector<int> const dv{0, 3, 0, -4, 6};
  ctg::field<double, 1, ctg::grad> x({5}, {.name = "x"}), y({5}, {.name = "y"});
  ctg::field<int, 1> d({5}, {.name = "d"});
  d.copy_from(dv);
  x.fill(2.0);
  auto k = ctg::kernel<"guarded_division">([](auto x, auto d, auto y) {
    return ctg::range(5, [=](auto i) {
      return y[i] = ctg::select(d[i] != 0, x[i] * x[i] * ctg::cast<double>(12 / d[i]), ctg::sin(x[i]));
    });
  });
  k(x, d, y);
  y.grad().fill(1.0);
  k.grad(x, d, y);
  for (int i = 0; i < 5; ++i) {
    CAPTURE(i);
    double const want = dv[i] != 0 ? 2.0 * 2.0 * (12 / dv[i]) : std::cos(2.0);
    CHECK(x.grad().at(i) == Approx(want).epsilon(1e-14));
  }
}

TEST_CASE("select routes the gradient to the chosen side only") {
  std::vector<double> const xv{-1.0, 0.0, 0.64, 2.0};
  ctg::field<double, 1, ctg::grad> x({4}, {.name = "x"}), a({4}, {.name = "a"}), b({4}, {.name = "b"}),
      y({4}, {.name = "y"}), z({4}, {.name = "z"});
  x.copy_from(xv);
  a.fill(3.0);
  b.fill(5.0);
  auto k = ctg::kernel<"select">([](auto x, auto a, auto b, auto y, auto z) {
    return ctg::range(4, [=](auto i) {
      return ctg::block(y[i] = ctg::select(x[i] > 0.5, a[i] * a[i], 7.0 * b[i]),
                        // sqrt(x) at x = -1 is NaN and sqrt'(0) is inf: neither side may leak.
                        z[i] = ctg::select(x[i] > 0.0, ctg::sqrt(x[i]), -x[i]));
    });
  });
  k(x, a, b, y, z);
  y.grad().fill(1.0);
  z.grad().fill(1.0);
  k.grad(x, a, b, y, z);
  for (int i = 0; i < 4; ++i) {
    CAPTURE(i);
    bool const first = xv[i] > 0.5;
    CHECK(a.grad().at(i) == (first ? 6.0 : 0.0));
    CHECK(b.grad().at(i) == (first ? 0.0 : 7.0));
    double const want = xv[i] > 0.0 ? 0.5 / std::sqrt(xv[i]) : -1.0;
    CHECK(x.grad().at(i) == Approx(want).epsilon(1e-14));
  }
}

TEST_CASE("binary math on vectors: coefficient by coefficient, a scalar operand broadcast; adjoint and tangent") {
  using v3 = Eigen::Vector3d;
  v3 const av(0.5, 1.2, 3.0), bv(0.3, -0.7, 1.1), da(1.0, -0.5, 2.0), db(-1.5, 0.25, 0.75);
  double const s = 0.9, ds = 0.4;
  ctg::field<v3, 0, ctg::grad | ctg::dual> a({.name = "a"}), b({.name = "b"});
  ctg::field<double, 0, ctg::grad | ctg::dual> c({.name = "c"});
  ctg::field<v3, 1, ctg::grad | ctg::dual> y({5}, {.name = "y"});
  a.at() = av;
  b.at() = bv;
  c.at() = s;
  auto k = ctg::kernel<"vector_binary">([](auto a, auto b, auto c, auto y) {
    return ctg::block(y[0] = ctg::pow(a(), b()), y[1] = ctg::atan2(a(), b()), y[2] = ctg::max(a(), b()),
                      y[3] = ctg::min(a(), c()), y[4] = ctg::clamp(a(), b(), ctg::vec(1.0, 1.0, 1.0)));
  });
  // The closed forms, coefficient by coefficient: d/da and d/db of each output.
  v3 const seed[5] = {v3(1.0, 2.0, -1.0), v3(0.5, -1.0, 3.0), v3(2.0, 1.0, 1.0), v3(-1.0, 1.5, 0.5), v3(1.0, 1.0, 4.0)};
  v3 da_of[5], db_of[5];
  double dc = 0;
  for (int q = 0; q < 3; ++q) {
    double const x = av(q), z = bv(q), r2 = x * x + z * z;
    da_of[0](q) = z * std::pow(x, z - 1);
    db_of[0](q) = std::pow(x, z) * std::log(x);
    da_of[1](q) = z / r2;
    db_of[1](q) = -x / r2;
    da_of[2](q) = x > z ? 1.0 : 0.0;
    db_of[2](q) = x > z ? 0.0 : 1.0;
    da_of[3](q) = x < s ? 1.0 : 0.0;
    db_of[3](q) = 0.0;
    dc += (x < s ? 0.0 : 1.0) * seed[3](q);
    double const lifted = x > z ? x : z;  // clamp(x, lo, 1) = min(max(x, lo), 1)
    da_of[4](q) = lifted < 1.0 ? (x > z ? 1.0 : 0.0) : 0.0;
    db_of[4](q) = lifted < 1.0 ? (x > z ? 0.0 : 1.0) : 0.0;
  }
  k(a, b, c, y);
  CHECK(y.at(0).isApprox(v3(std::pow(0.5, 0.3), std::pow(1.2, -0.7), std::pow(3.0, 1.1)), 1e-14));
  for (int o = 0; o < 5; ++o) y.grad().at(o) = seed[o];
  k.grad(a, b, c, y);
  v3 want_a = v3::Zero(), want_b = v3::Zero();
  for (int o = 0; o < 5; ++o) {
    want_a += seed[o].cwiseProduct(da_of[o]);
    want_b += seed[o].cwiseProduct(db_of[o]);
  }
  CHECK(a.grad().at().isApprox(want_a, 1e-13));
  CHECK(b.grad().at().isApprox(want_b, 1e-13));
  CHECK(c.grad().at() == Approx(dc).epsilon(1e-13));

  // Forward mode: the tangent of each output along (da, db, ds).
  a.dual().at() = da;
  b.dual().at() = db;
  c.dual().at() = ds;
  k.fwd(a, b, c, y);
  for (int o = 0; o < 5; ++o) {
    CAPTURE(o);
    v3 want = da_of[o].cwiseProduct(da) + db_of[o].cwiseProduct(db);
    if (o == 3)
      for (int q = 0; q < 3; ++q) want(q) += (av(q) < s ? 0.0 : 1.0) * ds;
    CHECK(y.dual().at(o).isApprox(want, 1e-13));
  }
}
