// Adding gradients to an existing simulator (docs/06-examples.md).
//
// Part 1 is a particle simulator as a C++ program would have it before
// ctgrad: a struct per particle (position, velocity, mass and a launch
// factor side by side) in a std::vector, and its own step loop. Part 2 keeps
// that vector and its layout: the members become ctgrad fields that view it
// (ctg::view_member, strided by sizeof(particle)), the step is written again
// as two kernels, and a tape differentiates the rollout. The launch velocity
// is then fitted by gradient descent so that the particles land, on average,
// on a target.
//
//   example_existing_simulator            the full run
//   example_existing_simulator --quick    small and fast; checks loss and gradient
#include <cmath>
#include <cstdio>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/view.hpp>

#include "common.hpp"
#include "svg.hpp"

using vec2 = Eigen::Vector2d;
using namespace ctg::literals;

// ---- Part 1: the simulator as it was --------------------------------------------------------------
// [snippet: simulator]
struct particle {
  vec2 x;          // position
  vec2 v;          // velocity
  double mass;
  double spread;   // each particle leaves at spread * the launch velocity
};

struct world {
  std::vector<particle> particles;
  double dt = 2e-3, drag = 0.4, floor_stiffness = 2e3;
  vec2 gravity{0.0, -9.8};

  void launch(vec2 const& velocity) {
    for (std::size_t i = 0; i < particles.size(); ++i) {
      particles[i].x = vec2(0.0, 0.1 + 0.01 * double(i));
      particles[i].v = particles[i].spread * velocity;
    }
  }
  void step() {
    for (auto& p : particles) {
      vec2 force = p.mass * gravity - drag * p.v;
      force.y() += floor_stiffness * std::max(-p.x.y(), 0.0);  // a soft floor at y = 0
      p.v += dt * force / p.mass;
      p.x += dt * p.v;
    }
  }
};
// [snippet end]

// ---- Part 2: the same memory, differentiated ------------------------------------------------------
// [snippet: kernels]
using namespace ctg::literals;  // for 0_c, 1_c, ...
auto place = ctg::kernel<"place">([](auto x, auto v, auto spread, auto velocity) {
  return ctg::range(x.size(), [=](auto i) {
    return ctg::block(x[i] = ctg::vec(0.0, 0.1 + 0.01 * ctg::cast<double>(i)), v[i] = spread[i] * velocity());
  });
});
auto step = ctg::kernel<"step">([](auto x, auto v, auto mass, double dt, double drag, double stiffness,
                                   double gravity) {
  return ctg::range(x.size(), [=](auto i) {
    return ctg::let(v[i], [=](auto vel) {
      auto const floor_push = stiffness * ctg::max(-x[i][1_c], 0.0);
      return ctg::block(vel[0_c] += dt * (-drag * vel[0_c]) / mass[i],
                        vel[1_c] += dt * (mass[i] * gravity - drag * vel[1_c] + floor_push) / mass[i],
                        v[i] = vel, x[i] = x[i] + dt * vel);
    });
  });
});
// The loss: the mean squared distance of the particles to the target.
auto miss = ctg::kernel<"miss">([](auto x, auto loss, double tx, double ty) {
  return ctg::block(loss() = 0.0, ctg::range(x.size(), [=](auto i) {
                      return loss() += ctg::norm_sqr(x[i] - ctg::vec(tx, ty)) / ctg::cast<double>(x.size());
                    }));
});
// [snippet end]

int main(int argc, char** argv) {
  auto const opt = example::parse(argc, argv, "existing_simulator: gradients for a simulator's own particle structs");
  int const n = opt.quick ? 8 : 64;
  int const steps = opt.quick ? 300 : 600;
  int const iterations = opt.iterations >= 0 ? opt.iterations : opt.quick ? 40 : 150;
  vec2 const target(1.2, 0.0);

  world w;
  w.particles.resize(std::size_t(n));
  for (int i = 0; i < n; ++i) w.particles[std::size_t(i)].mass = 1.0 + 0.05 * i, w.particles[std::size_t(i)].spread = 0.8 + 0.4 * i / n;

  // Part 1 as it ran before: one rollout of the plain loop.
  vec2 const first_guess(1.0, 1.0);
  w.launch(first_guess);
  for (int t = 0; t < steps; ++t) w.step();
  std::vector<particle> const plain = w.particles;

  // [snippet: views]
  // Views of the simulator's own vector: no copy, no new layout.
  auto x = ctg::view_member<ctg::grad>(w.particles, &particle::x, {.name = "x"});
  auto v = ctg::view_member<ctg::grad>(w.particles, &particle::v, {.name = "v"});
  auto mass = ctg::view_member(w.particles, &particle::mass, {.name = "mass"});
  auto spread = ctg::view_member(w.particles, &particle::spread, {.name = "spread"});
  ctg::field<vec2, 0, ctg::grad> velocity({.name = "velocity"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  auto simulate = [&] {
    place(x, v, spread, velocity);
    for (int t = 0; t < steps; ++t)
      step(x, v, mass, w.dt, w.drag, w.floor_stiffness, w.gravity.y());
    miss(x, loss, target.x(), target.y());
  };
  // [snippet end]

  // The kernels compute what the plain loop computed, in the same structs.
  velocity.at() = first_guess;
  simulate();
  double worst_difference = 0;
  for (int i = 0; i < n; ++i)
    worst_difference = std::max({worst_difference, (w.particles[std::size_t(i)].x - plain[std::size_t(i)].x).norm(),
                                 (w.particles[std::size_t(i)].v - plain[std::size_t(i)].v).norm()});
  std::printf("existing_simulator: %d particles, %d steps; kernels against the plain loop: %.1e\n", n, steps,
              worst_difference);

  auto const check = ctg::check_gradient({.step = 1e-6}, simulate, loss, velocity);
  example::print_check(check);

  std::vector<double> history;
  double const learning_rate = 0.2;
  for (int it = 0; it < iterations; ++it) {
    example::stopwatch clock;
    ctg::tape tape(loss);
    simulate();
    tape.backward();
    vec2 const g = velocity.grad().at();
    history.push_back(loss.at());
    velocity.at() -= learning_rate * g;
    example::progress(it, loss.at(), g.norm(), clock.seconds());
  }
  simulate();
  history.push_back(loss.at());
  std::printf("launch velocity (%.3f, %.3f); mean landing point (%.3f, %.3f), target (%.2f, %.2f)\n",
              velocity.at().x(), velocity.at().y(),
              [&] { double s = 0; for (auto const& p : w.particles) s += p.x.x(); return s / n; }(),
              [&] { double s = 0; for (auto const& p : w.particles) s += p.x.y(); return s / n; }(), target.x(),
              target.y());
  if (worst_difference > 1e-12) {
    std::printf("the kernels disagree with the plain loop: FAILED\n");
    return 1;
  }
  svg::write_loss_curve(example::picture(opt, "existing_simulator_loss.svg"), history,
                        "existing_simulator: loss per iteration");
  svg::document doc(620, 320);
  svg::view const view{-0.1, -0.05, 1.6, 0.8, 10, 30, 600, 280};
  for (auto const& p : w.particles) doc.circle(view.px(p.x.x()), view.py(p.x.y()), 4, "#2e86c1", "none", 0.8);
  doc.circle(view.px(target.x()), view.py(target.y()), 6, "none", "#27ae60");
  doc.text(20, 22, "existing_simulator: where the particles are after the fitted launch (target green)", 14);
  doc.save(example::picture(opt, "existing_simulator_final.svg"));
  return example::finish(opt, "existing_simulator", history.front(), history.back(), 5.0, check.worst_relative_error);
}
