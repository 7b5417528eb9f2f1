// Forward mode through svd and polar: tangents (k.fwd) of the scalar losses
// of the reverse-mode tests along random directions, against central
// differences of the Eigen-computed losses; and the tangents of the matrix
// outputs themselves against differences of the operations.
#include <doctest/doctest.h>

#include "decompositions_support.hpp"

using namespace ctg::literals;
namespace dt = decomp_test;

namespace {

auto const svd3_tangents = ctg::kernel<"svd3_tangents">(dt::svd_losses_body);
auto const svd2_tangents = ctg::kernel<"svd2_tangents">(dt::svd_losses_body);

// Every output of the decompositions, stored: their tangents are the
// derivatives of the ops along F.dual().
auto const outputs = ctg::kernel<"outputs">([](auto f, auto u, auto sigma, auto v, auto r, auto s) {
  return ctg::range(f.size(), [=](auto i) {
    auto [U, Sigma, V] = ctg::svd(f[i]);
    auto [R, S] = ctg::polar(f[i]);
    return ctg::block(u[i] = U, sigma[i] = Sigma, v[i] = V, r[i] = R, s[i] = S);
  });
});

}  // namespace

TEST_CASE("svd and polar of 3x3 matrices: tangents of the losses") {
  dt::check_tangents<3>(svd3_tangents, dt::points3(), dt::svd_losses, dt::svd_loss<3>, dt::svd_loss_defined<3>);
}

TEST_CASE("svd and polar of 2x2 matrices: tangents of the losses") {
  dt::check_tangents<2>(svd2_tangents, dt::points2(), dt::svd_losses, dt::svd_loss<2>, dt::svd_loss_defined<2>);
}

TEST_CASE("tangents of U, sigma, V, R and S: differences of the ops at random F, finite at degenerate F") {
  namespace fn = ctg::ir::fn;
  using M = dt::mat<3>;
  using V = dt::vec<3>;
  std::mt19937 g(41);
  std::vector<M> fs{dt::random_matrix<3>(g), dt::with_singular_values<3>(g, V(1.4, 0.9, -0.2)), M::Identity(),
                    M(V(2, 2, 1).asDiagonal()), M::Zero()};
  int const n = int(fs.size()), generic = 2;
  constexpr ctg::flags dual = ctg::dual;
  ctg::field<M, 1, dual> f({n}, {.name = "F"}), u({n}, {.name = "U"}), v({n}, {.name = "V"}), r({n}, {.name = "R"}),
      s({n}, {.name = "S"});
  ctg::field<V, 1, dual> sigma({n}, {.name = "sigma"});
  std::vector<M> ds;
  for (int i = 0; i < n; ++i) {
    ds.push_back(dt::random_matrix<3>(g));
    f.at(i) = fs[std::size_t(i)], f.dual().at(i) = ds.back();
  }
  outputs.fwd(f, u, sigma, v, r, s);
  double const h = 1e-6;
  auto diff = [&](auto op, int i) {
    M const a = fs[std::size_t(i)], d = ds[std::size_t(i)];
    return decltype(op(a))((op(M(a + h * d)) - op(M(a - h * d))) / (2 * h));
  };
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    CHECK(u.dual().at(i).allFinite());
    CHECK(v.dual().at(i).allFinite());
    CHECK(sigma.dual().at(i).allFinite());
    CHECK(r.dual().at(i).allFinite());
    CHECK(s.dual().at(i).allFinite());
    CHECK((u.at(i) - fn::svd_u::apply(fs[std::size_t(i)])).norm() == 0.0);
    if (i >= generic) continue;
    CHECK((u.dual().at(i) - diff([](M const& a) { return fn::svd_u::apply(a); }, i)).norm() < 1e-7);
    CHECK((v.dual().at(i) - diff([](M const& a) { return fn::svd_v::apply(a); }, i)).norm() < 1e-7);
    CHECK((sigma.dual().at(i) - diff([](M const& a) { return fn::svd_sigma::apply(a); }, i)).norm() < 1e-7);
    CHECK((r.dual().at(i) - diff([](M const& a) { return fn::polar_r::apply(a); }, i)).norm() < 1e-7);
    CHECK((s.dual().at(i) - diff([](M const& a) { return fn::polar_s::apply(a); }, i)).norm() < 1e-7);
  }
  // At repeated singular values the tangents of U and V still add up to the
  // tangent of F: dU diag(s) V^T + U diag(ds) V^T + U diag(s) dV^T = dF.
  for (int i = generic; i < n - 1; ++i) {
    CAPTURE(i);
    M const rebuilt = u.dual().at(i) * sigma.at(i).asDiagonal() * v.at(i).transpose() +
                      u.at(i) * sigma.dual().at(i).asDiagonal() * v.at(i).transpose() +
                      u.at(i) * sigma.at(i).asDiagonal() * v.dual().at(i).transpose();
    CHECK((rebuilt - ds[std::size_t(i)]).norm() < 1e-12);
  }
}
