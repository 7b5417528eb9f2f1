// The decompositions on fields of one memory space: forward values and
// gradients of the svd / polar and sym_eig losses of the unit tests
// (tests/unit/decompositions_support.hpp), in float and double, on 4096
// matrices (1024 on the host) in which random ones are mixed with the
// identity, repeated, inverted and zero ones. The values are checked against
// Eigen's decompositions, the gradients against central differences of them;
// no NaN or inf anywhere. On the device the host's run is compared as well,
// more tightly than the references allow.
#pragma once
#include <utility>

#include "../unit/decompositions_support.hpp"
#include "backend_support.hpp"

namespace backend_tests {

namespace decomp = decomp_test;

// Every eighth matrix is one of the special points, the others random
// (for which every loss is differentiable).
template <int N>
std::vector<decomp::point<N>> decomposition_inputs(int n, std::vector<decomp::point<N>> const& special) {
  std::mt19937 g(51);
  std::vector<decomp::point<N>> p;
  for (int i = 0; i < n; ++i)
    p.push_back(i % 8 == 0 ? special[std::size_t(i / 8) % special.size()]
                           : decomp::point<N>{"random", decomp::random_matrix<N>(g), true, true, true});
  return p;
}

// Runs the losses kernel on every point in `space`; then, seeding the losses
// differentiable at each point, its gradient. Returns out (row-major, point
// by loss) and F.grad.
template <class S, int N, class K, class Defined>
auto run_losses(ctg::memory_space space, K const& k, std::vector<decomp::point<N>> const& points, int losses,
                Defined const& defined) {
  using M = Eigen::Matrix<S, N, N>;
  int const n = int(points.size());
  ctg::field<M, 1, ctg::grad> f({n}, {.name = "F", .space = space});
  ctg::field<S, 2, ctg::grad> out({n, losses}, {.name = "out", .space = space});
  std::vector<M> fs(static_cast<std::size_t>(n));
  std::vector<S> seeds(static_cast<std::size_t>(n * losses));
  for (int i = 0; i < n; ++i) {
    fs[std::size_t(i)] = points[std::size_t(i)].f.template cast<S>();
    for (int c = 0; c < losses; ++c)
      seeds[std::size_t(i * losses + c)] = defined(c, points[std::size_t(i)]) ? S(1) : S(0);
  }
  f.copy_from(fs);
  k(f, out);
  out.grad().copy_from(seeds);
  k.grad(f, out);
  return std::pair{out.to_vector(), f.grad().to_vector()};
}

// Checks the losses kernel `k` in precision S on N x N matrices: values
// against `loss` (Eigen) and gradients against central differences of the
// sum of the differentiable losses, both at the matrix as the kernel sees it
// (rounded to S), within `tol`; on the device also against the host's run
// of the same kernel, within `tol_host`.
template <class S, int N, class K, class Loss, class Defined>
void check_losses(ctg::memory_space space, K const& k, std::vector<decomp::point<N>> const& special, int losses,
                  Loss const& loss, Defined const& defined, double tol, double tol_host) {
  using mat = decomp::mat<N>;
  auto const points = decomposition_inputs<N>(elements_for(space, 4096, 1024), special);
  int const n = int(points.size());
  auto const [values, grads] = run_losses<S, N>(space, k, points, losses, defined);
  int non_finite = 0;
  double worst_value = 0, worst_grad = 0;
  int worst_value_at = 0, worst_grad_at = 0;
  for (int i = 0; i < n; ++i) {
    auto const& p = points[std::size_t(i)];
    mat const f = p.f.template cast<S>().template cast<double>();
    for (int c = 0; c < losses; ++c) {
      S const value = values[std::size_t(i * losses + c)];
      non_finite += std::isfinite(double(value)) ? 0 : 1;
      if (!defined(c, p)) continue;
      double const e = relative_error(value, loss(c, f));
      if (e > worst_value) worst_value = e, worst_value_at = i * losses + c;
    }
    auto const& g = grads[std::size_t(i)];
    non_finite += g.allFinite() ? 0 : 1;
    auto const sum_of_defined = [&](mat const& m) {
      double sum = 0;
      for (int c = 0; c < losses; ++c)
        if (defined(c, p)) sum += loss(c, m);
      return sum;
    };
    double const e = relative_error(g, decomp::fd_gradient<N>(sum_of_defined, f));
    if (e > worst_grad) worst_grad = e, worst_grad_at = i;
  }
  CHECK(non_finite == 0);
  INFO("worst value: point " << worst_value_at / losses << " (" << points[std::size_t(worst_value_at / losses)].name
                             << "), loss " << worst_value_at % losses);
  INFO("worst gradient: point " << worst_grad_at << " (" << points[std::size_t(worst_grad_at)].name << ")");
  CHECK(worst_value <= tol);
  CHECK(worst_grad <= tol);
  if (space != ctg::device) return;
  // The host's run, closer than the references: the same algorithm in the
  // same precision. Losses that are not differentiable at a point (U alone
  // at repeated singular values) depend on rounding and may differ.
  auto const [host_values, host_grads] = run_losses<S, N>(ctg::host, k, points, losses, defined);
  worst_value = worst_grad = 0;
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < losses; ++c)
      if (defined(c, points[std::size_t(i)]))
        worst_value = std::max(worst_value, relative_error(values[std::size_t(i * losses + c)],
                                                           host_values[std::size_t(i * losses + c)]));
    worst_grad = std::max(worst_grad, relative_error(grads[std::size_t(i)], host_grads[std::size_t(i)]));
  }
  CHECK(worst_value <= tol_host);
  CHECK(worst_grad <= tol_host);
}

inline constexpr auto svd_losses_kernel = ctg::kernel<"svd_losses">(decomp::svd_losses_body);
inline constexpr auto eig_losses_kernel = ctg::kernel<"eig_losses">(decomp::eig_losses_body);

// Tolerances: double within the central differences' own error (2e-6);
// float within 5e-3, the float rounding amplified at random matrices whose
// singular values or eigenvalues nearly coincide (the worst seen, about 1e-3,
// at such a matrix on the host). On the device, the host's run within 1e-8
// (double) and 5e-3 (float, where the device contracts multiply-adds).
inline void svd_and_polar(ctg::memory_space space) {
  auto const loss3 = [](int c, decomp::mat<3> const& f) { return decomp::svd_loss<3>(c, f); };
  auto const loss2 = [](int c, decomp::mat<2> const& f) { return decomp::svd_loss<2>(c, f); };
  check_losses<double, 3>(space, svd_losses_kernel, decomp::points3(), decomp::svd_losses, loss3,
                          decomp::svd_loss_defined<3>, 2e-6, 1e-8);
  check_losses<float, 3>(space, svd_losses_kernel, decomp::points3(), decomp::svd_losses, loss3,
                         decomp::svd_loss_defined<3>, 5e-3, 5e-3);
  check_losses<float, 2>(space, svd_losses_kernel, decomp::points2(), decomp::svd_losses, loss2,
                         decomp::svd_loss_defined<2>, 5e-3, 5e-3);
}

inline void sym_eig(ctg::memory_space space) {
  auto const loss = [](int c, decomp::mat<3> const& a) { return decomp::eig_loss<3>(c, a); };
  auto const defined = [](int c, auto const& p) { return c == 0 || p.distinct; };
  check_losses<float, 3>(space, eig_losses_kernel, decomp::eig_points<3>(), decomp::eig_losses, loss, defined, 5e-3,
                         5e-3);
}

// ctg::svd_clamp on 3x3 float matrices with det F > 0, a quarter of them
// with two singular values clamped to the same bound: values against Eigen,
// the gradient of <W, svd_clamp(F)> against central differences of that
// reference (float: within 2e-3).
inline void svd_clamp_snow(ctg::memory_space space) {
  using M = Eigen::Matrix3f;
  int const n = elements_for(space, 4096, 512);
  double const lo = 0.9, hi = 1.1;
  std::mt19937 g(23);
  std::uniform_real_distribution<double> u(0.6, 1.4);
  std::vector<decomp::mat<3>> fs;
  // Singular values at least 1e-3 from a bound: the central differences
  // (step 1e-6) would straddle the clamp's kink.
  auto const away_from_bounds = [&] {
    double s;
    do s = u(g);
    while (std::abs(s - lo) < 1e-3 || std::abs(s - hi) < 1e-3);
    return s;
  };
  for (int i = 0; i < n; ++i) {
    decomp::vec<3> s(away_from_bounds(), away_from_bounds(), away_from_bounds());
    if (i % 4 == 0) s(1) = s(0) = 1.2 + 0.1 * away_from_bounds();
    fs.push_back(decomp::with_singular_values<3>(g, s).cast<float>().cast<double>());
  }
  decomp::mat<3> const w = decomp::weight<3>(0);
  M const wf = w.cast<float>();
  ctg::field<M, 1, ctg::grad> F({n}, {.name = "F", .space = space});
  ctg::field<float, 1, ctg::grad> loss({n}, {.name = "loss", .space = space});
  std::vector<M> in;
  for (auto const& f : fs) in.push_back(f.cast<float>());
  F.copy_from(in);
  auto k = ctg::kernel<"snow_projection">([=](auto F, auto loss) {
    return ctg::range(F.size(), [=](auto p) {
      return loss[p] = ctg::trace(ctg::transpose(wf) * ctg::svd_clamp(F[p], float(lo), float(hi)));
    });
  });
  k(F, loss);
  loss.grad().fill(1.0f);
  k.grad(F, loss);
  auto const values = loss.to_vector();
  auto const grads = F.grad().to_vector();
  double worst_value = 0, worst_grad = 0;
  auto const reference = [&](decomp::mat<3> const& f) {
    return (w.transpose() * decomp::clamped_reference<3>(f, lo, hi)).trace();
  };
  for (int i = 0; i < n; ++i) {
    auto const& f = fs[std::size_t(i)];
    worst_value = std::max(worst_value, relative_error(values[std::size_t(i)], reference(f)));
    worst_grad = std::max(worst_grad, relative_error(grads[std::size_t(i)], decomp::fd_gradient<3>(reference, f)));
  }
  CHECK(worst_value <= 2e-3);
  CHECK(worst_grad <= 2e-3);
}

}  // namespace backend_tests

#define CTGRAD_DECOMPOSITION_TESTS(REGISTER, space)                                                          \
  REGISTER(space, svd_and_polar, "svd and polar: 3x3 double and float, 2x2 float, against Eigen and differences") \
  REGISTER(space, sym_eig, "sym_eig: 3x3 float, against Eigen and central differences")                   \
  REGISTER(space, svd_clamp_snow, "svd_clamp: the snow projection's values and gradients, coinciding values")
