// Reverse mode with Eigen matrix element types: transpose, matrix * vector,
// matrix * matrix, trace, det and inverse (2x2 and 3x3), m(r, c) access and
// ctg::mat construction. Each loss is recomputed with plain Eigen code and
// differentiated by central differences over every input coefficient.
#include <doctest/doctest.h>

#include <Eigen/Dense>
#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

#include "ad_linalg_support.hpp"
#include "ad_test_support.hpp"

using doctest::Approx;
using namespace ctg::literals;
using V2 = Eigen::Vector2d;
using V3 = Eigen::Vector3d;
using M2 = Eigen::Matrix2d;
using M3 = Eigen::Matrix3d;
using ad_test::check_slice;
using ad_test::unpack;

namespace {
M3 make_m() {
  M3 m;
  m << 2.0, 0.5, -0.3, 0.4, 1.7, 0.6, -0.2, 0.9, 3.1;
  return m;
}
M3 make_n() {
  M3 m;
  m << 0.3, -1.2, 0.8, 1.1, 0.25, -0.5, 0.7, 0.4, -0.9;
  return m;
}
M2 make_m2() {
  M2 m;
  m << 1.5, -0.7, 0.4, 2.2;
  return m;
}
V3 const v0(0.6, -1.3, 0.45), w0(-0.2, 0.9, 1.4);
V2 const u0(0.8, -0.35);
}  // namespace

TEST_CASE("transpose, matrix * vector, matrix * matrix and trace") {
  ctg::field<M3, 0, ctg::grad> m({.name = "m"}), n({.name = "n"});
  ctg::field<V3, 0, ctg::grad> v({.name = "v"}), w({.name = "w"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  m.at() = make_m(), n.at() = make_n(), v.at() = v0, w.at() = w0;
  auto k = ctg::kernel<"products">([](auto m, auto n, auto v, auto w, auto loss) {
    return loss() = ctg::dot(m() * v(), w()) + ctg::trace(m() * n()) +
                    ctg::trace(ctg::transpose(m()) * n() * m()) + ctg::norm_sqr(ctg::transpose(n()) * v());
  });
  auto plain = [](std::vector<double> const& p) {
    M3 const m = unpack<M3>(p, 0), n = unpack<M3>(p, 9);
    V3 const v = unpack<V3>(p, 18), w = unpack<V3>(p, 21);
    return (m * v).dot(w) + (m * n).trace() + (m.transpose() * n * m).trace() + (n.transpose() * v).squaredNorm();
  };
  auto const p = ad_test::pack(make_m(), make_n(), v0, w0);
  k(m, n, v, w, loss);
  CHECK(loss.at() == Approx(plain(p)).epsilon(1e-13));
  loss.grad().at() = 1.0;
  k.grad(m, n, v, w, loss);
  auto const g = ad_test::fd_gradient(plain, p);
  check_slice(m.grad().at(), g, 0);
  check_slice(n.grad().at(), g, 9);
  check_slice(v.grad().at(), g, 18);
  check_slice(w.grad().at(), g, 21);
}

TEST_CASE("a matrix-valued store seeded with a matrix: C = A B gives dA = G B^T, dB = A^T G") {
  ctg::field<M3, 0, ctg::grad> a({.name = "a"}), b({.name = "b"}), c({.name = "c"});
  a.at() = make_m(), b.at() = make_n();
  auto k = ctg::kernel<"matmul">([](auto a, auto b, auto c) { return c() = a() * b(); });
  k(a, b, c);
  M3 G;
  G << 1, -2, 0.5, 0.25, 3, -1, 2, 0, 1.5;
  c.grad().at() = G;
  k.grad(a, b, c);
  CHECK((a.grad().at() - G * make_n().transpose()).norm() < 1e-13);
  CHECK((b.grad().at() - make_m().transpose() * G).norm() < 1e-13);
  CHECK(c.grad().at().norm() == 0.0);
}

TEST_CASE("det and inverse of 3x3 and 2x2 matrices") {
  ctg::field<M3, 0, ctg::grad> m({.name = "m"}), n({.name = "n"});
  ctg::field<M2, 0, ctg::grad> m2({.name = "m2"});
  ctg::field<V2, 0, ctg::grad> u({.name = "u"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  m.at() = make_m(), n.at() = make_n(), m2.at() = make_m2(), u.at() = u0;
  auto k = ctg::kernel<"det_inv">([](auto m, auto n, auto m2, auto u, auto loss) {
    return loss() = ctg::det(m()) + 2.0 * ctg::det(m2()) + ctg::trace(ctg::inverse(m()) * n()) +
                    ctg::dot(ctg::inverse(m2()) * u(), u()) + ctg::det(n() * m());
  });
  auto plain = [](std::vector<double> const& p) {
    M3 const m = unpack<M3>(p, 0), n = unpack<M3>(p, 9);
    M2 const m2 = unpack<M2>(p, 18);
    V2 const u = unpack<V2>(p, 22);
    return m.determinant() + 2.0 * m2.determinant() + (m.inverse() * n).trace() + (m2.inverse() * u).dot(u) +
           (n * m).determinant();
  };
  auto const p = ad_test::pack(make_m(), make_n(), make_m2(), u0);
  k(m, n, m2, u, loss);
  CHECK(loss.at() == Approx(plain(p)).epsilon(1e-12));
  loss.grad().at() = 1.0;
  k.grad(m, n, m2, u, loss);
  auto const g = ad_test::fd_gradient(plain, p);
  check_slice(m.grad().at(), g, 0);
  check_slice(n.grad().at(), g, 9);
  check_slice(m2.grad().at(), g, 18);
  check_slice(u.grad().at(), g, 22);
}

TEST_CASE("closed forms: d det(A)/dA = det(A) A^-T and d sum(W .* A^-1)/dA = -A^-T W A^-T") {
  ctg::field<M3, 0, ctg::grad> a({.name = "a"}), ai({.name = "ai"});
  ctg::field<double, 0, ctg::grad> d({.name = "d"});
  a.at() = make_m();
  auto k = ctg::kernel<"det_and_inverse">([](auto a, auto d, auto ai) {
    return ctg::block(d() = ctg::det(a()), ai() = ctg::inverse(a()));
  });
  k(a, d, ai);
  M3 const A = make_m();
  M3 const W = make_n();
  d.grad().at() = 1.0;
  ai.grad().at() = W;  // the seed is the gradient of sum(W .* inverse(A))
  k.grad(a, d, ai);
  M3 const Ait = A.inverse().transpose();
  M3 const want = A.determinant() * Ait - Ait * W * Ait;
  CHECK((a.grad().at() - want).norm() < 1e-12);
}

TEST_CASE("m(r, c) with constant and runtime indices, and ctg::mat construction") {
  ctg::field<M3, 0, ctg::grad> m({.name = "m"});
  ctg::field<V3, 0, ctg::grad> v({.name = "v"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  m.at() = make_m(), v.at() = v0;
  auto k = ctg::kernel<"mat_build">([](auto m, auto v, auto loss) {
    return ctg::let(ctg::mat<2, 2>(m()(0_c, 1_c), m()(1, 2) * 2.0, ctg::sin(m()(2_c, 0_c)), v()[1_c]),
                    [=](auto s) {
                      return loss() = ctg::norm_sqr(s * v()[0_c]) + m()(1_c, 1_c) * m()(2, 2) + ctg::det(s) +
                                      s(1_c, 0_c) * s(0, 1);
                    });
  });
  auto plain = [](std::vector<double> const& p) {
    M3 const m = unpack<M3>(p, 0);
    V3 const v = unpack<V3>(p, 9);
    M2 s;
    s << m(0, 1), m(1, 2) * 2.0, std::sin(m(2, 0)), v(1);  // row by row
    return (s * v(0)).squaredNorm() + m(1, 1) * m(2, 2) + s.determinant() + s(1, 0) * s(0, 1);
  };
  auto const p = ad_test::pack(make_m(), v0);
  k(m, v, loss);
  CHECK(loss.at() == Approx(plain(p)).epsilon(1e-13));
  loss.grad().at() = 1.0;
  k.grad(m, v, loss);
  auto const g = ad_test::fd_gradient(plain, p);
  check_slice(m.grad().at(), g, 0);
  check_slice(v.grad().at(), g, 9);
}

TEST_CASE("a matrix local updated in a nested loop (adstack snapshots of a 3x3 matrix)") {
  ctg::field<M3, 1, ctg::grad> a({2}, {.name = "a"});
  ctg::field<V3, 0, ctg::grad> v({.name = "v"});
  ctg::field<double, 1, ctg::grad> out({2}, {.name = "out"});
  a.at(0) = make_m() * 0.3, a.at(1) = make_n() * 0.5;
  v.at() = v0;
  auto k = ctg::kernel<"power">([](auto a, auto v, auto out, int steps) {
    return ctg::range(a.size(), [=](auto i) {
      return ctg::let(a[i], [=](auto p) {
        return ctg::block(ctg::range(steps, [=](auto) { return p = p * a[i] + ctg::outer(v(), v()) * 0.1; }),
                          out[i] = ctg::dot(p * v(), v()));
      });
    });
  });
  int const steps = 4;
  auto plain = [&](std::vector<double> const& p) {
    double L = 0;
    V3 const vv = unpack<V3>(p, 18);
    for (int i = 0; i < 2; ++i) {
      M3 const ai = unpack<M3>(p, 9 * i);
      M3 q = ai;
      for (int s = 0; s < steps; ++s) q = q * ai + vv * vv.transpose() * 0.1;
      L += (i + 1.0) * (q * vv).dot(vv);
    }
    return L;
  };
  k(a, v, out, steps);
  out.grad().at(0) = 1.0, out.grad().at(1) = 2.0;
  k.grad(a, v, out, steps);
  auto const g = ad_test::fd_gradient(plain, ad_test::pack(M3(make_m() * 0.3), M3(make_n() * 0.5), v0));
  check_slice(a.grad().at(0), g, 0);
  check_slice(a.grad().at(1), g, 9);
  check_slice(v.grad().at(), g, 18);
}

TEST_CASE("non-square matrices: (2x3)(3x2) products, transpose of a 2x3 matrix, matrix * vector") {
  using M23 = Eigen::Matrix<double, 2, 3>;
  using M32 = Eigen::Matrix<double, 3, 2>;
  M23 a0;
  a0 << 0.4, -1.1, 0.7, 1.3, 0.2, -0.5;
  M32 b0;
  b0 << 0.9, -0.3, 0.1, 1.2, -0.8, 0.6;
  ctg::field<M23, 0, ctg::grad> a({.name = "a"});
  ctg::field<M32, 0, ctg::grad> b({.name = "b"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  a.at() = a0, b.at() = b0;
  auto k = ctg::kernel<"nonsquare">([](auto a, auto b, auto loss) {
    return loss() = ctg::trace(a() * b()) + ctg::norm_sqr(ctg::transpose(a()) * ctg::vec(1.0, 2.0)) +
                    ctg::dot(b() * ctg::vec(0.5, -1.0), ctg::transpose(a()) * ctg::vec(-0.25, 1.5)) +
                    ctg::det(b() * a() + M3(M3::Identity()));
  });
  auto plain = [](std::vector<double> const& p) {
    M23 const a = unpack<M23>(p, 0);
    M32 const b = unpack<M32>(p, 6);
    return (a * b).trace() + (a.transpose() * V2(1.0, 2.0)).squaredNorm() +
           (b * V2(0.5, -1.0)).dot(a.transpose() * V2(-0.25, 1.5)) + (b * a + M3::Identity()).determinant();
  };
  auto const p = ad_test::pack(a0, b0);
  k(a, b, loss);
  CHECK(loss.at() == Approx(plain(p)).epsilon(1e-13));
  loss.grad().at() = 1.0;
  k.grad(a, b, loss);
  auto const g = ad_test::fd_gradient(plain, p);
  check_slice(a.grad().at(), g, 0);
  check_slice(b.grad().at(), g, 6);
}

TEST_CASE("forward mode: tangent through the transpose of a non-square matrix") {
  using M23 = Eigen::Matrix<double, 2, 3>;
  M23 a0, da;
  a0 << 0.4, -1.1, 0.7, 1.3, 0.2, -0.5;
  da << 1.0, 0.5, -0.25, 2.0, -1.0, 0.75;
  ctg::field<M23, 0, ctg::grad | ctg::dual> a({.name = "a"});
  ctg::field<double, 0, ctg::grad | ctg::dual> loss({.name = "loss"});
  a.at() = a0;
  a.dual().at() = da;
  auto k = ctg::kernel<"nonsquare_fwd">([](auto a, auto loss) {
    return loss() = ctg::norm_sqr(ctg::transpose(a()) * ctg::vec(1.0, 2.0)) + ctg::trace(a() * ctg::transpose(a()));
  });
  k.fwd(a, loss);
  // L = |A^T u|^2 + |A|_F^2, dL = 2 <A^T u, dA^T u> + 2 <A, dA>
  V2 const u(1.0, 2.0);
  double const want = 2 * (a0.transpose() * u).dot(da.transpose() * u) + 2 * (a0.array() * da.array()).sum();
  CHECK(loss.dual().at() == Approx(want).epsilon(1e-13));
}

TEST_CASE("row-major matrix elements combined with column-major values pair entries by row and column") {
  // A row-major element next to a column-major value (a transpose, a
  // captured constant): their k-th stored coefficients are different
  // entries, so sums, differences and dot products go by (row, column).
  using RM = Eigen::Matrix<double, 3, 3, Eigen::RowMajor>;
  ctg::field<RM, 1, ctg::grad> c({1}, {.name = "c"}), h({1}, {.name = "h"});
  ctg::field<double, 1, ctg::grad> f({1}, {.name = "f"});
  RM c0;
  c0 << 2.0, 0.5, -0.3, 0.4, 1.7, 0.6, -0.2, 0.9, 3.1;
  c.at(0) = c0;
  M3 const identity = M3::Identity();
  auto k = ctg::kernel<"mixed_orders">([=](auto c, auto h, auto f) {
    return ctg::range(c.size(), [=](auto i) {
      return ctg::block(h[i] = c[i] + ctg::transpose(c[i]) - identity, f[i] = ctg::dot(c[i], ctg::transpose(c[i])));
    });
  });
  k(c, h, f);
  M3 const cm = c0;  // the same entries, column-major
  for (int r = 0; r < 3; ++r)
    for (int s = 0; s < 3; ++s) CHECK(h.at(0)(r, s) == Approx(cm(r, s) + cm(s, r) - (r == s ? 1.0 : 0.0)));
  CHECK(f.at(0) == Approx((cm * cm).trace()));  // sum over (r, s) of c(r, s) c(s, r)

  // Seeds W on h and 0.5 on f: dc = W + W^T + 0.5 * 2 c^T.
  RM w;
  w << 1.0, -2.0, 0.5, 3.0, 0.25, -1.5, 0.75, 2.5, -0.5;
  h.grad().at(0) = w;
  f.grad().at(0) = 0.5;
  k.grad(c, h, f);
  for (int r = 0; r < 3; ++r)
    for (int s = 0; s < 3; ++s) CHECK(c.grad().at(0)(r, s) == Approx(w(r, s) + w(s, r) + cm(s, r)));
}
