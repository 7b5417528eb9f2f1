// Reverse mode through svd and polar: gradients (k.grad) of scalar losses of
// 3x3 and 2x2 matrices against central differences of the same losses
// computed with Eigen's solvers, at random matrices, the identity, repeated,
// near-singular, inverted and degenerate ones. Where a loss is not
// differentiable (U alone at repeated singular values, R where
// sigma_i + sigma_j = 0) its gradient must still be finite.
#include <doctest/doctest.h>

#include "decompositions_support.hpp"

namespace dt = decomp_test;

namespace {

auto const svd3_losses = ctg::kernel<"svd3_losses">(dt::svd_losses_body);
auto const svd2_losses = ctg::kernel<"svd2_losses">(dt::svd_losses_body);

}  // namespace

TEST_CASE("svd and polar of 3x3 matrices: gradients of energies of sigma, of R, S, U diag(sigma) V^T, U and V") {
  dt::check_gradients<3>(svd3_losses, dt::points3(), dt::svd_losses, dt::svd_loss<3>, dt::svd_loss_defined<3>);
}

TEST_CASE("svd and polar of 2x2 matrices: the same losses") {
  dt::check_gradients<2>(svd2_losses, dt::points2(), dt::svd_losses, dt::svd_loss<2>, dt::svd_loss_defined<2>);
}

TEST_CASE("closed forms: d sum(sigma) / dF = R at a random F, and d det-energy / dF through sigma") {
  // sum of the signed singular values is tr(R^T F), whose gradient is R.
  std::mt19937 g(21);
  dt::mat<3> const f0 = dt::random_matrix<3>(g) + dt::mat<3>::Identity();
  ctg::field<dt::mat<3>, 0, ctg::grad> f({.name = "F"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  f.at() = f0;
  auto k = ctg::kernel<"sum_sigma">([](auto f, auto loss) {
    using namespace ctg::literals;
    return ctg::let(ctg::svd_sigma(f()),
                    [=](auto s) { return loss() = s[0_c] + s[1_c] + s[2_c] + s[0_c] * s[1_c] * s[2_c]; });
  });
  k(f, loss);
  loss.grad().at() = 1.0;
  k.grad(f, loss);
  // d det / dF = cofactor matrix = det(F) F^-T.
  dt::mat<3> const want = dt::polar_rotation<3>(f0) + f0.determinant() * f0.inverse().transpose();
  CHECK((f.grad().at() - want).norm() < 1e-12 * (1 + want.norm()));
}
