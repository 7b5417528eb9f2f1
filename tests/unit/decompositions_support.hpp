// Inputs and independent references for the decomposition tests: the test
// matrices (random, identity, repeated, near-singular, inverted), Eigen's
// JacobiSVD / SelfAdjointEigenSolver turned into the signed conventions, and
// the losses the gradient tests differentiate, written with plain Eigen.
// The SVD of a square matrix needs no QR preconditioner; asking for none
// keeps Eigen's QR out of every test file that includes this.
#pragma once
#include <doctest/doctest.h>

#include <Eigen/Dense>
#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <random>
#include <string>
#include <vector>

namespace decomp_test {

template <int N>
using mat = Eigen::Matrix<double, N, N>;
template <int N>
using vec = Eigen::Matrix<double, N, 1>;

// A rotation (det +1) drawn from `g`, uniformly: Gram-Schmidt on Gaussian
// columns (the Q of their QR decomposition with a positive diagonal), the
// last column completing a right-handed frame. Written out for 2 and 3
// columns: Eigen's QR would cost each test file that includes this seconds
// of compile time.
template <int N, class S = double>
Eigen::Matrix<S, N, N> random_rotation(std::mt19937& g) {
  static_assert(N == 2 || N == 3);
  std::normal_distribution<double> n;
  auto gaussian = [&] {
    vec<N> v;
    for (int k = 0; k < N; ++k) v(k) = n(g);
    return v;
  };
  mat<N> q;
  q.col(0) = gaussian().normalized();
  if constexpr (N == 2) {
    q.col(1) = vec<2>(-q(1, 0), q(0, 0));
  } else {
    vec<3> b = gaussian();
    b -= q.col(0).dot(b) * q.col(0);
    q.col(1) = b.normalized();
    q.col(2) = q.col(0).cross(q.col(1));
  }
  return q.template cast<S>();
}

// R1 diag(sigma) R2^T for random rotations: a matrix with the given signed
// singular values.
template <int N, class S = double>
Eigen::Matrix<S, N, N> with_singular_values(std::mt19937& g, vec<N> const& sigma) {
  mat<N> const f = random_rotation<N>(g) * sigma.asDiagonal() * random_rotation<N>(g).transpose();
  return f.template cast<S>();
}

template <int N, class S = double>
Eigen::Matrix<S, N, N> random_matrix(std::mt19937& g) {
  std::uniform_real_distribution<double> u(-1, 1);
  Eigen::Matrix<S, N, N> f;
  for (int k = 0; k < N * N; ++k) f(k) = S(u(g));
  return f;
}

// U diag(clamp(sigma, lo, hi)) V^T by Eigen's SVD turned into the signed one
// (U and V rotations, the last singular value negative where det F < 0):
// the reference of ctg::svd_clamp.
template <int N>
mat<N> clamped_reference(mat<N> const& f, double lo, double hi) {
  Eigen::JacobiSVD<mat<N>, Eigen::NoQRPreconditioner> svd(f, Eigen::ComputeFullU | Eigen::ComputeFullV);
  mat<N> u = svd.matrixU(), v = svd.matrixV();
  vec<N> s = svd.singularValues();
  if (u.determinant() < 0) u.col(N - 1) *= -1, s(N - 1) *= -1;
  if (v.determinant() < 0) v.col(N - 1) *= -1, s(N - 1) *= -1;
  for (int k = 0; k < N; ++k) s(k) = std::min(std::max(s(k), lo), hi);
  return u * s.asDiagonal() * v.transpose();
}

// A gradient test point and which losses are differentiable there.
template <int N>
struct point {
  std::string name;
  mat<N> f;
  bool distinct;  // singular values (eigenvalues) distinct: U and V (Q) alone are differentiable
  bool polar;     // sigma_i + sigma_j > 0 for every pair: R, S and energies of sigma are differentiable
  bool rank;      // no two singular values zero: the ops reproduce the derivative of U diag(sigma) V^T
};

inline std::vector<point<3>> points3() {
  std::mt19937 g(11);
  using v3 = vec<3>;
  std::vector<point<3>> p;
  for (int k = 0; k < 3; ++k)
    p.push_back({"random " + std::to_string(k), random_matrix<3>(g) + mat<3>::Identity(), true, true, true});
  p.push_back({"identity", mat<3>::Identity(), false, true, true});
  p.push_back({"diag(2, 2, 1)", v3(2, 2, 1).asDiagonal().toDenseMatrix(), false, true, true});
  p.push_back({"rotated diag(2, 2, 1)", with_singular_values<3>(g, v3(2, 2, 1)), false, true, true});
  p.push_back({"rotated diag(3, 1, 1)", with_singular_values<3>(g, v3(3, 1, 1)), false, true, true});
  p.push_back({"near-singular", with_singular_values<3>(g, v3(1.2, 0.5, 1e-7)), true, true, true});
  p.push_back({"inverted", with_singular_values<3>(g, v3(1.5, 0.8, -0.3)), true, true, true});
  p.push_back({"inverted, repeated", with_singular_values<3>(g, v3(1.5, 0.6, -0.6)), false, false, true});
  p.push_back({"rank one", v3(1, -2, 0.5) * v3(0.3, 1, -1).transpose(), false, false, false});
  p.push_back({"zero", mat<3>::Zero(), false, false, false});
  return p;
}

inline std::vector<point<2>> points2() {
  std::mt19937 g(12);
  using v2 = vec<2>;
  std::vector<point<2>> p;
  for (int k = 0; k < 2; ++k)
    p.push_back({"random " + std::to_string(k), random_matrix<2>(g) + mat<2>::Identity(), true, true, true});
  p.push_back({"identity", mat<2>::Identity(), false, true, true});
  p.push_back({"-identity", -mat<2>::Identity(), false, true, true});
  p.push_back({"rotated 1.5 I", with_singular_values<2>(g, v2(1.5, 1.5)), false, true, true});
  p.push_back({"near-singular", with_singular_values<2>(g, v2(0.9, 1e-7)), true, true, true});
  p.push_back({"inverted", with_singular_values<2>(g, v2(1.3, -0.4)), true, true, true});
  mat<2> traceless;
  traceless << 1, 2, 2, -1;
  p.push_back({"symmetric traceless", traceless, false, false, true});
  p.push_back({"zero", mat<2>::Zero(), false, false, false});
  return p;
}

// Symmetric matrices for the eigendecomposition (distinct: eigenvalues distinct).
template <int N>
std::vector<point<N>> eig_points() {
  std::mt19937 g(13);
  std::vector<point<N>> p;
  for (int k = 0; k < 2; ++k) {
    mat<N> const a = random_matrix<N>(g);
    p.push_back({"random " + std::to_string(k), mat<N>(a + a.transpose()), true, true, true});
  }
  vec<N> repeated = vec<N>::Constant(2.0), indefinite = vec<N>::Constant(-1.0);
  repeated(N - 1) = 1.0, indefinite(N - 1) = 2.0;
  mat<N> const q = random_rotation<N>(g);
  p.push_back({"identity", mat<N>::Identity(), false, true, true});
  p.push_back({"diagonal, repeated", repeated.asDiagonal().toDenseMatrix(), false, true, true});
  p.push_back({"rotated, repeated", q * repeated.asDiagonal() * q.transpose(), false, true, true});
  p.push_back({"indefinite, repeated", q.transpose() * indefinite.asDiagonal() * q, false, true, true});
  p.push_back({"zero", mat<N>::Zero(), false, true, true});
  return p;
}

// ---- Eigen references, in the signed conventions -----------------------------------------------

// Singular values, the last one carrying the sign of det F.
template <int N>
vec<N> signed_singular_values(mat<N> const& f) {
  Eigen::JacobiSVD<mat<N>, Eigen::NoQRPreconditioner> svd(f);
  vec<N> s = svd.singularValues();
  if (f.determinant() < 0) s(N - 1) = -s(N - 1);
  return s;
}

// The rotation of the polar decomposition: U diag(1, .., det(U V^T)) V^T.
template <int N>
mat<N> polar_rotation(mat<N> const& f) {
  Eigen::JacobiSVD<mat<N>, Eigen::NoQRPreconditioner> svd(f, Eigen::ComputeFullU | Eigen::ComputeFullV);
  mat<N> const u = svd.matrixU(), v = svd.matrixV();
  vec<N> d = vec<N>::Ones();
  d(N - 1) = (u * v.transpose()).determinant();
  return u * d.asDiagonal() * v.transpose();
}

// ---- losses: the kernels compute the same from the decomposition ops ---------------------------

// Weights of the linear losses, fixed and unlike each other.
template <int N>
mat<N> weight(int which) {
  mat<N> w;
  for (int k = 0; k < N * N; ++k) w(k) = std::sin(1.3 * k + 0.7 * which) + 0.25 * which;
  return w;
}

// A symmetric energy of the signed singular values (fixed-corotated-like).
template <class V>
auto sigma_energy(V const& s) {
  auto sq = [](auto x) { return x * x; };
  if constexpr (V::SizeAtCompileTime == 3)
    return sq(s(0) - 1.0) + sq(s(1) - 1.0) + sq(s(2) - 1.0) + 0.5 * sq(s(0) * s(1) * s(2) - 1.0) +
           0.1 * (sq(sq(s(0))) + sq(sq(s(1))) + sq(sq(s(2))));
  else
    return sq(s(0) - 1.0) + sq(s(1) - 1.0) + 0.5 * sq(s(0) * s(1) - 1.0) + 0.1 * (sq(sq(s(0))) + sq(sq(s(1))));
}

// Loss c of the SVD/polar kernels at F, from Eigen (c = 4 uses the ops'
// forward functors: U and V alone have no convention-free reference).
template <int N>
double svd_loss(int c, mat<N> const& f) {
  switch (c) {
    case 0:
      return sigma_energy(signed_singular_values<N>(f));
    case 1:
      return (weight<N>(1).array() * polar_rotation<N>(f).array()).sum();
    case 2: {
      mat<N> const r = polar_rotation<N>(f);
      mat<N> const s = r.transpose() * f;
      return (weight<N>(2).array() * (0.5 * (s + s.transpose())).array()).sum();
    }
    case 3:  // U diag(sigma) V^T = F
      return (weight<N>(3).array() * f.array()).sum();
    default: {
      mat<N> const u = ctg::ir::fn::svd_u::apply(f), v = ctg::ir::fn::svd_v::apply(f);
      return (weight<N>(4).array() * u.array()).sum() + (weight<N>(5).array() * v.array()).sum();
    }
  }
}
inline constexpr int svd_losses = 5;

// Whether loss c is differentiable at p (the others are only required finite).
template <int N>
bool svd_loss_defined(int c, point<N> const& p) {
  if (c == 3) return p.rank;
  if (c == 4) return p.distinct;
  return p.polar;
}

// A symmetric function of the eigenvalues, and two that single them out.
template <int N>
double eig_loss(int c, mat<N> const& a) {
  mat<N> const s = 0.5 * (a + a.transpose());
  Eigen::SelfAdjointEigenSolver<mat<N>> eig(s);
  vec<N> const l = eig.eigenvalues();
  switch (c) {
    case 0: {
      double e = 0;
      for (int k = 0; k < N; ++k) e += l(k) * l(k) * l(k) + std::exp(0.5 * l(k));
      return e;
    }
    case 1: {
      double e = 0;
      for (int k = 0; k < N; ++k) e += (k + 1.5) * l(k);
      return e;
    }
    default: {
      mat<N> const q = ctg::ir::fn::sym_eig_vectors::apply(a);
      return (weight<N>(6).array() * q.array()).sum();
    }
  }
}
inline constexpr int eig_losses = 3;

// ---- the same losses as kernels ---------------------------------------------------------------

// sum(w .* m)
inline constexpr auto frobenius = [](auto const& w, auto const& m) { return ctg::trace(ctg::transpose(w) * m); };

// out(i, c) = svd_loss(c, F[i]), through the ops: the outputs of ctg::svd and
// ctg::polar bound to locals (each decomposition evaluated once), and U, V
// used directly as expressions in the last loss.
inline constexpr auto svd_losses_body = [](auto F, auto out) {
  using namespace ctg::literals;
  using M = typename decltype(F)::value_type;
  constexpr int N = int(M::RowsAtCompileTime);
  using S = typename M::Scalar;
  M const w1 = weight<N>(1).template cast<S>(), w2 = weight<N>(2).template cast<S>(),
          w3 = weight<N>(3).template cast<S>(), w4 = weight<N>(4).template cast<S>(),
          w5 = weight<N>(5).template cast<S>();
  return ctg::range(F.size(), [=](auto i) {
    return ctg::let(F[i], [=](auto f) {
      auto [U, sigma, V] = ctg::svd(f);
      auto [R, S] = ctg::polar(f);
      return ctg::let(U, sigma, V, R, S, [=](auto u, auto s, auto v, auto r, auto sym) {
        auto const sq = [](auto const& x) { return x * x; };
        if constexpr (N == 3) {
          auto const energy = sq(s[0_c] - 1.0) + sq(s[1_c] - 1.0) + sq(s[2_c] - 1.0) +
                              0.5 * sq(s[0_c] * s[1_c] * s[2_c] - 1.0) +
                              0.1 * (sq(sq(s[0_c])) + sq(sq(s[1_c])) + sq(sq(s[2_c])));
          auto const diag = ctg::mat<3, 3>(s[0_c], 0.0, 0.0, 0.0, s[1_c], 0.0, 0.0, 0.0, s[2_c]);
          return ctg::block(out(i, 0_c) = energy, out(i, 1_c) = frobenius(w1, r), out(i, 2_c) = frobenius(w2, sym),
                            out(i, 3_c) = frobenius(w3, u * diag * ctg::transpose(v)),
                            out(i, 4_c) = frobenius(w4, ctg::svd_u(f)) + frobenius(w5, ctg::svd_v(f)));
        } else {
          auto const energy = sq(s[0_c] - 1.0) + sq(s[1_c] - 1.0) + 0.5 * sq(s[0_c] * s[1_c] - 1.0) +
                              0.1 * (sq(sq(s[0_c])) + sq(sq(s[1_c])));
          auto const diag = ctg::mat<2, 2>(s[0_c], 0.0, 0.0, s[1_c]);
          return ctg::block(out(i, 0_c) = energy, out(i, 1_c) = frobenius(w1, r), out(i, 2_c) = frobenius(w2, sym),
                            out(i, 3_c) = frobenius(w3, u * diag * ctg::transpose(v)),
                            out(i, 4_c) = frobenius(w4, ctg::svd_u(f)) + frobenius(w5, ctg::svd_v(f)));
        }
      });
    });
  });
};

// out(i, c) = eig_loss(c, A[i]).
inline constexpr auto eig_losses_body = [](auto A, auto out) {
  using namespace ctg::literals;
  using M = typename decltype(A)::value_type;
  constexpr int N = int(M::RowsAtCompileTime);
  M const w6 = weight<N>(6).template cast<typename M::Scalar>();
  return ctg::range(A.size(), [=](auto i) {
    auto [values, vectors] = ctg::sym_eig(A[i]);
    return ctg::let(values, [=](auto l) {
      auto const cube_exp = [](auto const& x) { return x * x * x + ctg::exp(0.5 * x); };
      if constexpr (N == 3)
        return ctg::block(out(i, 0_c) = cube_exp(l[0_c]) + cube_exp(l[1_c]) + cube_exp(l[2_c]),
                          out(i, 1_c) = 1.5 * l[0_c] + 2.5 * l[1_c] + 3.5 * l[2_c],
                          out(i, 2_c) = frobenius(w6, vectors));
      else
        return ctg::block(out(i, 0_c) = cube_exp(l[0_c]) + cube_exp(l[1_c]), out(i, 1_c) = 1.5 * l[0_c] + 2.5 * l[1_c],
                          out(i, 2_c) = frobenius(w6, vectors));
    });
  });
};

// d loss / d F by central differences over every coefficient.
template <int N, class L>
mat<N> fd_gradient(L const& loss, mat<N> const& f, double h = 1e-6) {
  mat<N> g;
  for (int k = 0; k < N * N; ++k) {
    mat<N> plus = f, minus = f;
    plus(k) += h, minus(k) -= h;
    g(k) = (loss(plus) - loss(minus)) / (2 * h);
  }
  return g;
}

// Agreement with a finite difference of step 1e-6: its error is O(h^2) in
// the third derivative plus O(eps / h) rounding.
template <int N>
void check_gradient(mat<N> const& got, mat<N> const& want, double tol = 2e-6) {
  INFO("got\n" << got << "\nwant\n" << want);
  CHECK(got.allFinite());
  CHECK((got - want).norm() <= tol * (1 + want.norm()));
}

// Runs kernel k on every point, checks the loss values against `loss`, then
// seeds one loss at a time and compares each F.grad with finite differences
// wherever `defined(c, point)`.
template <int N, class K, class Loss, class Defined>
void check_gradients(K const& k, std::vector<point<N>> const& points, int losses, Loss const& loss,
                     Defined const& defined) {
  int const n = int(points.size());
  ctg::field<mat<N>, 1, ctg::grad> f({n}, {.name = "F"});
  ctg::field<double, 2, ctg::grad> out({n, losses}, {.name = "out"});
  for (int i = 0; i < n; ++i) f.at(i) = points[std::size_t(i)].f;
  k(f, out);
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < losses; ++c) {
      auto const& p = points[std::size_t(i)];
      CAPTURE(p.name);
      CAPTURE(c);
      CHECK(std::isfinite(out.at(i, c)));
      if (defined(c, p)) CHECK(out.at(i, c) == doctest::Approx(loss(c, p.f)).epsilon(1e-12));
    }
  for (int c = 0; c < losses; ++c) {
    out.grad().fill(0.0);
    for (int i = 0; i < n; ++i) out.grad().at(i, c) = 1.0;
    f.zero_grad();
    k.grad(f, out);
    for (int i = 0; i < n; ++i) {
      auto const& p = points[std::size_t(i)];
      CAPTURE(p.name);
      CAPTURE(c);
      mat<N> const g = f.grad().at(i);
      CHECK(g.allFinite());
      if (defined(c, p)) check_gradient<N>(g, fd_gradient<N>([&](mat<N> const& m) { return loss(c, m); }, p.f));
    }
  }
}

// Runs k.fwd with a random direction D[i] in F.dual() and checks each
// out.dual(i, c) against the central difference of loss c along D[i]
// wherever `defined(c, point)`, and that it is finite everywhere.
template <int N, class K, class Loss, class Defined>
void check_tangents(K const& k, std::vector<point<N>> const& points, int losses, Loss const& loss,
                    Defined const& defined) {
  int const n = int(points.size());
  ctg::field<mat<N>, 1, ctg::dual> f({n}, {.name = "F"});
  ctg::field<double, 2, ctg::dual> out({n, losses}, {.name = "out"});
  std::mt19937 g(31);
  std::vector<mat<N>> directions;
  for (int i = 0; i < n; ++i) {
    f.at(i) = points[std::size_t(i)].f;
    directions.push_back(random_matrix<N>(g));
    f.dual().at(i) = directions.back();
  }
  k.fwd(f, out);
  double const h = 1e-6;
  for (int i = 0; i < n; ++i) {
    auto const& p = points[std::size_t(i)];
    mat<N> const d = directions[std::size_t(i)];
    for (int c = 0; c < losses; ++c) {
      CAPTURE(p.name);
      CAPTURE(c);
      double const t = out.dual().at(i, c);
      CHECK(std::isfinite(t));
      if (!defined(c, p)) continue;
      CHECK(out.at(i, c) == doctest::Approx(loss(c, p.f)).epsilon(1e-12));
      double const fd = (loss(c, mat<N>(p.f + h * d)) - loss(c, mat<N>(p.f - h * d))) / (2 * h);
      CHECK(std::abs(t - fd) <= 2e-6 * (1 + std::abs(fd)));
    }
  }
}

}  // namespace decomp_test
