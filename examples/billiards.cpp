// Differentiable billiards: a cue ball is shot into a triangle of balls;
// gradient descent on the cue ball's initial position and velocity sends the
// last ball of the triangle to a goal.
//
// Follows DiffTaichi's billiards.py (Hu et al., ICLR 2020): the same per-step
// collision impulse between every pair of balls with restitution, the same
// time-of-impact correction of positions (x_inc) that makes the result
// continuous in the parameters, and plain gradient descent on init_x and
// init_v. There is no table border, as there. Unlike there, the state is not
// indexed by the step: positions and velocities are updated in place, and
// the tape keeps the copies the adjoints need (one of x and one of v per
// step, the values the collision pass read).
//
//   example_billiards            default size (about 6 s on 2 cores)
//   example_billiards --quick    small and fast; checks loss and gradient
#include <ctgrad/ctgrad.hpp>

#include <Eigen/Core>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "common.hpp"
#include "svg.hpp"

using namespace ctg::literals;
using vec2 = Eigen::Vector2d;

namespace {

constexpr double dt = 0.003;
constexpr double radius = 0.03;
constexpr double elasticity = 0.8;

// One step, in place. First offload: for every ball i, the impulse and the
// position correction from all other balls j, summed in locals over an inner
// loop (which runs serially inside iteration i) and stored once. Second
// offload: integration, each ball overwriting its own x and v. The first
// offload reads every ball's state and the second overwrites it, so they
// must be two offloads: one ends before the other starts, and no iteration
// reads what another writes.
// [snippet: step]
auto const step = ctg::kernel<"step">([](auto x, auto v, auto impulse, auto x_inc) {
  auto const n = x.size();
  return ctg::block(
      ctg::range(n, [=](auto i) {
        return ctg::let(ctg::vec(0.0, 0.0), ctg::vec(0.0, 0.0), [=](auto imp, auto shift) {
          return ctg::block(
              ctg::range(n, [=](auto j) {
                // Where the two balls would be after this step, along which
                // direction, and how fast they approach each other.
                return ctg::let(x[i] + dt * v[i] - (x[j] + dt * v[j]), 0.0, ctg::vec(0.0, 0.0), 0.0,
                                [=](auto dist, auto dist_norm, auto dir, auto approach) {
                  // Time of impact within the step: move back by the part of the step spent overlapping.
                  auto const kick = dir * (-(1 + elasticity) * 0.5 * approach);
                  auto const toi = (dist_norm - 2 * radius) / ctg::min(-1e-3, approach);
                  return ctg::block(
                      dist_norm = ctg::norm(dist), dir = dist / (dist_norm + 1e-6),
                      approach = ctg::dot(dir, v[i] - v[j]),
                      ctg::if_(i != j && dist_norm < 2 * radius && approach < 0,
                               ctg::block(imp += kick, shift += ctg::min(toi - dt, 0.0) * kick)));
                });
              }),
              impulse[i] = imp, x_inc[i] = shift);
        });
      }),
      ctg::range(n, [=](auto i) {
        return ctg::let(v[i] + impulse[i], [=](auto new_v) {
          return ctg::block(v[i] = new_v, x[i] = x[i] + dt * new_v + x_inc[i]);
        });
      }));
});
// [snippet end]

// The cue ball (ball 0) starts where the parameters say.
auto const place_cue = ctg::kernel<"place_cue">([](auto x, auto v, auto init_x, auto init_v) {
  return ctg::block(x[0_c] = init_x(), v[0_c] = init_v());
});

auto const miss = ctg::kernel<"miss">([](auto x, auto loss, int ball, double goal_x, double goal_y) {
  return loss() = ctg::norm_sqr(x[ball] - ctg::vec(goal_x, goal_y));
});

}  // namespace

int main(int argc, char** argv) {
  auto const opt = example::parse(argc, argv, "billiards: a cue shot that sends a ball to a goal (after DiffTaichi)");
  int const rows = opt.quick ? 2 : 5;  // the triangle: 1 + 2 + ... + rows balls
  int const steps = opt.quick ? 512 : 1024;
  int const iterations = opt.iterations >= 0 ? opt.iterations : opt.quick ? 30 : 150;
  vec2 const goal(0.9, 0.75);
  int const n = 1 + rows * (rows + 1) / 2, target_ball = n - 1;
  std::printf("billiards: %d balls, %d steps, %d iterations\n", n, steps, iterations);

  // The state a simulator keeps: one position and one velocity per ball;
  // impulse and x_inc carry one step's collisions from the first offload to
  // the second.
  ctg::field<vec2, 1, ctg::grad> x({n}, {.name = "x"}), v({n}, {.name = "v"}), impulse({n}, {.name = "impulse"}),
      x_inc({n}, {.name = "x_inc"});
  ctg::field<vec2, 0, ctg::grad> init_x({.name = "init_x"}), init_v({.name = "init_v"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  // The triangle, as DiffTaichi lays it out, at rest.
  std::vector<vec2> rack(std::size_t(n), vec2::Zero());
  for (int i = 0, ball = 1; i < rows; ++i)
    for (int j = 0; j <= i; ++j, ++ball)
      rack[std::size_t(ball)] = vec2((i + 1) * 2 * radius + 0.5, j * 2 * radius + 0.5 - i * radius * 0.7);
  init_x.at() = vec2(0.1, 0.5);
  init_v.at() = vec2(0.3, 0.0);

  // Every rollout starts from the rack (the state was overwritten by the
  // last one). With `paths`, the positions every 8 steps are kept for the
  // picture.
  std::vector<std::vector<vec2>> paths;
  auto simulate = [&](bool record = false) {
    x.copy_from(rack);
    v.fill(vec2::Zero());
    place_cue(x, v, init_x, init_v);
    for (int t = 0; t < steps; ++t) {
      if (record && t % 8 == 0) paths.push_back(x.to_vector());
      step(x, v, impulse, x_inc);
    }
    if (record) paths.push_back(x.to_vector());
    miss(x, loss, target_ball, goal.x(), goal.y());
  };

  auto const check = ctg::check_gradient({.step = 1e-7}, [&] { simulate(); }, loss, init_x, init_v);
  example::print_check(check);

  double const learning_rate = 0.02;  // DiffTaichi: 0.01
  std::vector<double> history;
  for (int it = 0; it < iterations; ++it) {
    example::stopwatch clock;
    ctg::tape tape(loss);
    simulate();
    tape.backward();
    if (it == 0) example::print_tape(tape);
    vec2 const gx = init_x.grad().at(), gv = init_v.grad().at();
    init_x.at() -= learning_rate * gx;
    init_v.at() -= learning_rate * gv;
    history.push_back(loss.at());
    example::progress(it, loss.at(), std::sqrt(gx.squaredNorm() + gv.squaredNorm()), clock.seconds());
  }
  simulate(true);
  history.push_back(loss.at());
  vec2 const end = std::as_const(x).at(target_ball);
  std::printf("cue ball from (%.3f, %.3f) at (%.3f, %.3f); ball %d ends at (%.3f, %.3f), goal (%.2f, %.2f)\n",
              init_x.at().x(), init_x.at().y(), init_v.at().x(), init_v.at().y(), target_ball, end.x(), end.y(),
              goal.x(), goal.y());

  // Pictures: the loss, and the paths of the balls in the last shot.
  svg::write_loss_curve(example::picture(opt, "billiards_loss.svg"), history, "billiards: loss per iteration");
  svg::document doc(620, 600);
  svg::view const view{0, 0.1, 1.1, 1.1, 10, 40, 600, 550};
  for (int i = 0; i < n; ++i) {
    std::string const colour = i == 0 ? "#222222" : i == target_ball ? "#c0392b" : "#2e86c1";
    std::vector<std::pair<double, double>> path;
    for (auto const& frame : paths) {
      vec2 const at = frame[std::size_t(i)];
      path.emplace_back(view.px(at.x()), view.py(at.y()));
    }
    doc.polyline(path, colour, 1.5, 0.7);
    double const r = radius * view.scale();
    vec2 const first = paths.front()[std::size_t(i)], last = paths.back()[std::size_t(i)];
    doc.circle(view.px(first.x()), view.py(first.y()), r, colour, "none", 0.25);
    doc.circle(view.px(last.x()), view.py(last.y()), r, colour, "none", 0.9);
  }
  doc.circle(view.px(goal.x()), view.py(goal.y()), radius * view.scale(), "none", "#27ae60");
  doc.text(view.px(goal.x()), view.py(goal.y()) - radius * view.scale() - 6, "goal", 13, "middle", "#27ae60");
  doc.text(20, 26, "billiards: paths of the last shot (cue ball black, target ball red); pale: start", 14);
  doc.save(example::picture(opt, "billiards_final.svg"));
  return example::finish(opt, "billiards", history.front(), history.back(), 5.0, check.worst_relative_error);
}
