// docs/02-autodiff.md#matrix-decompositions: svd, polar and sym_eig in a
// kernel, and the gradient of an energy of the singular values where they
// coincide (F = I, a rotated diag(2, 2, 1)), checked against closed forms:
// d/dF sum (sigma_i - 1)^2 = d/dF |F - R|^2 = 2 (F - R).
#include <ctgrad/ctgrad.hpp>

#include <Eigen/Dense>
#include <cmath>

#include "check.hpp"

using namespace ctg::literals;

int main() {
  using mat3 = Eigen::Matrix3d;
  using vec3 = Eigen::Vector3d;
  mat3 const turn = Eigen::AngleAxisd(0.6, vec3(1, -2, 0.5).normalized()).toRotationMatrix();
  mat3 const squash = turn * vec3(2, 2, 1).asDiagonal() * Eigen::AngleAxisd(-1.1, vec3::UnitY()).toRotationMatrix();

  // [snippet: decompositions]
  using namespace ctg::literals;  // for 0_c, 1_c, ...
  ctg::field<mat3, 1, ctg::grad> F({2}, {.name = "F"}), R({2}, {.name = "R"});
  ctg::field<double, 1, ctg::grad> energy({2}, {.name = "energy"});
  ctg::field<vec3, 1> stretch({2}, {.name = "stretch"});
  auto corotated = ctg::kernel<"corotated">([](auto F, auto energy, auto R, auto stretch) {
    return ctg::range(F.size(), [=](auto p) {
      auto sigma = ctg::svd_sigma(F[p]);                               // F = U diag(sigma) V^T
      auto [values, vectors] = ctg::sym_eig(ctg::transpose(F[p]) * F[p]);  // F^T F = Q diag(values) Q^T
      return ctg::let(sigma, [=](auto s) {
        return ctg::block(energy[p] = (s[0_c] - 1) * (s[0_c] - 1) + (s[1_c] - 1) * (s[1_c] - 1) +
                                      (s[2_c] - 1) * (s[2_c] - 1),
                          R[p] = ctg::polar_r(F[p]),  // F = R S, R = U V^T (exact where sigma_i = sigma_j)
                          stretch[p] = values);       // sigma^2, ascending
      });
    });
  });
  F.at(0) = mat3::Identity();  // three equal singular values
  F.at(1) = squash;            // two equal singular values
  corotated(F, energy, R, stretch);
  energy.grad().fill(1.0);
  corotated.grad(F, energy, R, stretch);  // F.grad() = 2 (F - R), finite where sigma_i = sigma_j
  // [snippet end]

  for (int p = 0; p < 2; ++p) {
    mat3 const f = F.at(p), r = R.at(p);
    check((r.transpose() * r - mat3::Identity()).norm() < 1e-14 && std::abs(r.determinant() - 1) < 1e-14,
          "R is a rotation");
    check(((r.transpose() * f) - (r.transpose() * f).transpose()).norm() < 1e-13, "R^T F is symmetric");
    check((F.grad().at(p) - 2 * (f - r)).norm() < 1e-12, "d/dF sum (sigma - 1)^2 = 2 (F - R)");
  }
  check(F.grad().at(0).norm() == 0.0, "no gradient at the rest state");
  check(close(energy.at(1), 2.0, 1e-12), "sigma of the squashed F is (2, 2, 1)");
  check((stretch.at(1) - vec3(1, 4, 4)).norm() < 1e-12, "eigenvalues of F^T F: sigma^2, ascending");
  return 0;
}
