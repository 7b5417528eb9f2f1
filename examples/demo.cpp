// A small differentiable simulation: a ball thrown with drag, time-stepped by a
// kernel; gradient descent on its launch velocity so that it lands on a target.
#include <ctgrad/ctgrad.hpp>

#include <Eigen/Core>
#include <cmath>
#include <cstdio>

using vec2 = Eigen::Vector2d;

int main() {
  int const steps = 200;
  double const dt = 0.01, drag = 0.05, gravity = 9.81;
  vec2 const target(8.0, 1.0);

  // State per time step: x[t], v[t]. The launch velocity is the parameter.
  ctg::field<vec2, 1, ctg::grad> x({steps + 1}, {.name = "x"}), v({steps + 1}, {.name = "v"});
  ctg::field<vec2, 0, ctg::grad> v0({}, {.name = "v0"});
  ctg::field<double, 0, ctg::grad> loss({}, {.name = "loss"});
  v0.at() = vec2(3.0, 3.0);

  auto start = ctg::kernel<"start">([](auto x, auto v, auto v0) {
    return ctg::block(x[0] = ctg::vec(0.0, 0.0), v[0] = v0());
  });
  // Semi-implicit Euler with quadratic drag; one launch per time step.
  auto step = ctg::kernel<"step">([=](auto x, auto v, int t) {
    return ctg::let(v[t], [=](auto vel) {
      return ctg::block(vel = vel + (ctg::vec(0.0, -gravity) - vel * (drag * ctg::norm(vel))) * dt,
                        v[t + 1] = vel, x[t + 1] = x[t] + vel * dt);
    });
  });
  auto miss = ctg::kernel<"miss">([=](auto x, auto loss) {
    return loss() = ctg::norm_sqr(x[steps] - target);
  });

  auto simulate = [&] {
    start(x, v, v0);
    for (int t = 0; t < steps; ++t) step(x, v, t);
    miss(x, loss);
  };

  // First, the adjoint against central finite differences at the initial guess.
  auto check = ctg::check_gradient(simulate, loss, v0);
  std::printf("gradient check at v0 = (%.1f, %.1f): worst relative error %.2e over %d coefficients\n", v0.at()(0),
              v0.at()(1), check.worst_relative_error, check.checked);

  double const rate = 0.25;
  for (int it = 0; it <= 20; ++it) {
    ctg::tape tape(loss);
    simulate();
    tape.backward();
    vec2 const g = v0.grad().at();
    if (it % 4 == 0)
      std::printf("iteration %2d  loss %.6f  |grad| %.5f  v0 = (%.4f, %.4f)  lands at (%.4f, %.4f)\n", it,
                  loss.at(), g.norm(), v0.at()(0), v0.at()(1), x.at(steps)(0), x.at(steps)(1));
    v0.at() -= rate * g;
  }
  return loss.at() < 1e-4 && check.worst_relative_error < 1e-5 ? 0 : 1;
}
