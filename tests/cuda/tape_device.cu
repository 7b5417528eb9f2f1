// The tape on device fields: overwritten state saved on the device, restored
// before each adjoint; the gradient must equal the host's.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

namespace {

constexpr double step = 0.05;
constexpr auto kick = ctg::kernel<"kick">([](auto x, auto v, auto k) {
  return ctg::range(x.size(), [=](auto i) { return v[i] += -step * k() * ctg::sin(x[i]) * (1.0 + x[i] * x[i]); });
});
constexpr auto drift = ctg::kernel<"drift">([](auto x, auto v) {
  return ctg::range(x.size(), [=](auto i) { return x[i] += step * v[i]; });
});
constexpr auto energy = ctg::kernel<"energy">([](auto x, auto v, auto loss) {
  return ctg::range(x.size(), [=](auto i) { return loss() += x[i] * x[i] + 0.5 * v[i] * v[i]; });
});

template <class X, class V, class K, class L>
void rollout(X const& x, V const& v, K const& k, L const& loss, int steps) {
  ctg::tape tape(loss);
  for (int s = 0; s < steps; ++s) {
    kick(x, v, k);
    drift(x, v);
  }
  energy(x, v, loss);
  tape.backward();
}

}  // namespace

TEST_CASE("in-place symplectic Euler on device fields: the same gradient as on the host") {
  int const n = 4096, steps = 40;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), v({n}, {.name = "v"});
  ctg::field<double, 0, ctg::grad> k({.name = "k"}), loss({.name = "loss"});
  std::vector<double> xs(n), vs(n);
  for (int i = 0; i < n; ++i) xs[i] = 0.001 * i - 1.0, vs[i] = 0.01 * (i % 5);
  x.copy_from(xs);
  v.copy_from(vs);
  k.fill(1.3);
  auto dx = x.clone(ctg::device), dv = v.clone(ctg::device);
  auto dk = k.clone(ctg::device), dloss = loss.clone(ctg::device);

  rollout(x, v, k, loss, steps);
  rollout(dx, dv, dk, dloss, steps);

  auto const gx = x.grad().to_vector(), dgx = dx.grad().to_vector();
  double worst = 0;
  for (int i = 0; i < n; ++i) worst = std::max(worst, std::abs(gx[i] - dgx[i]) / (1.0 + std::abs(gx[i])));
  CHECK(worst < 1e-10);
  double const gk = k.grad().to_vector()[0], dgk = dk.grad().to_vector()[0];
  CHECK(std::abs(gk - dgk) <= 1e-9 * (1.0 + std::abs(gk)));  // a sum over threads in another order
  // The fields hold their final forward values on both sides.
  auto const fx = x.to_vector(), dfx = dx.to_vector();
  for (int i = 0; i < n; i += 97) CHECK(std::abs(fx[i] - dfx[i]) <= 1e-12 * (1.0 + std::abs(fx[i])));
}
