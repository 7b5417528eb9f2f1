// ctg::svd_clamp(F, lo, hi) = U diag(clamp(sigma, lo, hi)) V^T, the plastic
// projection of snow: its value against Eigen's JacobiSVD, its gradient (F,
// lo and hi) against central differences of that reference, its tangent
// against the gradient, at coinciding singular values (clamped together or
// not), at nearly coinciding ones, at F = I, at an inverted F and at random
// F, 2 x 2 and 3 x 3, double and float. The same composition through ctg::svd's three outputs is
// wrong where two clamped values coincide (twice the off-diagonal
// derivative, docs/02); the first case pins that difference.
#include "decompositions_support.hpp"

namespace {

using namespace decomp_test;

struct bounds {
  double lo, hi;
};

// loss = sum_p <W, svd_clamp(F_p, lo, hi)>, and its gradient by differences.
template <int N>
double reference_loss(mat<N> const& w, mat<N> const& f, bounds b) {
  return (w.transpose() * clamped_reference<N>(f, b.lo, b.hi)).trace();
}

template <int N, class S>
void check_point(mat<N> const& f, bounds b, mat<N> const& w, double tol) {
  using M = Eigen::Matrix<S, N, N>;
  ctg::field<M, 1, ctg::grad | ctg::dual> F({1}, {.name = "F"});
  ctg::field<S, 0, ctg::grad | ctg::dual> lo({.name = "lo"}), hi({.name = "hi"});
  ctg::field<S, 1, ctg::grad | ctg::dual> loss({1}, {.name = "loss"});
  ctg::field<M, 1, ctg::grad> G({1}, {.name = "G"});
  F.at(0) = f.template cast<S>();
  lo.at() = S(b.lo), hi.at() = S(b.hi);
  M const ws = w.template cast<S>();
  auto k = ctg::kernel<"plastic">([=](auto F, auto lo, auto hi, auto G, auto loss) {
    return ctg::range(1, [=](auto p) {
      return ctg::let(ctg::svd_clamp(F[p], lo(), hi()), [=](auto g) {
        return ctg::block(G[p] = g, loss[p] = ctg::trace(ctg::transpose(ws) * g));
      });
    });
  });
  k(F, lo, hi, G, loss);
  mat<N> const want = clamped_reference<N>(f, b.lo, b.hi);
  CHECK((G.at(0).template cast<double>() - want).norm() <= tol * (1 + want.norm()));

  loss.grad().fill(S(1));
  k.grad(F, lo, hi, G, loss);
  mat<N> const dF = fd_gradient<N>([&](mat<N> const& x) { return reference_loss<N>(w, x, b); }, f);
  double const h = 1e-6;
  double const dlo = (reference_loss<N>(w, f, {b.lo + h, b.hi}) - reference_loss<N>(w, f, {b.lo - h, b.hi})) / (2 * h);
  double const dhi = (reference_loss<N>(w, f, {b.lo, b.hi + h}) - reference_loss<N>(w, f, {b.lo, b.hi - h})) / (2 * h);
  mat<N> const got = F.grad().at(0).template cast<double>();
  CAPTURE(got);
  CAPTURE(dF);
  CHECK((got - dF).norm() <= tol * (1 + dF.norm()));
  CHECK(double(lo.grad().at()) == doctest::Approx(dlo).epsilon(tol).scale(1));
  CHECK(double(hi.grad().at()) == doctest::Approx(dhi).epsilon(tol).scale(1));

  // The tangent along (dF, dlo, dhi) is the gradient's inner product with it.
  mat<N> df;
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) df(i, j) = 0.3 * i - 0.7 * j + 0.2;
  F.dual().fill(df.template cast<S>());
  lo.dual().fill(S(0.5)), hi.dual().fill(S(-1.5));
  k.fwd(F, lo, hi, G, loss);
  double const directional = (dF.transpose() * df).trace() + 0.5 * dlo - 1.5 * dhi;
  CHECK(double(loss.dual().at(0)) == doctest::Approx(directional).epsilon(tol).scale(1 + std::abs(directional)));
}

}  // namespace

TEST_CASE("svd_clamp 3x3: exact where clamped singular values coincide, nearly coincide, or not") {
  std::mt19937 g(7);
  bounds const snow{0.975, 1.0075};
  mat<3> const w = weight<3>(0);
  std::vector<vec<3>> const sigmas{
      vec<3>(1.2, 1.2, 0.8),            // two clamped to hi together, one to lo
      vec<3>(1.2, 1.2 - 1e-7, 0.9),     // nearly coinciding, both clamped
      vec<3>(1.0, 1.0, 1.0),            // F = R1 R2^T: all inside, all equal
      vec<3>(1.3, 1.0, 0.99),           // one clamped, two inside
      vec<3>(1.02, 1.001, 0.7),         // above, inside, below
  };
  for (auto const& s : sigmas) {
    CAPTURE(s.transpose());
    mat<3> const f = with_singular_values<3>(g, s);
    check_point<3, double>(f, snow, w, 1e-6);
  }
  check_point<3, double>(mat<3>::Identity(), snow, w, 1e-6);
  // An inverted element: the signed SVD's last value is negative and is
  // clamped to lo, so G = svd_clamp(F) has det G > 0.
  check_point<3, double>(with_singular_values<3>(g, vec<3>(1.2, 0.95, -0.5)), snow, w, 1e-6);
  check_point<3, double>(mat<3>(Eigen::Vector3d(1.3, 0.6, 1.0).asDiagonal()), snow, w, 1e-6);
}

TEST_CASE("svd_clamp 2x2 and in float") {
  std::mt19937 g(11);
  bounds const b{0.9, 1.1};
  for (auto const& s : {vec<2>(1.3, 1.3), vec<2>(1.25, 0.95), vec<2>(0.5, 0.5 + 1e-3)}) {
    CAPTURE(s.transpose());
    check_point<2, double>(with_singular_values<2>(g, s), b, weight<2>(0), 1e-6);
  }
  // float: the SVD and the rule in single precision, against the double
  // reference, at coinciding clamped values and away from them.
  check_point<3, float>(with_singular_values<3>(g, vec<3>(1.2, 1.2, 0.8)), b, weight<3>(0), 2e-3);
  check_point<3, float>(with_singular_values<3>(g, vec<3>(1.05, 0.97, 0.5)), b, weight<3>(0), 2e-3);
}

TEST_CASE("svd_clamp against the composition of ctg::svd's outputs where values coincide") {
  // Both clamped to hi at sigma = (1.2, 1.2): the exact off-diagonal part of
  // the derivative is hi / (sigma_i + sigma_j); the three ops give twice it.
  using M = Eigen::Matrix3d;
  std::mt19937 g(3);
  M const f = with_singular_values<3>(g, vec<3>(1.2, 1.2, 0.8));
  bounds const b{0.9, 1.1};
  ctg::field<M, 1, ctg::grad> F({1}, {.name = "F"});
  ctg::field<double, 1, ctg::grad> exact({1}, {.name = "exact"}), composed({1}, {.name = "composed"});
  F.at(0) = f;
  M const w = weight<3>(0);
  auto k = ctg::kernel<"two_ways">([=](auto F, auto exact, auto composed) {
    return ctg::range(1, [=](auto p) {
      auto [U, sigma, V] = ctg::svd(F[p]);
      auto const c0 = ctg::clamp(sigma[ctg::c<0>], b.lo, b.hi);
      auto const c1 = ctg::clamp(sigma[ctg::c<1>], b.lo, b.hi);
      auto const c2 = ctg::clamp(sigma[ctg::c<2>], b.lo, b.hi);
      auto const by_ops = U * ctg::mat<3, 3>(c0, 0.0, 0.0, 0.0, c1, 0.0, 0.0, 0.0, c2) * ctg::transpose(V);
      return ctg::block(exact[p] = ctg::trace(ctg::transpose(w) * ctg::svd_clamp(F[p], b.lo, b.hi)),
                        composed[p] = ctg::trace(ctg::transpose(w) * by_ops));
    });
  });
  k(F, exact, composed);
  CHECK(exact.at(0) == doctest::Approx(composed.at(0)).epsilon(1e-12));
  mat<3> const want = fd_gradient<3>([&](mat<3> const& x) { return reference_loss<3>(w, x, b); }, f);
  exact.grad().fill(1.0);
  k.grad(F, exact, composed);
  double const exact_error = (F.grad().at(0) - want).norm();
  F.grad().fill(M::Zero());
  exact.grad().fill(0.0);
  composed.grad().fill(1.0);
  k.grad(F, exact, composed);
  double const composed_error = (F.grad().at(0) - want).norm();
  CHECK(exact_error <= 1e-6 * want.norm());
  // The limitation docs/02 states for the composition of the three ops:
  // whoever makes their rules exact here updates the docs and this line.
  CHECK(composed_error >= 0.05 * want.norm());
}
