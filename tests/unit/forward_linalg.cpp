// Eigen element types in kernels: component access, products, dot, norm,
// cross, outer, transpose, det, inverse, trace, vector construction.
#include <doctest/doctest.h>

#include <Eigen/Dense>
#include <ctgrad/ctgrad.hpp>

using namespace ctg::literals;
using V3 = Eigen::Vector3d;
using M3 = Eigen::Matrix3d;
using M2 = Eigen::Matrix2d;

TEST_CASE("vector fields: component access, dot, norm, cross, outer") {
  ctg::field<V3, 1> a(2), b(2);
  ctg::field<double, 2> s(2, 4);
  ctg::field<V3, 1> c(2);
  ctg::field<M3, 1> o(2);
  a.at(0) = V3(1, 2, 3), a.at(1) = V3(-1, 0.5, 2);
  b.at(0) = V3(0.5, -1, 4), b.at(1) = V3(3, 2, 1);
  auto k = ctg::kernel<"vec">([](auto a, auto b, auto s, auto c, auto o) {
    return ctg::range(2, [=](auto i) {
      return ctg::block(s(i, 0_c) = ctg::dot(a[i], b[i]), s(i, 1_c) = ctg::norm(a[i]),
                        s(i, 2_c) = a[i][1_c] + b[i][2], s(i, 3_c) = ctg::norm_sqr(a[i] - b[i]),
                        c[i] = ctg::cross(a[i], b[i]) * 2.0 + a[i], o[i] = ctg::outer(a[i], b[i]));
    });
  });
  k(a, b, s, c, o);
  for (int i = 0; i < 2; ++i) {
    V3 x = a.at(i), y = b.at(i);
    CHECK(s.at(i, 0) == doctest::Approx(x.dot(y)));
    CHECK(s.at(i, 1) == doctest::Approx(x.norm()));
    CHECK(s.at(i, 2) == doctest::Approx(x(1) + y(2)));
    CHECK(s.at(i, 3) == doctest::Approx((x - y).squaredNorm()));
    CHECK((c.at(i) - (x.cross(y) * 2.0 + x)).norm() < 1e-12);
    CHECK((o.at(i) - x * y.transpose()).norm() < 1e-12);
  }
}

TEST_CASE("matrix fields: products, transpose, det, inverse, trace") {
  ctg::field<M3, 0> m;
  ctg::field<M2, 0> m2;
  ctg::field<V3, 0> v;
  ctg::field<double, 1> out(4);
  ctg::field<M3, 1> mats(3);
  ctg::field<M2, 0> inv2;
  m.at() << 2, 1, 0, 1, 3, 1, 0, 1, 4;
  m2.at() << 4, 7, 2, 6;
  v.at() = V3(1, -2, 0.5);
  auto k = ctg::kernel<"mat">([](auto m, auto m2, auto v, auto out, auto mats, auto inv2) {
    return ctg::block(out[0] = ctg::det(m()), out[1] = ctg::trace(m() * ctg::transpose(m())),
                      out[2] = ctg::det(m2()), out[3] = ctg::dot(m() * v(), v()),
                      mats[0] = ctg::inverse(m()), mats[1] = m() * m() - ctg::transpose(m()),
                      mats[2] = ctg::mat<3, 3>(1, 2, 3, 4, 5, 6, 7, 8, 9), inv2() = ctg::inverse(m2()));
  });
  k(m, m2, v, out, mats, inv2);
  M3 const mm = m.at();
  CHECK(out.at(0) == doctest::Approx(mm.determinant()));
  CHECK(out.at(1) == doctest::Approx((mm * mm.transpose()).trace()));
  CHECK(out.at(2) == doctest::Approx(m2.at().determinant()));
  CHECK(out.at(3) == doctest::Approx((mm * v.at()).dot(v.at())));
  CHECK((mats.at(0) - mm.inverse()).norm() < 1e-12);
  CHECK((mats.at(1) - (mm * mm - mm.transpose())).norm() < 1e-12);
  CHECK(mats.at(2)(1, 0) == 4.0);  // coefficients are given row by row
  CHECK((inv2.at() - m2.at().inverse()).norm() < 1e-12);
}

TEST_CASE("component stores, vector locals, vec(), elementwise math and casts") {
  ctg::field<Eigen::Vector2f, 1> p(3);
  ctg::field<Eigen::Vector2d, 1> q(3);
  auto k = ctg::kernel<"components">([](auto p, auto q) {
    return ctg::range(3, [=](auto i) {
      return ctg::let(ctg::vec(1.0f, 2.0f), [=](auto v) {
        return ctg::block(v[0_c] = ctg::cast<float>(i), v = v * 2.0f + ctg::vec(0.5f, 0.25f), p[i] = v,
                          p[i][1_c] = ctg::sin(v)[1_c], q[i] = ctg::cast<Eigen::Vector2d>(ctg::abs(-v)));
      });
    });
  });
  k(p, q);
  for (int i = 0; i < 3; ++i) {
    Eigen::Vector2f v(float(i), 2.0f);
    v = v * 2.0f + Eigen::Vector2f(0.5f, 0.25f);
    CHECK(p.at(i)(0) == doctest::Approx(v(0)));
    CHECK(p.at(i)(1) == doctest::Approx(std::sin(v(1))));
    CHECK(q.at(i)(0) == doctest::Approx(v(0)));
  }
}

TEST_CASE("atomic accumulation into vector elements") {
  ctg::field<Eigen::Vector3f, 1> grid(2);
  auto k = ctg::kernel<"scatter">([](auto grid) {
    return ctg::range(1000, [=](auto i) { return grid[i % 2] += ctg::vec(1.0f, ctg::cast<float>(i % 2), 0.5f); });
  });
  k(grid);
  CHECK(grid.at(0)(0) == 500.0f);
  CHECK(grid.at(1)(1) == 500.0f);
  CHECK(grid.at(1)(2) == 250.0f);
}
