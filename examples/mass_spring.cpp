// A 2-D spring robot that learns to walk: a lattice of point masses joined by
// springs whose rest lengths are actuated by sine waves. Gradient descent on
// the actuation weights moves the robot's centre of mass to a target to its
// right, with the gradient taken through the whole rollout by a ctg::tape.
//
// Follows DiffTaichi's mass_spring.py (Hu et al., "DiffTaichi: Differentiable
// Programming for Physical Simulation", ICLR 2020): the same spring impulse,
// the same time-of-impact ground contact (advance_toi), and gradient descent
// with a clipped gradient norm. Unlike there, the state is not stored per
// step: positions and velocities are updated in place, the impulses are
// cleared and summed again every step, and the tape keeps the copies the
// adjoints need. The controller is simpler: DiffTaichi feeds sine waves and
// the robot's state through a two-layer network; here each spring's actuation
// is tanh(sum_k w(s, k) sin(omega t + 2 pi k / K) + b(s)), open loop.
//
//   example_mass_spring            default size (about 3 s on 2 cores)
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

// One time step, in place: actuation, spring impulses, then integration with
// ground contact. Four top-level loops, so four offloads (three parallel, one
// serial); each reads what the previous ones wrote (act, v_inc), which is
// fine within one kernel. The springs read the positions of both their ends
// and the integration overwrites every mass's own x and v: in separate
// offloads, so that every spring sees the positions from before the step and
// no iteration reads what another writes (CTG-AD-002).
// [snippet: step]
using namespace ctg::literals;  // for 0_c, 1_c, ...
auto const step = ctg::kernel<"step">([](auto x, auto v, auto v_inc, auto act, auto a, auto b, auto rest, auto w,
                                         auto bias, int t) {
  double const phase = omega * dt * t;
  return ctg::block(
      // act(s) = tanh(sum_k w(s, k) sin(phase + 2 pi k / K) + b(s)); the sum
      // over k is unrolled (static_range), as ti.static(range(K)) would be.
      ctg::range(rest.size(), [=](auto s) {
        return ctg::let(bias[s], [=](auto u) {
          return ctg::block(ctg::static_range<n_sin>([=](auto k) {
                              auto const shift = 2 * std::numbers::pi / n_sin * ctg::cast<double>(k);
                              return u += w(s, k) * ctg::sin(phase + shift);
                            }),
                            act[s] = ctg::tanh(u));
        });
      }),
      ctg::range(x.size(), [=](auto i) { return v_inc[i] = ctg::vec(0.0, 0.0); }),
      // Spring impulses, accumulated into both ends (apply_spring_force). A
      // serial_range, so that the sums happen in the same order every run: the
      // rollout is chaotic (contacts), and parallel atomics would give every
      // run a slightly different optimisation path.
      ctg::serial_range(rest.size(), [=](auto s) {
        return ctg::let(x[a[s]] - x[b[s]], [=](auto d) {
          return ctg::let(ctg::norm(d) + 1e-4, [=](auto length) {
            auto const target = rest[s] * (1.0 + amplitude * act[s]);
            auto const impulse = d * (dt * stiffness * (length - target) / length);
            return ctg::block(v_inc[a[s]] -= impulse, v_inc[b[s]] += impulse);
          });
        });
      }),
      // Damping, gravity, the impulses; a mass that would go below the ground
      // stops at the time of impact (advance_toi).
      ctg::range(x.size(), [=](auto i) {
        auto const pushed = v[i] * std::exp(-dt * damping) + ctg::vec(0.0, dt * gravity) + v_inc[i];
        return ctg::let(pushed, pushed, x[i], 0.0, [=](auto old_v, auto new_v, auto old_x, auto toi) {
          return ctg::block(ctg::if_(old_x[1_c] + dt * old_v[1_c] < ground && old_v[1_c] < -1e-4,
                                     ctg::block(toi = -(old_x[1_c] - ground) / old_v[1_c], new_v = ctg::vec(0.0, 0.0))),
                            v[i] = new_v, x[i] = old_x + toi * old_v + (dt - toi) * new_v);
        });
      }));
});
// [snippet end]

// loss = (mean x coordinate - target)^2, summed in order by one thread (a
// let at the top level is a serial offload).
auto const distance_loss = ctg::kernel<"distance_loss">([](auto x, auto loss, double target) {
  return ctg::let(0.0, [=](auto sum) {
    return ctg::block(ctg::serial_range(x.size(), [=](auto i) { return sum += x[i][0_c]; }),
                      loss() = ctg::pow(sum / ctg::cast<double>(x.size()) - target, 2.0));
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

  // The state a simulator keeps: one position and one velocity per mass, and
  // one step's impulses and actuations.
  ctg::field<vec2, 1, ctg::grad> x({n}, {.name = "x"}), v({n}, {.name = "v"}), v_inc({n}, {.name = "v_inc"});
  ctg::field<double, 1, ctg::grad> act({m}, {.name = "act"});
  ctg::field<double, 2, ctg::grad> w({m, n_sin}, {.name = "w"});
  ctg::field<double, 1, ctg::grad> bias({m}, {.name = "bias"});
  ctg::field<int, 1> a({m}, {.name = "a"}), b({m}, {.name = "b"});
  ctg::field<double, 1> rest({m}, {.name = "rest"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  a.copy_from(r.a);
  b.copy_from(r.b);
  rest.copy_from(r.rest);
  std::mt19937 rng(1);
  std::normal_distribution<double> normal(0.0, 0.3);
  for (int s = 0; s < m; ++s)
    for (int k = 0; k < n_sin; ++k) w.at(s, k) = normal(rng);

  double start = 0;
  for (auto const& p : r.masses) start += p.x() / n;
  double const target = start + distance;

  // [snippet: simulate]
  auto simulate = [&](auto&& after_step) {
    x.copy_from(r.masses);  // every rollout starts from the same state
    v.fill(vec2::Zero());
    for (int t = 0; t < steps; ++t) {
      step(x, v, v_inc, act, a, b, rest, w, bias, t);
      after_step(t);  // x and v now hold step t + 1, act step t's actuations
    }
    distance_loss(x, loss, target);
  };
  // [snippet end]
  auto const nothing = [](int) {};

  // The adjoint against central differences, on a few weights, before training.
  auto const check =
      ctg::check_gradient({.step = 1e-6, .samples_per_field = 4}, [&] { simulate(nothing); }, loss, w, bias);
  example::print_check(check);

  // [snippet: descent]
  // Gradient descent with the gradient norm clipped, as in DiffTaichi.
  double const learning_rate = 20, clip = 1.0;
  std::vector<double> history;
  for (int it = 0; it < iterations; ++it) {
    example::stopwatch clock;
    ctg::tape tape(loss);
    simulate(nothing);
    tape.backward();
    if (it == 0) example::print_tape(tape);
    double const g = std::sqrt(w.grad().map().squaredNorm() + bias.grad().map().squaredNorm());
    double const scale = learning_rate * std::min(1.0, clip / (g + 1e-12));
    w.map() -= scale * w.grad().map();
    bias.map() -= scale * bias.grad().map();
    history.push_back(loss.at());
    example::progress(it, loss.at(), g, clock.seconds());
  }
  // [snippet end]
  // The last rollout again, keeping what the pictures show: the robot at 7
  // moments (positions, and the actuations of the step starting there; the
  // last step's at the end) and its centre every 4 steps.
  int const frames = 6;
  auto const moment = [&](std::size_t f) { return int(f) * steps / frames; };
  auto const centre_of = [&](std::vector<vec2> const& p) {
    vec2 c = vec2::Zero();
    for (auto const& q : p) c += q / n;
    return c;
  };
  std::vector<std::vector<vec2>> film_x{r.masses};
  std::vector<std::vector<double>> film_act;
  std::vector<vec2> centre{centre_of(r.masses)};
  simulate([&](int t) {
    if (film_x.size() <= std::size_t(frames) && t + 1 == moment(film_x.size())) film_x.push_back(x.to_vector());
    while (film_act.size() <= std::size_t(frames) && std::min(moment(film_act.size()), steps - 1) == t)
      film_act.push_back(act.to_vector());
    if ((t + 1) % 4 == 0) centre.push_back(centre_of(x.to_vector()));
  });
  history.push_back(loss.at());
  std::printf("centre of mass: %.3f -> %.3f (target %.3f)\n", start, centre_of(film_x.back()).x(), target);

  // Pictures: the loss, and the robot at a few moments of the last rollout.
  svg::write_loss_curve(example::picture(opt, "mass_spring_loss.svg"), history, "mass_spring: loss per iteration");
  svg::document doc(900, 360);
  svg::view const view{0.0, 0.05, target + 0.35, 0.05 + (target + 0.35) * 0.4, 10, 10, 880, 340};
  doc.line(view.px(0), view.py(ground), view.px(target + 0.35), view.py(ground), "#555555", 2);
  doc.line(view.px(target), view.py(ground), view.px(target), view.py(ground + 0.3), "#27ae60", 2);
  doc.text(view.px(target) + 6, view.py(ground + 0.28), "target", 13);
  for (std::size_t f = 0; f < film_x.size(); ++f) {
    double const fade = 0.15 + 0.85 * double(f) / frames;
    auto const& pos = film_x[f];
    for (int s = 0; s < m; ++s) {
      vec2 const p = pos[std::size_t(r.a[std::size_t(s)])], q = pos[std::size_t(r.b[std::size_t(s)])];
      double const u = film_act[f][std::size_t(s)];
      doc.line(view.px(p.x()), view.py(p.y()), view.px(q.x()), view.py(q.y()), svg::diverging(-u, 0.55), 2, fade);
    }
    for (auto const& p : pos) doc.circle(view.px(p.x()), view.py(p.y()), 3, "#333333", "none", fade);
  }
  std::vector<std::pair<double, double>> path;
  for (auto const& c : centre) path.emplace_back(view.px(c.x()), view.py(c.y()));
  doc.polyline(path, "#8e44ad", 1.5);
  doc.text(20, 30, "mass_spring: the robot at 7 moments (darker: later) and its centre's path", 14);
  doc.save(example::picture(opt, "mass_spring_final.svg"));
  return example::finish(opt, "mass_spring", history.front(), history.back(), 3.0, check.worst_relative_error);
}
