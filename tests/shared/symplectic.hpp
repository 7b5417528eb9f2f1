// An in-place symplectic Euler rollout shared by the tape and checkpoint
// bodies (tape.hpp, checkpoint.hpp): the kernels, and the same rollout with
// its adjoint written by hand in plain loops, the reference both compare to.
#pragma once
#include <cstddef>
#include <vector>

#include "backend_support.hpp"

namespace backend_tests {

inline constexpr double euler_dt = 0.05;

// v += -dt k sin(x) (1 + x^2). Its adjoint reads x, which the next drift
// overwrites: a full tape keeps one copy of x per step.
inline constexpr auto kick = ctg::kernel<"kick">([](auto x, auto v, auto k) {
  return ctg::range(x.size(), [=](auto i) { return v[i] += -euler_dt * k() * ctg::sin(x[i]) * (1.0 + x[i] * x[i]); });
});
inline constexpr auto drift = ctg::kernel<"drift">([](auto x, auto v) {
  return ctg::range(x.size(), [=](auto i) { return x[i] += euler_dt * v[i]; });
});
inline constexpr auto energy = ctg::kernel<"energy">([](auto x, auto v, auto loss) {
  return ctg::range(x.size(), [=](auto i) { return loss() += x[i] * x[i] + 0.5 * v[i] * v[i]; });
});

// What `steps` kick-drift steps from (x0, v0) end with, and the gradient of
// loss = sum x^2 + v^2 / 2 with respect to x0, v0 and k.
struct euler_reference {
  std::vector<double> x, v, grad_x, grad_v;
  double loss = 0, grad_k = 0;
};

inline euler_reference euler_rollout_by_hand(std::vector<double> const& x0, std::vector<double> const& v0, double k,
                                             int steps) {
  euler_reference r{x0, v0, x0, v0};
  std::vector<double> x_at_kick(static_cast<std::size_t>(steps));  // what each kick read, for its adjoint
  for (std::size_t i = 0; i < x0.size(); ++i) {
    double x = x0[i], v = v0[i];
    for (int t = 0; t < steps; ++t) {
      x_at_kick[std::size_t(t)] = x;
      v += -euler_dt * k * std::sin(x) * (1 + x * x);
      x += euler_dt * v;
    }
    r.x[i] = x, r.v[i] = v;
    r.loss += x * x + 0.5 * v * v;
    // Backwards through the steps: drift (x += dt v) passes dt gx into gv;
    // kick passes gv d/dx [-dt k sin(x) (1 + x^2)] into gx and
    // gv (-dt sin(x) (1 + x^2)) into gk.
    double gx = 2 * x, gv = v;
    for (int t = steps - 1; t >= 0; --t) {
      double const xt = x_at_kick[std::size_t(t)];
      gv += euler_dt * gx;
      gx += gv * -euler_dt * k * (std::cos(xt) * (1 + xt * xt) + 2 * xt * std::sin(xt));
      r.grad_k += gv * -euler_dt * std::sin(xt) * (1 + xt * xt);
    }
    r.grad_x[i] = gx, r.grad_v[i] = gv;
  }
  return r;
}

// The starting state of the rollouts: n elements.
inline std::vector<double> euler_start_x(int n) {
  std::vector<double> xs(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) xs[std::size_t(i)] = 0.001 * i - 1.0;
  return xs;
}
inline std::vector<double> euler_start_v(int n) {
  std::vector<double> vs(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) vs[std::size_t(i)] = 0.01 * (i % 5);
  return vs;
}

}  // namespace backend_tests
