// Forward mode (k.fwd): the tangent written to an output's .dual() is the
// directional derivative along the inputs' .dual(). Checked against closed
// forms, central differences along the direction, and the reverse-mode
// gradient dotted with the direction.
#include <doctest/doctest.h>

#include <Eigen/Dense>
#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

#include "ad_test_support.hpp"

using doctest::Approx;
using namespace ctg::literals;

namespace {
constexpr ctg::flags both = ctg::grad | ctg::dual;

// (f(p + h d) - f(p - h d)) / 2h
template <class F>
double directional_fd(F const& f, std::vector<double> const& p, std::vector<double> const& d, double h = 1e-6) {
  std::vector<double> plus = p, minus = p;
  for (std::size_t k = 0; k < p.size(); ++k) plus[k] += h * d[k], minus[k] -= h * d[k];
  return (f(plus) - f(minus)) / (2 * h);
}
}  // namespace

TEST_CASE("elementwise: y.dual = f'(x) x.dual, and the primal is written as in the forward pass") {
  std::vector<double> const xv{-0.9, 0.1, 0.75, 1.6}, dv{1.0, -2.0, 0.5, 3.0};
  ctg::field<double, 1, ctg::dual> x({4}, {.name = "x"}), y({4}, {.name = "y"});
  ctg::field<double, 1> c({4}, {.name = "c"});  // no tangent buffer: a constant
  x.copy_from(xv);
  x.dual().copy_from(dv);
  c.fill(2.0);
  auto k = ctg::kernel<"elementwise">([](auto x, auto c, auto y) {
    return ctg::range(4, [=](auto i) { return y[i] = ctg::sin(x[i]) * ctg::exp(x[i]) * c[i] + ctg::atan(x[i]); });
  });
  k.fwd(x, c, y);
  for (int i = 0; i < 4; ++i) {
    double const t = xv[i];
    CHECK(y.at(i) == Approx(2 * std::sin(t) * std::exp(t) + std::atan(t)).epsilon(1e-14));
    double const slope = 2 * (std::cos(t) + std::sin(t)) * std::exp(t) + 1 / (1 + t * t);
    CHECK(y.dual().at(i) == Approx(slope * dv[i]).epsilon(1e-13));
  }
}

TEST_CASE("a reduction: the tangent of loss equals <reverse gradient, direction> and the finite difference") {
  ad_test::thread_scope threads(8);
  int const n = 100000;
  ctg::field<double, 1, both> x({n}, {.name = "x"});
  ctg::field<double, 0, both> loss({.name = "loss"});
  std::vector<double> xv(n), dv(n);
  for (int i = 0; i < n; ++i) xv[i] = std::sin(0.01 * i), dv[i] = std::cos(0.003 * i);
  x.copy_from(xv);
  x.dual().copy_from(dv);
  auto k = ctg::kernel<"reduce">([](auto x, auto loss) {
    return ctg::range(x.size(), [=](auto i) { return loss() += x[i] * x[i] * x[i] + ctg::tanh(x[i]); });
  });
  k.fwd(x, loss);
  double const tangent = loss.dual().at();
  loss.at() = 0.0;
  k(x, loss);
  loss.grad().at() = 1.0;
  k.grad(x, loss);
  double dot = 0, closed = 0;
  for (int i = 0; i < n; ++i) {
    dot += x.grad().at(i) * dv[i];
    double const th = std::tanh(xv[i]);
    closed += (3 * xv[i] * xv[i] + 1 - th * th) * dv[i];
  }
  CHECK(tangent == Approx(closed).epsilon(1e-10));
  CHECK(tangent == Approx(dot).epsilon(1e-10));
}

TEST_CASE("nested loops with a carried nonlinear local and scalar parameters") {
  int const n = 4, iters = 9;
  std::vector<double> const xv{0.3, -0.5, 1.2, 0.8};
  // Direction over (x_0..x_3, a, b).
  std::vector<double> const d{0.5, -1.0, 0.25, 2.0, -0.75, 1.5};
  ctg::field<double, 1, both> x({n}, {.name = "x"}), out({n}, {.name = "out"});
  ctg::field<double, 0, both> a({.name = "a"}), b({.name = "b"});
  x.copy_from(xv);
  a.at() = 0.9, b.at() = 0.7;
  for (int i = 0; i < n; ++i) x.dual().at(i) = d[i];
  a.dual().at() = d[n], b.dual().at() = d[n + 1];
  auto k = ctg::kernel<"recurrence">([](auto x, auto a, auto b, auto out, int iters) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(0.0, [=](auto v) {
        return ctg::block(ctg::range(iters, [=](auto j) {
                            return ctg::block(v = ctg::sin(v) * a() + x[i] * b(),
                                              ctg::if_(j == 3, v = v * v + ctg::cast<double>(j)));
                          }),
                          out[i] = v);
      });
    });
  });
  auto one = [&](std::vector<double> const& p, int i) {
    double v = 0;
    for (int j = 0; j < iters; ++j) {
      v = std::sin(v) * p[n] + p[i] * p[n + 1];
      if (j == 3) v = v * v + j;
    }
    return v;
  };
  std::vector<double> p = xv;
  p.push_back(0.9), p.push_back(0.7);
  k.fwd(x, a, b, out, iters);
  std::vector<double> tangents(n);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    tangents[i] = out.dual().at(i);
    CHECK(out.at(i) == Approx(one(p, i)).epsilon(1e-13));
    CHECK(tangents[i] == Approx(directional_fd([&](std::vector<double> const& q) { return one(q, i); }, p, d))
                             .epsilon(1e-7));
  }
  // Reverse mode with out.grad = e_i gives row i of the Jacobian; its dot with d is the tangent.
  for (int i = 0; i < n; ++i) {
    x.zero_grad(), a.zero_grad(), b.zero_grad(), out.zero_grad();
    out.grad().at(i) = 1.0;
    k.grad(x, a, b, out, iters);
    double dot = a.grad().at() * d[n] + b.grad().at() * d[n + 1];
    for (int j = 0; j < n; ++j) dot += x.grad().at(j) * d[j];
    CHECK(tangents[i] == Approx(dot).epsilon(1e-12));
  }
}

TEST_CASE("locals, funcs, while_, static_range, select and stop_grad in forward mode") {
  std::vector<double> const xv{0.35, 0.8, 1.9};
  std::vector<double> const dv{1.0, -0.5, 2.0};
  ctg::field<double, 1, both> x({3}, {.name = "x"}), out({3}, {.name = "out"});
  x.copy_from(xv);
  x.dual().copy_from(dv);
  auto cube = ctg::func<"cube">(
      [](auto a) { return ctg::let(a, [=](auto v) { return ctg::block(v = v * v * v, ctg::result(v)); }); });
  auto k = ctg::kernel<"mixed", ctg::adstack_capacity<64>>([=](auto x, auto out) {
    return ctg::range(3, [=](auto i) {
      return ctg::let(x[i], 0.0, [=](auto v, auto acc) {
        return ctg::block(ctg::while_(v < 5.0, v = v * 1.5 + ctg::sqrt(v)),
                          ctg::static_range<3>([=](auto s) { return acc += cube(v) * (s + 1.0) * 0.01; }),
                          acc = acc + ctg::select(x[i] > 1.0, ctg::log(x[i]), x[i] * x[i]),
                          acc = acc + ctg::stop_grad(x[i] * 100.0) + ctg::cast<double>(ctg::cast<int>(x[i] * 7.0)),
                          out[i] = acc);
      });
    });
  });
  auto plain = [](double t) {
    double v = t, acc = 0;
    while (v < 5.0) v = v * 1.5 + std::sqrt(v);
    for (int s = 0; s < 3; ++s) acc += v * v * v * (s + 1.0) * 0.01;
    acc += t > 1.0 ? std::log(t) : t * t;
    return acc + t * 100.0 + double(int(t * 7.0));
  };
  // The tangent of plain without the stop_grad and int-cast terms (they are
  // piecewise constant or stopped), by central differences.
  auto smooth = [&](std::vector<double> const& q) { return plain(q[0]) - q[0] * 100.0 - double(int(q[0] * 7.0)); };
  k.fwd(x, out);
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(out.at(i) == Approx(plain(xv[i])).epsilon(1e-13));
    double const want = ad_test::central_difference(smooth, {xv[i]}, 0) * dv[i];
    CHECK(out.dual().at(i) == Approx(want).epsilon(1e-7));
  }
}

TEST_CASE("forward mode through Eigen types matches the directional finite difference") {
  using V3 = Eigen::Vector3d;
  using M3 = Eigen::Matrix3d;
  ctg::field<M3, 0, both> m({.name = "m"});
  ctg::field<V3, 0, both> v({.name = "v"});
  ctg::field<double, 0, both> loss({.name = "loss"});
  M3 m0;
  m0 << 2.0, 0.5, -0.3, 0.4, 1.7, 0.6, -0.2, 0.9, 3.1;
  V3 const v0(0.6, -1.3, 0.45);
  M3 dm;
  dm << 0.1, -0.2, 0.3, 0.5, 0.0, -0.4, 0.2, 0.7, -0.1;
  V3 const dvec(1.0, 0.5, -2.0);
  m.at() = m0, v.at() = v0, m.dual().at() = dm, v.dual().at() = dvec;
  auto k = ctg::kernel<"eigen_fwd">([](auto m, auto v, auto loss) {
    return loss() = ctg::dot(m() * v(), ctg::cross(v(), ctg::vec(1.0, 2.0, 3.0))) + ctg::det(m()) +
                    ctg::trace(ctg::inverse(m()) * ctg::transpose(m())) + ctg::norm(v()) +
                    ctg::dot(ctg::outer(v(), v()) * v(), v()) + m()(1_c, 2_c) * v()[2_c];
  });
  auto plain = [](std::vector<double> const& p) {
    M3 m;
    V3 v;
    for (int c = 0; c < 9; ++c) m.coeffRef(c) = p[c];
    for (int c = 0; c < 3; ++c) v.coeffRef(c) = p[9 + c];
    return (m * v).dot(v.cross(V3(1, 2, 3))) + m.determinant() + (m.inverse() * m.transpose()).trace() + v.norm() +
           (v * v.transpose() * v).dot(v) + m(1, 2) * v(2);
  };
  std::vector<double> p, d;
  for (int c = 0; c < 9; ++c) p.push_back(m0.coeff(c)), d.push_back(dm.coeff(c));
  for (int c = 0; c < 3; ++c) p.push_back(v0.coeff(c)), d.push_back(dvec.coeff(c));
  k.fwd(m, v, loss);
  CHECK(loss.at() == Approx(plain(p)).epsilon(1e-13));
  CHECK(loss.dual().at() == Approx(directional_fd(plain, p, d)).epsilon(1e-7));
}

TEST_CASE("serial_range reads the tangent an earlier iteration wrote; -= and component stores carry tangents") {
  int const n = 10;
  double const c = 0.7;
  ctg::field<double, 0, both> x({.name = "x"}), acc({.name = "acc"});
  ctg::field<double, 1, both> out({n}, {.name = "out"});
  ctg::field<Eigen::Vector2d, 0, both> pair({.name = "pair"});
  x.at() = 0.4;
  x.dual().at() = 1.0;
  acc.at() = 1.0;
  pair.at() = Eigen::Vector2d(5.0, 6.0);
  pair.dual().at() = Eigen::Vector2d(0.0, 0.25);
  auto k = ctg::kernel<"prefix_fwd">([](auto x, auto out, auto acc, auto pair, double c) {
    return ctg::block(ctg::serial_range(out.size(), [=](auto i) {
                        return ctg::if_(i == 0, out[i] = x(), out[i] = out[i - 1] * c + x() * x());
                      }),
                      acc() -= out[out.size() - 1] * 2.0, pair()[0_c] = ctg::exp(x()));
  });
  k.fwd(x, out, acc, pair, c);
  // out_0 = x, out_i = c out_{i-1} + x^2: d out_i/dx = c^i + 2x (1 - c^i)/(1 - c)
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    double const ci = std::pow(c, i);
    CHECK(out.at(i) == Approx(ci * 0.4 + 0.16 * (1 - ci) / (1 - c)).epsilon(1e-13));
    CHECK(out.dual().at(i) == Approx(ci + 0.8 * (1 - ci) / (1 - c)).epsilon(1e-13));
  }
  CHECK(acc.dual().at() == Approx(-2.0 * out.dual().at(n - 1)).epsilon(1e-14));
  CHECK(acc.at() == Approx(1.0 - 2.0 * out.at(n - 1)).epsilon(1e-14));
  CHECK(pair.dual().at()(0) == Approx(std::exp(0.4)).epsilon(1e-14));
  CHECK(pair.dual().at()(1) == 0.25);  // untouched component keeps its tangent
  CHECK(pair.at()(1) == 6.0);
}

TEST_CASE("an accumulation that reads its own element: the tangent uses the value it read") {
  // a' = a + a b (and a - sin(a) b): the tangent is da (1 + b) + a db, with a as it was before the statement.
  std::vector<double> const av{0.5, -1.25, 2.0}, bv{2.0, 0.75, -0.5}, dav{0.3, -1.0, 0.25}, dbv{0.7, 0.5, 2.0};
  ctg::field<double, 1, ctg::dual> a({3}, {.name = "a"}), b({3}, {.name = "b"}), c({3}, {.name = "c"});
  ctg::field<double, 0, ctg::dual> s({.name = "s"});
  auto k = ctg::kernel<"grow">([](auto a, auto b, auto c, auto s) {
    return ctg::block(ctg::range(a.size(), [=](auto i) { return ctg::block(a[i] += a[i] * b[i], c[i] -= ctg::sin(c[i]) * b[i]); }),
                      s() += s() * b[0]);
  });
  a.copy_from(av);
  c.copy_from(av);
  b.copy_from(bv);
  s.at() = av[0];
  a.dual().copy_from(dav);
  c.dual().copy_from(dav);
  b.dual().copy_from(dbv);
  s.dual().at() = dav[0];
  k.fwd(a, b, c, s);
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(a.at(i) == Approx(av[i] + av[i] * bv[i]).epsilon(1e-15));
    CHECK(a.dual().at(i) == Approx(dav[i] * (1 + bv[i]) + av[i] * dbv[i]).epsilon(1e-14));
    CHECK(c.dual().at(i) == Approx(dav[i] * (1 - std::cos(av[i]) * bv[i]) - std::sin(av[i]) * dbv[i]).epsilon(1e-14));
  }
  CHECK(s.dual().at() == Approx(dav[0] * (1 + bv[0]) + av[0] * dbv[0]).epsilon(1e-14));
}
