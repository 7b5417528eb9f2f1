// The decompositions on device fields: forward values and gradients of the
// svd / polar and sym_eig losses of the unit tests (tests/unit/
// decompositions_support.hpp) match the host, in float and double, on random
// matrices mixed with the identity, repeated, inverted and zero ones; no
// NaN or inf on either side.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "../unit/decompositions_support.hpp"

namespace dt = decomp_test;

namespace {

// Every eighth matrix is one of the special points, the others random
// (for which every loss is differentiable).
template <int N>
std::vector<dt::point<N>> inputs(int n, std::vector<dt::point<N>> const& special) {
  std::mt19937 g(51);
  std::vector<dt::point<N>> p;
  for (int i = 0; i < n; ++i)
    p.push_back(i % 8 == 0 ? special[std::size_t(i / 8) % special.size()]
                           : dt::point<N>{"random", dt::random_matrix<N>(g), true, true, true});
  return p;
}

template <class T>
double difference(T const& a, T const& b) {
  double e;
  if constexpr (ctg::is_eigen_fixed_v<T>)
    e = double((a - b).norm()) / (1 + double(b.norm()));
  else
    e = std::abs(double(a) - double(b)) / (1 + std::abs(double(b)));
  return std::isfinite(e) ? e : std::numeric_limits<double>::infinity();  // a NaN must not pass
}

// Forward on host and device, then the gradient of the sum of the losses
// that are differentiable at each point (the others, such as U alone at
// repeated singular values, depend on rounding and may differ between the
// two; their gradients are only required finite, on the host in the unit
// tests).
template <class S, int N, class K, class Defined>
void same_on_device(K const& k, std::vector<dt::point<N>> const& special, int losses, Defined const& defined,
                    double tol) {
  using M = Eigen::Matrix<S, N, N>;
  int const n = 4096;
  auto const points = inputs<N>(n, special);
  ctg::field<M, 1, ctg::grad> f({n}, {.name = "F"});
  ctg::field<S, 2, ctg::grad> out({n, losses}, {.name = "out"});
  for (int i = 0; i < n; ++i) f.at(i) = points[std::size_t(i)].f.template cast<S>();
  auto df = f.clone(ctg::device);
  auto dout = out.clone(ctg::device);
  k(f, out);
  k(df, dout);
  auto const device_out = dout.to_vector();
  double worst = 0;
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < losses; ++c) {
      out.grad().at(i, c) = defined(c, points[std::size_t(i)]) ? S(1) : S(0);
      if (defined(c, points[std::size_t(i)]))
        worst = std::max(worst, difference(device_out[std::size_t(i * losses + c)], out.at(i, c)));
    }
  CHECK(worst <= tol);
  dout.grad().copy_from(out.grad().to_vector());
  k.grad(f, out);
  k.grad(df, dout);
  auto const host_grad = f.grad().to_vector(), device_grad = df.grad().to_vector();
  worst = 0;
  for (int i = 0; i < n; ++i) {
    REQUIRE(host_grad[std::size_t(i)].allFinite());
    worst = std::max(worst, difference(device_grad[std::size_t(i)], host_grad[std::size_t(i)]));
  }
  CHECK(worst <= tol);
}

auto const svd_losses = ctg::kernel<"svd_losses">(dt::svd_losses_body);
auto const eig_losses = ctg::kernel<"eig_losses">(dt::eig_losses_body);

}  // namespace

TEST_CASE("svd and polar on the device: 3x3 double and float, 2x2 float") {
  same_on_device<double, 3>(svd_losses, dt::points3(), dt::svd_losses, dt::svd_loss_defined<3>, 1e-8);
  same_on_device<float, 3>(svd_losses, dt::points3(), dt::svd_losses, dt::svd_loss_defined<3>, 5e-3);
  same_on_device<float, 2>(svd_losses, dt::points2(), dt::svd_losses, dt::svd_loss_defined<2>, 5e-3);
}

TEST_CASE("sym_eig on the device: 3x3 float") {
  auto const defined = [](int c, auto const& p) { return c == 0 || p.distinct; };
  same_on_device<float, 3>(eig_losses, dt::eig_points<3>(), dt::eig_losses, defined, 5e-3);
}
