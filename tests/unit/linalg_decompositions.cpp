// Forward results of the decompositions against Eigen's JacobiSVD and
// SelfAdjointEigenSolver on many random inputs (float and double, 2x2 and
// 3x3: generic, clustered, graded, nearly rank-deficient, inverted), the
// conventions (rotations with det +1, order, signs, reconstruction), and the
// same values through kernels (structured bindings on device-style fields).
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>

#include "decompositions_support.hpp"

using namespace ctg::literals;
namespace dt = decomp_test;
namespace fn = ctg::ir::fn;

namespace {

template <class S, int N>
using mat = Eigen::Matrix<S, N, N>;
template <class S, int N>
using vec = Eigen::Matrix<S, N, 1>;

// Inputs of one kind, in double (then rounded to S): the kind cycles through
// generic, clustered (two singular values 1e-7 apart), repeated, graded
// (rows and columns scaled over six orders of magnitude), nearly rank one,
// inverted (det < 0) and exactly diagonal.
template <int N>
dt::mat<N> input(std::mt19937& g, int k) {
  std::uniform_real_distribution<double> u(-1, 1);
  dt::vec<N> s;
  switch (k % 7) {
    case 0:
      return dt::random_matrix<N>(g);
    case 1:
      s.setConstant(1.0), s(0) = 1.0 + 1e-7 * u(g), s(N - 1) = 0.3;
      return dt::with_singular_values<N>(g, s);
    case 2:
      s.setConstant(2.0), s(N - 1) = N == 3 ? 1.0 : 2.0;
      return dt::with_singular_values<N>(g, s);
    case 3: {
      dt::mat<N> f = dt::random_matrix<N>(g);
      for (int i = 0; i < N; ++i) f.row(i) *= std::pow(10.0, 1.5 * u(g)), f.col(i) *= std::pow(10.0, 1.5 * u(g));
      return f;
    }
    case 4: {
      dt::vec<N> a, b;
      for (int i = 0; i < N; ++i) a(i) = u(g), b(i) = u(g);
      return a * b.transpose() + 1e-6 * dt::random_matrix<N>(g);
    }
    case 5:
      for (int i = 0; i < N; ++i) s(i) = 1.5 - 0.4 * i;
      s(N - 1) = -s(N - 1);
      return dt::with_singular_values<N>(g, s);
    default:
      for (int i = 0; i < N; ++i) s(i) = u(g);
      return s.asDiagonal();
  }
}

// Distance from s(k) to the nearest other value: what the error of the k-th
// singular or eigenvector is divided by.
template <class V>
double gap(V const& s, int k) {
  double d = std::numeric_limits<double>::infinity();
  for (int j = 0; j < int(V::SizeAtCompileTime); ++j)
    if (j != k) d = std::min(d, std::abs(double(s(j)) - double(s(k))));
  return d;
}

template <class S, int N>
void check_svd(int count) {
  double const eps = std::numeric_limits<S>::epsilon();
  std::mt19937 g(7);
  for (int k = 0; k < count; ++k) {
    mat<S, N> const f = input<N>(g, k).template cast<S>();
    CAPTURE(k);
    CAPTURE(f);
    mat<S, N> const u = fn::svd_u::apply(f), v = fn::svd_v::apply(f);
    vec<S, N> const s = fn::svd_sigma::apply(f);
    Eigen::JacobiSVD<dt::mat<N>, Eigen::NoQRPreconditioner> ref(f.template cast<double>(),
                                                                Eigen::ComputeFullU | Eigen::ComputeFullV);
    dt::vec<N> const rs = ref.singularValues();
    double const scale = std::max(rs(0), std::numeric_limits<double>::min());
    // Conventions: rotations, order by magnitude, the sign of det F last.
    mat<S, N> const eye = mat<S, N>::Identity();
    CHECK(double((u.transpose() * u - eye).norm()) < 16 * eps);
    CHECK(double((v.transpose() * v - eye).norm()) < 16 * eps);
    CHECK(double(u.determinant()) == doctest::Approx(1.0).epsilon(8 * eps));
    CHECK(double(v.determinant()) == doctest::Approx(1.0).epsilon(8 * eps));
    for (int i = 0; i + 1 < N; ++i) CHECK(s(i) >= std::abs(s(i + 1)));
    for (int i = 0; i + 1 < N; ++i) CHECK(s(i) >= S(0));
    double const det = f.template cast<double>().determinant();
    if (std::abs(det) > 1e3 * eps * std::pow(scale, N)) CHECK((s(N - 1) < S(0)) == (det < 0));
    // F = U diag(sigma) V^T, and the values against Eigen's.
    CHECK(double((u * s.asDiagonal() * v.transpose() - f).norm()) < 16 * eps * scale);
    for (int i = 0; i < N; ++i) CHECK(std::abs(std::abs(double(s(i))) - rs(i)) < 16 * eps * scale);
    // Singular vectors: Eigen's up to sign, within eps / relative gap.
    for (int i = 0; i < N; ++i) {
      double const rel_gap = gap(rs, i) / scale;
      if (rel_gap < 1e-3) continue;
      dt::vec<N> const ui = u.col(i).template cast<double>(), vi = v.col(i).template cast<double>();
      double const su = ui.dot(ref.matrixU().col(i)) < 0 ? -1 : 1, sv = vi.dot(ref.matrixV().col(i)) < 0 ? -1 : 1;
      CHECK((ui - su * ref.matrixU().col(i)).norm() < 32 * eps / rel_gap);
      CHECK((vi - sv * ref.matrixV().col(i)).norm() < 32 * eps / rel_gap);
    }
    // Polar: R = U V^T, S = R^T F symmetric, F = R S.
    mat<S, N> const r = fn::polar_r::apply(f), sym = fn::polar_s::apply(f);
    CHECK(double((r.transpose() * r - eye).norm()) < 16 * eps);
    CHECK(double(r.determinant()) == doctest::Approx(1.0).epsilon(8 * eps));
    CHECK(double((sym - sym.transpose()).norm()) == 0.0);
    CHECK(double((r * sym - f).norm()) < 16 * eps * scale);
    double const polar_gap = N == 3 ? rs(1) + (det < 0 ? -rs(2) : rs(2)) : rs(0) + (det < 0 ? -rs(1) : rs(1));
    if (polar_gap > 1e-3 * scale)
      CHECK((r.template cast<double>() - dt::polar_rotation<N>(f.template cast<double>())).norm() <
            64 * eps * scale / polar_gap);
  }
}

template <class S, int N>
void check_sym_eig(int count) {
  double const eps = std::numeric_limits<S>::epsilon();
  std::mt19937 g(8);
  for (int k = 0; k < count; ++k) {
    dt::mat<N> const f = input<N>(g, k);
    mat<S, N> const a = (f + f.transpose()).template cast<S>();
    CAPTURE(k);
    CAPTURE(a);
    vec<S, N> const l = fn::sym_eig_values::apply(a);
    mat<S, N> const q = fn::sym_eig_vectors::apply(a);
    Eigen::SelfAdjointEigenSolver<dt::mat<N>> ref(a.template cast<double>());
    dt::vec<N> const rl = ref.eigenvalues();
    double const scale = std::max(rl.cwiseAbs().maxCoeff(), std::numeric_limits<double>::min());
    mat<S, N> const eye = mat<S, N>::Identity();
    CHECK(double((q.transpose() * q - eye).norm()) < 16 * eps);
    CHECK(double(q.determinant()) == doctest::Approx(1.0).epsilon(8 * eps));
    for (int i = 0; i + 1 < N; ++i) CHECK(l(i) <= l(i + 1));
    CHECK(double((q * l.asDiagonal() * q.transpose() - a).norm()) < 16 * eps * scale);
    for (int i = 0; i < N; ++i) CHECK(std::abs(double(l(i)) - rl(i)) < 16 * eps * scale);
    for (int i = 0; i < N; ++i) {
      double const rel_gap = gap(rl, i) / scale;
      if (rel_gap < 1e-3) continue;
      dt::vec<N> const qi = q.col(i).template cast<double>();
      double const sign = qi.dot(ref.eigenvectors().col(i)) < 0 ? -1 : 1;
      CHECK((qi - sign * ref.eigenvectors().col(i)).norm() < 32 * eps / rel_gap);
    }
  }
}

// All seven outputs through a kernel, for the element type of f.
auto const outputs = [](auto f, auto u, auto sigma, auto v, auto r, auto s, auto values, auto vectors) {
  return ctg::range(f.size(), [=](auto i) {
    auto [U, Sigma, V] = ctg::svd(f[i]);
    auto [R, S] = ctg::polar(f[i]);
    auto [L, Q] = ctg::sym_eig(f[i] + ctg::transpose(f[i]));
    return ctg::block(u[i] = U, sigma[i] = Sigma, v[i] = V, r[i] = R, s[i] = S, values[i] = L, vectors[i] = Q);
  });
};

template <class S, int N, class K>
void check_kernel(K const& k) {
  using M = mat<S, N>;
  using W = vec<S, N>;
  int const n = 14;
  ctg::field<M, 1> f(n), u(n), v(n), r(n), s(n), vectors(n);
  ctg::field<W, 1> sigma(n), values(n);
  std::mt19937 g(9);
  for (int i = 0; i < n; ++i) f.at(i) = input<N>(g, i).template cast<S>();
  k(f, u, sigma, v, r, s, values, vectors);
  // The same code as the functors, up to how the compiler schedules it.
  auto same = [](auto const& x, auto const& y) {
    return double((x - y).norm()) <= 4 * std::numeric_limits<S>::epsilon() * (1 + double(y.norm()));
  };
  for (int i = 0; i < n; ++i) {
    M const a = f.at(i);
    M const sym = a + a.transpose();
    CAPTURE(i);
    CHECK(same(u.at(i), fn::svd_u::apply(a)));
    CHECK(same(sigma.at(i), fn::svd_sigma::apply(a)));
    CHECK(same(v.at(i), fn::svd_v::apply(a)));
    CHECK(same(r.at(i), fn::polar_r::apply(a)));
    CHECK(same(s.at(i), fn::polar_s::apply(a)));
    CHECK(same(values.at(i), fn::sym_eig_values::apply(sym)));
    CHECK(same(vectors.at(i), fn::sym_eig_vectors::apply(sym)));
  }
}

}  // namespace

TEST_CASE("svd and polar against Eigen's JacobiSVD, and their conventions") {
  check_svd<double, 3>(7000);
  check_svd<float, 3>(7000);
  check_svd<double, 2>(7000);
  check_svd<float, 2>(7000);
}

TEST_CASE("sym_eig against Eigen's SelfAdjointEigenSolver, and its conventions") {
  check_sym_eig<double, 3>(7000);
  check_sym_eig<float, 3>(7000);
  check_sym_eig<double, 2>(7000);
  check_sym_eig<float, 2>(7000);
}

TEST_CASE("special inputs: the identity, zero, -I, a rotation, a reflection, diagonal with repeated values") {
  using M = dt::mat<3>;
  using V = dt::vec<3>;
  M const rot = Eigen::AngleAxisd(0.7, V(1, 2, -1).normalized()).toRotationMatrix();
  M reflect = M::Identity();
  reflect(1, 1) = -1;
  struct expected {
    M f;
    V sigma;
    M r;
  };
  for (auto const& e : {expected{M::Identity(), V(1, 1, 1), M::Identity()},
                        expected{M::Zero(), V(0, 0, 0), M::Identity()},
                        expected{-M::Identity(), V(1, 1, -1), M::Identity()},
                        expected{rot, V(1, 1, 1), rot}, expected{2.0 * rot, V(2, 2, 2), rot},
                        expected{reflect, V(1, 1, -1), M::Identity()},
                        expected{M(V(2, 3, 2).asDiagonal()), V(3, 2, 2), M::Identity()}}) {
    CAPTURE(e.f);
    V const s = fn::svd_sigma::apply(e.f);
    CHECK((s - e.sigma).norm() < 1e-15);
    M const u = fn::svd_u::apply(e.f), v = fn::svd_v::apply(e.f);
    CHECK((u * s.asDiagonal() * v.transpose() - e.f).norm() < 1e-14);
    CHECK(std::abs(u.determinant() - 1) < 1e-15);
    CHECK(std::abs(v.determinant() - 1) < 1e-15);
    M const r = fn::polar_r::apply(e.f);
    CHECK((r.transpose() * r - M::Identity()).norm() < 1e-15);
    CHECK(std::abs(r.determinant() - 1) < 1e-15);
    // R is unique where sigma_i + sigma_j > 0 for all pairs; the reflection
    // and -I have two (one pair sums to 0): any rotation R with R S = F does.
    if (e.sigma(1) + e.sigma(2) > 0) CHECK((r - e.r).norm() < 1e-14);
    CHECK((r * fn::polar_s::apply(e.f) - e.f).norm() < 1e-14);
  }
  // 2x2: -I is the rotation by pi (sigma = 1, 1), a reflection has sigma (1, -1).
  using M2 = dt::mat<2>;
  M2 flip = M2::Identity();
  flip(0, 0) = -1;
  CHECK((fn::svd_sigma::apply(M2(-M2::Identity())) - dt::vec<2>(1, 1)).norm() < 1e-15);
  CHECK((fn::polar_r::apply(M2(-M2::Identity())) + M2::Identity()).norm() < 1e-15);
  CHECK((fn::svd_sigma::apply(flip) - dt::vec<2>(1, -1)).norm() < 1e-15);
  CHECK((fn::svd_sigma::apply(M2(M2::Zero()))).norm() == 0.0);
  CHECK((fn::sym_eig_values::apply(M2(M2::Zero()))).norm() == 0.0);
  CHECK(fn::sym_eig_vectors::apply(M2(M2::Zero())) == M2::Identity());
  CHECK(fn::sym_eig_vectors::apply(M(M::Identity())) == M::Identity());
}

TEST_CASE("the ops in kernels: structured bindings, the same values as the functors") {
  check_kernel<double, 3>(ctg::kernel<"outputs_3d">(outputs));
  check_kernel<float, 3>(ctg::kernel<"outputs_3f">(outputs));
  check_kernel<double, 2>(ctg::kernel<"outputs_2d">(outputs));
  check_kernel<float, 2>(ctg::kernel<"outputs_2f">(outputs));
}
