// Reverse mode with Eigen vector element types: dot, norm, norm_sqr, cross
// (3-vectors and 2-vectors), outer, component access, vec construction and
// scalar * vector. Each kernel's loss is recomputed with plain Eigen code and
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
using M3 = Eigen::Matrix3d;
using ad_test::check_slice;
using ad_test::unpack;

namespace {
V3 const a0(0.7, -1.2, 0.4), b0(-0.3, 0.8, 1.5), c0(1.1, 0.2, -0.6);
V2 const p0(0.9, -0.4), q0(0.3, 1.7);
}  // namespace

TEST_CASE("dot, norm and norm_sqr of 3-vectors") {
  ctg::field<V3, 0, ctg::grad> a({.name = "a"}), b({.name = "b"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  a.at() = a0, b.at() = b0;
  auto k = ctg::kernel<"dot_norm">([](auto a, auto b, auto loss) {
    return loss() = ctg::dot(a(), b()) * ctg::norm(a()) + ctg::norm_sqr(b() - a() * 0.5);
  });
  auto plain = [](std::vector<double> const& p) {
    V3 const a = unpack<V3>(p, 0), b = unpack<V3>(p, 3);
    return a.dot(b) * a.norm() + (b - a * 0.5).squaredNorm();
  };
  k(a, b, loss);
  auto const p = ad_test::pack(a0, b0);
  CHECK(loss.at() == Approx(plain(p)).epsilon(1e-14));
  loss.grad().at() = 1.0;
  k.grad(a, b, loss);
  auto const g = ad_test::fd_gradient(plain, p);
  check_slice(a.grad().at(), g, 0);
  check_slice(b.grad().at(), g, 3);
  CHECK(loss.grad().at() == 0.0);
}

TEST_CASE("norm'(0) = 0: the gradient of |a - b| at a == b is zero, not NaN") {
  ctg::field<V3, 0, ctg::grad> a({.name = "a"}), b({.name = "b"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  a.at() = a0, b.at() = a0;
  auto k = ctg::kernel<"norm0">([](auto a, auto b, auto loss) { return loss() = ctg::norm(a() - b()); });
  k(a, b, loss);
  loss.grad().at() = 1.0;
  k.grad(a, b, loss);
  CHECK(loss.at() == 0.0);
  for (int c = 0; c < 3; ++c) {
    CHECK(a.grad().at()(c) == 0.0);
    CHECK(b.grad().at()(c) == 0.0);
  }
}

TEST_CASE("cross product of 3-vectors and of 2-vectors (a scalar)") {
  ctg::field<V3, 0, ctg::grad> a({.name = "a"}), b({.name = "b"}), c({.name = "c"});
  ctg::field<V2, 0, ctg::grad> p({.name = "p"}), q({.name = "q"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  a.at() = a0, b.at() = b0, c.at() = c0, p.at() = p0, q.at() = q0;
  auto k = ctg::kernel<"cross">([](auto a, auto b, auto c, auto p, auto q, auto loss) {
    return loss() = ctg::dot(ctg::cross(a(), b()), c()) + ctg::norm_sqr(ctg::cross(b(), a())) +
                    ctg::cross(p(), q()) * ctg::cross(p(), q()) + ctg::cross(q(), p()) * 3.0;
  });
  auto plain = [](std::vector<double> const& v) {
    V3 const a = unpack<V3>(v, 0), b = unpack<V3>(v, 3), c = unpack<V3>(v, 6);
    V2 const p = unpack<V2>(v, 9), q = unpack<V2>(v, 11);
    double const pq = p(0) * q(1) - p(1) * q(0);
    return a.cross(b).dot(c) + b.cross(a).squaredNorm() + pq * pq - 3.0 * pq;
  };
  k(a, b, c, p, q, loss);
  auto const v = ad_test::pack(a0, b0, c0, p0, q0);
  CHECK(loss.at() == Approx(plain(v)).epsilon(1e-14));
  loss.grad().at() = 1.0;
  k.grad(a, b, c, p, q, loss);
  auto const g = ad_test::fd_gradient(plain, v);
  check_slice(a.grad().at(), g, 0);
  check_slice(b.grad().at(), g, 3);
  check_slice(c.grad().at(), g, 6);
  check_slice(p.grad().at(), g, 9);
  check_slice(q.grad().at(), g, 11);
}

TEST_CASE("outer product, and a matrix-vector product of its result") {
  ctg::field<V3, 0, ctg::grad> a({.name = "a"}), b({.name = "b"}), c({.name = "c"});
  ctg::field<M3, 0, ctg::grad> o({.name = "o"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  a.at() = a0, b.at() = b0, c.at() = c0;
  auto k = ctg::kernel<"outer">([](auto a, auto b, auto c, auto o, auto loss) {
    return ctg::block(o() = ctg::outer(a(), b()), loss() = ctg::dot(ctg::outer(a(), b()) * c(), a()));
  });
  k(a, b, c, o, loss);
  CHECK((o.at() - a0 * b0.transpose()).norm() < 1e-14);
  // Seed both outputs: loss with 1, o with a matrix W.
  M3 W;
  W << 0.5, -1, 2, 0.25, 1.5, -0.75, 1, 0, -2;
  loss.grad().at() = 1.0;
  o.grad().at() = W;
  k.grad(a, b, c, o, loss);
  auto plain = [&](std::vector<double> const& v) {
    V3 const a = unpack<V3>(v, 0), b = unpack<V3>(v, 3), c = unpack<V3>(v, 6);
    M3 const ab = a * b.transpose();
    return (ab * c).dot(a) + (ab.array() * W.array()).sum();
  };
  auto const g = ad_test::fd_gradient(plain, ad_test::pack(a0, b0, c0));
  check_slice(a.grad().at(), g, 0);
  check_slice(b.grad().at(), g, 3);
  check_slice(c.grad().at(), g, 6);
  CHECK(o.grad().at().norm() == 0.0);
}

TEST_CASE("components v[k] with constant and runtime k, vec construction and scalar * vector") {
  ctg::field<V3, 0, ctg::grad> a({.name = "a"}), b({.name = "b"});
  ctg::field<double, 0, ctg::grad> s({.name = "s"}), loss({.name = "loss"});
  a.at() = a0, b.at() = b0;
  s.at() = 1.3;
  auto k = ctg::kernel<"components">([](auto a, auto b, auto s, auto loss) {
    return loss() = ctg::norm_sqr(ctg::vec(a()[0_c] * b()[1_c], ctg::sin(a()[2_c]), a()[1]) * s() + 2.0 * b()) +
                    ctg::dot(s() * a(), b()) * b()[0];
  });
  auto plain = [](std::vector<double> const& v) {
    V3 const a = unpack<V3>(v, 0), b = unpack<V3>(v, 3);
    double const s = v[6];
    V3 const u(a(0) * b(1), std::sin(a(2)), a(1));
    return (u * s + 2.0 * b).squaredNorm() + (s * a).dot(b) * b(0);
  };
  k(a, b, s, loss);
  auto v = ad_test::pack(a0, b0);
  v.push_back(1.3);
  CHECK(loss.at() == Approx(plain(v)).epsilon(1e-14));
  loss.grad().at() = 1.0;
  k.grad(a, b, s, loss);
  auto const g = ad_test::fd_gradient(plain, v);
  check_slice(a.grad().at(), g, 0);
  check_slice(b.grad().at(), g, 3);
  CHECK(s.grad().at() == Approx(g[6]).epsilon(1e-7));
}

TEST_CASE("a store to one component of a vector element zeroes only that component's gradient") {
  ctg::field<V3, 0, ctg::grad> a({.name = "a"}), o({.name = "o"});
  a.at() = a0;
  o.at() = V3(9, 9, 9);
  auto k = ctg::kernel<"component_store">([](auto a, auto o) {
    return ctg::block(o()[0_c] = a()[1_c] * a()[2_c], o()[1] = ctg::exp(a()[0_c]));
  });
  k(a, o);
  CHECK(o.at()(2) == 9.0);
  o.grad().at() = V3(1.0, 2.0, 3.0);
  k.grad(a, o);
  // d/da: o0 = a1 a2 (seed 1), o1 = exp(a0) (seed 2)
  CHECK(a.grad().at()(0) == Approx(2 * std::exp(a0(0))).epsilon(1e-14));
  CHECK(a.grad().at()(1) == Approx(a0(2)).epsilon(1e-14));
  CHECK(a.grad().at()(2) == Approx(a0(1)).epsilon(1e-14));
  CHECK(o.grad().at()(0) == 0.0);
  CHECK(o.grad().at()(1) == 0.0);
  CHECK(o.grad().at()(2) == 3.0);
}

TEST_CASE("vector fields in a parallel loop: per-element and shared (atomic) vector gradients") {
  ad_test::thread_scope threads(8);
  int const n = 20000;
  ctg::field<V3, 1, ctg::grad> p({n}, {.name = "p"});
  ctg::field<V3, 0, ctg::grad> c({.name = "c"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  for (int i = 0; i < n; ++i) p.at(i) = V3(std::sin(0.1 * i), std::cos(0.07 * i), 0.001 * (i % 100));
  c.at() = V3(0.1, -0.2, 2.0);
  auto k = ctg::kernel<"spread">([](auto p, auto c, auto loss) {
    return ctg::range(p.size(), [=](auto i) { return loss() += ctg::norm(p[i] - c()); });
  });
  k(p, c, loss);
  loss.grad().at() = 1.0;
  k.grad(p, c, loss);
  // d|p - c|/dp = (p - c)/|p - c| = -d/dc
  V3 want_c = V3::Zero();
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    V3 const u = (p.at(i) - c.at()).normalized();
    want_c -= u;
    bad += (p.grad().at(i) - u).norm() > 1e-13;
  }
  CHECK(bad == 0);
  for (int k2 = 0; k2 < 3; ++k2) CHECK(c.grad().at()(k2) == Approx(want_c(k2)).epsilon(1e-11));
}

TEST_CASE("single precision vectors: dot, norm and cross in float") {
  using V3f = Eigen::Vector3f;
  ctg::field<V3f, 0, ctg::grad> a({.name = "a"}), b({.name = "b"});
  ctg::field<float, 0, ctg::grad> loss({.name = "loss"});
  a.at() = a0.cast<float>(), b.at() = b0.cast<float>();
  auto k = ctg::kernel<"float_vec">([](auto a, auto b, auto loss) {
    return loss() = ctg::dot(a(), b()) * ctg::norm(a()) + ctg::norm_sqr(ctg::cross(a(), b())) * 0.5f;
  });
  k(a, b, loss);
  loss.grad().at() = 1.0f;
  k.grad(a, b, loss);
  // d/da [(a.b)|a|] = b |a| + (a.b) a/|a|;  d/da |a x b|^2 / 2 = b x (a x b);  d/db: (a x b) x a
  V3 const axb = a0.cross(b0);
  V3 const da = b0 * a0.norm() + a0.dot(b0) * a0 / a0.norm() + b0.cross(axb);
  V3 const db = a0 * a0.norm() + axb.cross(a0);
  for (int c = 0; c < 3; ++c) {
    CHECK(a.grad().at()(c) == Approx(da(c)).epsilon(1e-5));
    CHECK(b.grad().at()(c) == Approx(db(c)).epsilon(1e-5));
  }
}

// A select whose sides are vectors: the adjoint records the side taken only
// (the other side's record is storage left unconstructed), and the gradient
// goes through that side.
TEST_CASE("select between 3-vector expressions, each side taken") {
  for (double const s0 : {-1.0, 1.0}) {
    CAPTURE(s0);
    ctg::field<V3, 0, ctg::grad> a({.name = "a"}), b({.name = "b"});
    ctg::field<double, 0> s({.name = "s"});
    ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
    a.at() = a0, b.at() = b0, s.at() = s0;
    auto k = ctg::kernel<"select_vectors">([](auto a, auto b, auto s, auto loss) {
      return loss() = ctg::norm(ctg::select(s() > 0.0, ctg::cross(a(), b()), a() * ctg::dot(a(), b())));
    });
    auto plain = [s0](std::vector<double> const& p) {
      V3 const a = unpack<V3>(p, 0), b = unpack<V3>(p, 3);
      return s0 > 0.0 ? a.cross(b).norm() : (a * a.dot(b)).norm();
    };
    k(a, b, s, loss);
    auto const p = ad_test::pack(a0, b0);
    CHECK(loss.at() == Approx(plain(p)).epsilon(1e-14));
    loss.grad().at() = 1.0;
    k.grad(a, b, s, loss);
    auto const g = ad_test::fd_gradient(plain, p);
    check_slice(a.grad().at(), g, 0);
    check_slice(b.grad().at(), g, 3);
  }
}
