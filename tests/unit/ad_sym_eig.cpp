// sym_eig in both modes: gradients (k.grad) and tangents (k.fwd) of a
// symmetric function of the eigenvalues (differentiable everywhere, repeated
// eigenvalues included), of a weighted sum of the sorted eigenvalues and of
// the eigenvectors (differentiable where the eigenvalues are distinct),
// against central differences with Eigen's SelfAdjointEigenSolver.
#include <doctest/doctest.h>

#include "decompositions_support.hpp"

namespace dt = decomp_test;

namespace {
auto const eig3_losses = ctg::kernel<"eig3_losses">(dt::eig_losses_body);
auto const eig2_losses = ctg::kernel<"eig2_losses">(dt::eig_losses_body);
auto const defined = [](int c, auto const& p) { return c == 0 || p.distinct; };
}  // namespace

TEST_CASE("sym_eig of 3x3 matrices: gradients and tangents") {
  dt::check_gradients<3>(eig3_losses, dt::eig_points<3>(), dt::eig_losses, dt::eig_loss<3>, defined);
  dt::check_tangents<3>(eig3_losses, dt::eig_points<3>(), dt::eig_losses, dt::eig_loss<3>, defined);
}

TEST_CASE("sym_eig of 2x2 matrices: gradients and tangents") {
  dt::check_gradients<2>(eig2_losses, dt::eig_points<2>(), dt::eig_losses, dt::eig_loss<2>, defined);
  dt::check_tangents<2>(eig2_losses, dt::eig_points<2>(), dt::eig_losses, dt::eig_loss<2>, defined);
}
