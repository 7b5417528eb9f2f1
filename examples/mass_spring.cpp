// A 2-D spring robot that learns to walk: a lattice of point masses joined by
// springs whose rest lengths are actuated by sine waves. Gradient descent on
// the actuation weights moves the robot's centre of mass to a target to its
// right, with the gradient taken through the whole rollout by a ctg::tape.
//
// Follows DiffTaichi's mass_spring.py (Hu et al., "DiffTaichi: Differentiable
// Programming for Physical Simulation", ICLR 2020): the same spring impulse,
// the same time-of-impact ground contact (advance_toi), time steps stored in
// fields indexed by t, and gradient descent with a clipped gradient norm. The
// controller is simpler: DiffTaichi feeds sine waves and the robot's state
// through a two-layer network; here each spring's actuation is
// tanh(sum_k w(s, k) sin(omega t + 2 pi k / K) + b(s)), open loop.
//
//   example_mass_spring            default size (about 5 s on 2 cores)
//   example_mass_spring --quick    small and fast; checks loss and gradient
#include <ctgrad/ctgrad.hpp>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <random>
#include <vector>

#include "common.hpp"
#include "svg.hpp"

using namespace ctg::literals;
using vec2 = Eigen::Vector2d;

namespace {

// Physical constants, as in DiffTaichi's mass_spring.py.
constexpr double dt = 0.004;
constexpr double gravity = -4.8;
constexpr double damping = 15;      // velocity decays as exp(-damping t)
constexpr double stiffness = 1e4;   // per unit mass (DiffTaichi: 3e4; softer optimises better here)
constexpr double amplitude = 0.15;  // an actuated spring's rest length varies by +-15%
constexpr double omega = 10;        // actuation frequency, rad/s
constexpr double ground = 0.1;
constexpr int n_sin = 6;            // sine waves per spring (the K above)

// The robot: masses on a grid (spacing h) with two legs, springs between
// neighbours, diagonals included.
struct robot {
  std::vector<vec2> masses;
  std::vector<int> a, b;      // spring ends
  std::vector<double> rest;   // rest lengths
};

robot build_robot(int columns, int rows) {
  double const h = 0.05;
  robot r;
  auto is_mass = [&](int c, int row) {  // legs: the bottom row only at both ends
    return row > 0 || c < 2 || c >= columns - 2;
  };
  std::vector<std::vector<int>> id(columns, std::vector<int>(rows, -1));
  for (int c = 0; c < columns; ++c)
    for (int row = 0; row < rows; ++row)
      if (is_mass(c, row)) {
        id[c][row] = int(r.masses.size());
        r.masses.emplace_back(0.1 + h * c, ground + h * row);
      }
  for (int c = 0; c < columns; ++c)
    for (int row = 0; row < rows; ++row)
      for (auto [dc, dr] : {std::pair{1, 0}, {0, 1}, {1, 1}, {1, -1}}) {
        int const c2 = c + dc, r2 = row + dr;
        if (c2 >= columns || r2 < 0 || r2 >= rows || id[c][row] < 0 || id[c2][r2] < 0) continue;
        r.a.push_back(id[c][row]);
        r.b.push_back(id[c2][r2]);
        r.rest.push_back((r.masses[id[c2][r2]] - r.masses[id[c][row]]).norm());
      }
  return r;
}

// One time step t -> t + 1: actuation, spring impulses, then integration with
// ground contact. Three top-level loops, so three offloads (two parallel,
// one serial); each reads what the previous one wrote (act, v_inc), which is
// fine within one kernel. Positions and velocities are indexed by the step, x(t, i): the
// adjoint of step t then reads exactly the state step t saw, and no
// iteration reads an element another iteration writes (CTG-AD-002).
// [snippet: step]
auto const step = ctg::kernel<"step">([](auto x, auto v, auto v_inc, auto act, auto a, auto b, auto rest, auto w,
                                         auto bias, int t) {
  double const phase = omega * dt * t;
  return ctg::block(
      // act(t, s) = tanh(sum_k w(s, k) sin(phase + 2 pi k / K) + b(s)); the
      // sum over k is unrolled (static_range), as ti.static(range(K)) would be.
      ctg::range(rest.size(), [=](auto s) {
        return ctg::let(bias[s], [=](auto u) {
          return ctg::block(ctg::static_range<n_sin>([=](auto k) {
                              auto const shift = 2 * std::numbers::pi / n_sin * ctg::cast<double>(k);
                              return u += w(s, k) * ctg::sin(phase + shift);
                            }),
                            act(t, s) = ctg::tanh(u));
        });
      }),
      // Spring impulses, accumulated into both ends (apply_spring_force). A
      // serial_range, so that the sums happen in the same order every run: the
      // rollout is chaotic (contacts), and parallel atomics would give every
      // run a slightly different optimisation path.
      ctg::serial_range(rest.size(), [=](auto s) {
        return ctg::let(x(t, a[s]) - x(t, b[s]), [=](auto d) {
          return ctg::let(ctg::norm(d) + 1e-4, [=](auto length) {
            auto const target = rest[s] * (1.0 + amplitude * act(t, s));
            auto const impulse = d * (dt * stiffness * (length - target) / length);
            return ctg::block(v_inc(t + 1, a[s]) -= impulse, v_inc(t + 1, b[s]) += impulse);
          });
        });
      }),
      // Damping, gravity, the impulses; a mass that would go below the ground
      // stops at the time of impact (advance_toi).
      ctg::range(x.shape(1_c), [=](auto i) {
        auto const pushed = v(t, i) * std::exp(-dt * damping) + ctg::vec(0.0, dt * gravity) + v_inc(t + 1, i);
        return ctg::let(pushed, pushed, x(t, i), 0.0, [=](auto old_v, auto new_v, auto old_x, auto toi) {
          return ctg::block(ctg::if_(old_x[1_c] + dt * old_v[1_c] < ground && old_v[1_c] < -1e-4,
                                     ctg::block(toi = -(old_x[1_c] - ground) / old_v[1_c], new_v = ctg::vec(0.0, 0.0))),
                            v(t + 1, i) = new_v, x(t + 1, i) = old_x + toi * old_v + (dt - toi) * new_v);
        });
      }));
});
// [snippet end]

// loss = (mean x coordinate at step t - target)^2, summed in order by one
// thread (a let at the top level is a serial offload).
auto const distance_loss = ctg::kernel<"distance_loss">([](auto x, auto loss, int t, double target) {
  return ctg::let(0.0, [=](auto sum) {
    return ctg::block(ctg::serial_range(x.shape(1_c), [=](auto i) { return sum += x(t, i)[0_c]; }),
                      loss() = ctg::pow(sum / ctg::cast<double>(x.shape(1_c)) - target, 2.0));
  });
});

}  // namespace

int main(int argc, char** argv) {
  auto const opt = example::parse(argc, argv, "mass_spring: a spring robot learns to walk (after DiffTaichi)");
  int const steps = opt.quick ? 400 : 1000;
  int const iterations = opt.iterations >= 0 ? opt.iterations : opt.quick ? 20 : 80;
  double const distance = opt.quick ? 0.2 : 0.7;  // how far right the centre of mass should go
  robot const r = build_robot(6, 3);
  int const n = int(r.masses.size()), m = int(r.rest.size());
  std::printf("mass_spring: %d masses, %d springs, %d steps, %d iterations\n", n, m, steps, iterations);

  ctg::field<vec2, 2, ctg::grad> x({steps + 1, n}, {.name = "x"}), v({steps + 1, n}, {.name = "v"}),
      v_inc({steps + 1, n}, {.name = "v_inc"});
  ctg::field<double, 2, ctg::grad> act({steps, m}, {.name = "act"});
  ctg::field<double, 2, ctg::grad> w({m, n_sin}, {.name = "w"});
  ctg::field<double, 1, ctg::grad> bias({m}, {.name = "bias"});
  ctg::field<int, 1> a({m}, {.name = "a"}), b({m}, {.name = "b"});
  ctg::field<double, 1> rest({m}, {.name = "rest"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  a.copy_from(r.a);
  b.copy_from(r.b);
  rest.copy_from(r.rest);
  for (int i = 0; i < n; ++i) x.at(0, i) = r.masses[std::size_t(i)];  // v(0, i) stays zero
  std::mt19937 rng(1);
  std::normal_distribution<double> normal(0.0, 0.3);
  for (int s = 0; s < m; ++s)
    for (int k = 0; k < n_sin; ++k) w.at(s, k) = normal(rng);

  double start = 0;
  for (auto const& p : r.masses) start += p.x() / n;
  double const target = start + distance;

  // [snippet: simulate]
  auto simulate = [&] {
    v_inc.fill(vec2::Zero());  // accumulated into by every step
    for (int t = 0; t < steps; ++t) step(x, v, v_inc, act, a, b, rest, w, bias, t);
    distance_loss(x, loss, steps, target);
  };
  // [snippet end]

  // The adjoint against central differences, on a few weights, before training.
  auto const check = ctg::check_gradient({.step = 1e-6, .samples_per_field = 4}, simulate, loss, w, bias);
  example::print_check(check);

  // [snippet: descent]
  // Gradient descent with the gradient norm clipped, as in DiffTaichi.
  double const learning_rate = 20, clip = 1.0;
  std::vector<double> history;
  for (int it = 0; it < iterations; ++it) {
    example::stopwatch clock;
    ctg::tape tape(loss);
    simulate();
    tape.backward();
    double const g = std::sqrt(w.grad().map().squaredNorm() + bias.grad().map().squaredNorm());
    double const scale = learning_rate * std::min(1.0, clip / (g + 1e-12));
    w.map() -= scale * w.grad().map();
    bias.map() -= scale * bias.grad().map();
    history.push_back(loss.at());
    example::progress(it, loss.at(), g, clock.seconds());
  }
  // [snippet end]
  simulate();
  history.push_back(loss.at());
  double com = 0;
  for (int i = 0; i < n; ++i) com += x.at(steps, i).x() / n;
  std::printf("centre of mass: %.3f -> %.3f (target %.3f)\n", start, com, target);

  // Pictures: the loss, and the robot at a few moments of the last rollout.
  svg::write_loss_curve(example::picture(opt, "mass_spring_loss.svg"), history, "mass_spring: loss per iteration");
  svg::document doc(900, 360);
  svg::view const view{0.0, 0.05, target + 0.35, 0.05 + (target + 0.35) * 0.4, 10, 10, 880, 340};
  doc.line(view.px(0), view.py(ground), view.px(target + 0.35), view.py(ground), "#555555", 2);
  doc.line(view.px(target), view.py(ground), view.px(target), view.py(ground + 0.3), "#27ae60", 2);
  doc.text(view.px(target) + 6, view.py(ground + 0.28), "target", 13);
  int const frames = 6;
  for (int f = 0; f <= frames; ++f) {
    int const t = f * steps / frames;
    double const fade = 0.15 + 0.85 * f / frames;
    for (int s = 0; s < m; ++s) {
      vec2 const p = x.at(t, r.a[std::size_t(s)]), q = x.at(t, r.b[std::size_t(s)]);
      double const u = act.at(std::min(t, steps - 1), s);
      doc.line(view.px(p.x()), view.py(p.y()), view.px(q.x()), view.py(q.y()), svg::diverging(-u, 0.55), 2, fade);
    }
    for (int i = 0; i < n; ++i)
      doc.circle(view.px(x.at(t, i).x()), view.py(x.at(t, i).y()), 3, "#333333", "none", fade);
  }
  std::vector<std::pair<double, double>> path;
  for (int t = 0; t <= steps; t += 4) {
    double cx = 0, cy = 0;
    for (int i = 0; i < n; ++i) cx += x.at(t, i).x() / n, cy += x.at(t, i).y() / n;
    path.emplace_back(view.px(cx), view.py(cy));
  }
  doc.polyline(path, "#8e44ad", 1.5);
  doc.text(20, 30, "mass_spring: the robot at 7 moments (darker: later) and its centre's path", 14);
  doc.save(example::picture(opt, "mass_spring_final.svg"));
  return example::finish(opt, "mass_spring", history.front(), history.back(), 3.0, check.worst_relative_error);
}
