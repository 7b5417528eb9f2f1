// A long rollout under a fixed memory budget: gradient descent, through
// 10,000 time steps, on the drive of a long nonlinear transmission line, with
// the tape keeping a few snapshots of the state instead of one copy per step.
//
// The line is a chain of pendulums coupled by torsion springs (a discrete
// sine-Gordon system), damped a little and free at both ends, longer than
// any wave travels in the run, so that no reflection comes back. Site 0 is
// driven by a torque made of four harmonics of a base frequency, whose eight
// coefficients are learned: over the last 2000 steps, site 40 should trace a
// target waveform of two tones. Every step's adjoint reads the angles (the
// sine and the target's mismatch are nonlinear), and the next step
// overwrites them, so the full tape keeps one copy of the angles per step:
// 330 MB at the default size. Under the budget of 4 MB of snapshots the
// tape keeps 63 copies of the state and recomputes each step from the
// nearest one in backward() (ctg::checkpoint, the binomial schedule):
// about three more forward passes for a hundredth of the memory.
//
//   example_long_rollout            default size (12 iterations, about 100 s
//                                   of CPU; each backward() recomputes
//                                   17,856 steps)
//   example_long_rollout --quick    a shorter horizon: the checkpointed
//                                   gradient must equal the full tape's
#include <ctgrad/ctgrad.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"
#include "svg.hpp"

using namespace ctg::literals;

namespace {

constexpr int harmonics = 4;
constexpr double dt = 0.05, coupling = 25.0, damping = 0.02, base_frequency = 2.0;

// The torque on site 0 at step t: sum_k a_k sin(k w t dt) + b_k cos(k w t dt).
auto const drive = ctg::kernel<"drive">([](auto coef, auto torque, int t) {
  double const phase = base_frequency * dt * t;
  return ctg::let(0.0, [=](auto sum) {
    return ctg::block(ctg::static_range<harmonics>([=](auto k) {
                        auto const w = (ctg::cast<double>(k) + 1.0) * phase;
                        return sum += coef(k, 0_c) * ctg::sin(w) + coef(k, 1_c) * ctg::cos(w);
                      }),
                      torque() = sum);
  });
});
// Symplectic Euler, in place: the velocities from the angles (the springs to
// both neighbours, gravity, damping, the torque on site 0), then the angles.
// [snippet: line]
auto const kick = ctg::kernel<"kick">([](auto theta, auto omega, auto torque) {
  auto const n = theta.size();
  return ctg::range(n, [=](auto i) {
    auto const springs = theta[ctg::max(i - 1, 0)] + theta[ctg::min(i + 1, n - 1)] - 2.0 * theta[i];
    auto const accel = coupling * springs - ctg::sin(theta[i]);
    auto const kept = (1.0 - dt * damping) * omega[i];
    return ctg::if_(i == 0, omega[i] = kept + dt * (accel + torque()), omega[i] = kept + dt * accel);
  });
});
auto const drift = ctg::kernel<"drift">([](auto theta, auto omega) {
  return ctg::range(theta.size(), [=](auto i) { return theta[i] += dt * omega[i]; });
});
// [snippet end]
// The mismatch of the probe site with the target, averaged over the window.
auto const listen = ctg::kernel<"listen">([](auto theta, auto loss, int probe, double target, double weight) {
  return loss() += weight * ctg::pow(theta[probe] - target, 2.0);
});

double target_at(int t) {
  double const time = dt * t;
  return 0.25 * std::sin(base_frequency * time) + 0.12 * std::sin(2 * base_frequency * time + 0.7);
}

struct line {
  int sites, steps, window, probe;
  ctg::field<double, 1, ctg::grad> theta, omega;
  ctg::field<double, 0, ctg::grad> torque{ctg::field_options{.name = "torque"}},
      loss{ctg::field_options{.name = "loss"}};
  ctg::field<double, 2, ctg::grad> coef{{harmonics, 2}, {.name = "coef"}};

  line(int n, int t, int w, int p)
      : sites(n), steps(t), window(w), probe(p), theta({n}, {.name = "theta"}), omega({n}, {.name = "omega"}) {}

  // One time step; the same launches every time it runs step t.
  // [snippet: step]
  void step(int t) {
    drive(coef, torque, t);
    kick(theta, omega, torque);
    drift(theta, omega);
    if (t >= steps - window) listen(theta, loss, probe, target_at(t), 1.0 / window);
  }
  // [snippet end]
  void start() {
    theta.fill(0.0);
    omega.fill(0.0);
    loss.fill(0.0);
  }
  // Bytes of the fields: values and gradients.
  std::size_t field_bytes() const {
    return 2 * sizeof(double) * std::size_t(2 * sites + 2 + 2 * harmonics);
  }
};

// The gradient of one rollout: on the full tape (budget: none) or checkpointed.
double gradient(line& l, std::optional<ctg::checkpoint> budget, ctg::rollout_info* info_out = nullptr,
                std::size_t* peak = nullptr) {
  l.start();
  ctg::tape tape(l.loss);
  ctg::rollout_info const* info = nullptr;
  if (budget) {
    // [snippet: rollout]
    info = &tape.rollout(l.steps, [&](int t) { l.step(t); }, *budget);
    // [snippet end]
  } else {
    for (int t = 0; t < l.steps; ++t) l.step(t);
  }
  tape.backward();
  // After backward(): the account includes the steps it ran again.
  if (info && info_out) *info_out = *info;
  if (peak) *peak = tape.peak_bytes_saved();
  return std::as_const(l.loss).at();
}

std::vector<double> gradients_of(line const& l) {
  std::vector<double> g = l.coef.grad().to_vector();
  for (double v : l.theta.grad().to_vector()) g.push_back(v);
  for (double v : l.omega.grad().to_vector()) g.push_back(v);
  return g;
}

double resident_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // kilobytes on Linux
}

// The target and the probe's angle over the window, after the last iteration.
void picture(example::options const& opt, line& l, std::vector<double> const& probe_trace) {
  svg::document doc(900, 300);
  double const left = 50, right = 880, top = 40, bottom = 270;
  doc.text(450, 24, "site " + std::to_string(l.probe) + " over the last " + std::to_string(l.window) +
                        " steps: target (grey) and the optimised line (red)",
           15, "middle");
  doc.line(left, (top + bottom) / 2, right, (top + bottom) / 2, "#dddddd");
  auto px = [&](int k) { return left + (right - left) * k / std::max(1, l.window - 1); };
  auto py = [&](double v) { return (top + bottom) / 2 - v / 0.5 * (bottom - top) / 2; };
  std::vector<std::pair<double, double>> target, got;
  for (int k = 0; k < l.window; ++k) {
    target.emplace_back(px(k), py(target_at(l.steps - l.window + k)));
    got.emplace_back(px(k), py(probe_trace[std::size_t(k)]));
  }
  doc.polyline(target, "#999999", 4);
  doc.polyline(got, "#c0392b", 1.5);
  doc.save(example::picture(opt, "long_rollout_final.svg"));
}

}  // namespace

int main(int argc, char** argv) {
  auto const opt =
      example::parse(argc, argv, "long_rollout: 10,000 steps of a driven transmission line in a few MB of snapshots");
  int const sites = opt.quick ? 256 : 4096, steps = opt.quick ? 600 : 10000;
  int const window = opt.quick ? 150 : 2000, probe = opt.quick ? 12 : 40;
  int const iterations = opt.iterations >= 0 ? opt.iterations : 12;
  line l(sites, steps, window, probe);
  // The budget: 4 MB of snapshots at the default size, 25 in --quick mode.
  ctg::checkpoint budget = opt.quick ? ctg::checkpoint{.snapshots = 25} : ctg::checkpoint{.bytes = std::size_t(4) << 20};
  std::printf("long_rollout: %d sites, %d steps (the last %d scored), %d iterations\n", sites, steps, window,
              iterations);

  // What a full tape would keep: measured on a short run, per step.
  double full_tape_mb = 0;
  {
    line probe_line(sites, 64, 1, probe);
    std::size_t full_peak = 0;
    gradient(probe_line, std::nullopt, nullptr, &full_peak);
    double const per_step = double(full_peak) / 64;
    full_tape_mb = per_step * steps / 1e6;
    std::printf("full tape: %.1f KB per step (measured over 64 steps): %.0f MB for %d steps\n", per_step / 1e3,
                full_tape_mb, steps);
  }

  double grad_error = 0;
  if (opt.quick) {
    // The checkpointed gradient against the full tape's, on one thread: the same bits.
    ctg::set_num_threads(1);
    gradient(l, std::nullopt);
    auto const full = gradients_of(l);
    ctg::rollout_info info;
    gradient(l, budget, &info);
    auto const checkpointed = gradients_of(l);
    std::size_t differ = 0;
    for (std::size_t k = 0; k < full.size(); ++k) differ += full[k] == checkpointed[k] ? 0 : 1;
    std::printf("checkpointed (%d snapshots, %lld steps recomputed) against the full tape: %zu of %zu gradient "
                "coefficients differ\n",
                info.snapshots, info.recomputed, differ, full.size());
    grad_error = differ == 0 ? 0.0 : 1.0;
    ctg::set_num_threads(0);
    // And against central differences, on the coefficients.
    l.coef.fill(0.05);
    auto const check = ctg::check_gradient(
        {.step = 1e-6},
        [&] {
          l.start();
          ctg::rollout(l.steps, [&](int t) { l.step(t); }, budget);
        },
        l.loss, l.coef);
    example::print_check(check);
    grad_error = std::max(grad_error, check.worst_relative_error);
    l.coef.fill(0.0);
  }

  // Gradient descent from rest, the step size adapted: larger while the loss
  // falls, halved (and the step undone) when it rises.
  std::vector<double> history;
  double rate = 0.5;
  std::vector<double> previous = l.coef.to_vector(), previous_grad;
  double previous_loss = 0;
  std::size_t peak = 0;
  ctg::rollout_info last;
  for (int it = 0; it < iterations; ++it) {
    example::stopwatch clock;
    ctg::rollout_info info;
    double const loss = gradient(l, budget, &info, &peak);
    last = info;
    if (it == 0) {
      std::printf("state: ");
      for (std::size_t k = 0; k < info.state.size(); ++k) std::printf("%s%s", k ? ", " : "", info.state[k].c_str());
      std::printf(" (%.1f KB); %s", double(info.state_bytes) / 1e3, info.schedule.describe().c_str());
    }
    auto g = l.coef.grad().to_vector();
    if (it > 0 && loss > previous_loss) {
      rate *= 0.5;  // back to the previous point, a shorter step along its gradient
      g = previous_grad;
      l.coef.copy_from(previous);
    } else {
      history.push_back(loss);
      previous = l.coef.to_vector();
      previous_grad = g;
      previous_loss = loss;
      rate *= 1.2;
    }
    double norm = 0;
    for (double v : g) norm += v * v;
    norm = std::sqrt(norm);
    auto c = l.coef.to_vector();
    for (std::size_t k = 0; k < c.size(); ++k) c[k] -= rate * g[k] / (norm + 1e-300);
    l.coef.copy_from(c);
    example::progress(it, loss, norm, clock.seconds());
  }
  // The last point, and the probe over the window for the picture.
  std::vector<double> trace;
  l.start();
  for (int t = 0; t < steps; ++t) {
    l.step(t);
    if (t >= steps - window) trace.push_back(std::as_const(l.theta).at(probe));
  }
  history.push_back(std::as_const(l.loss).at());
  // The budget holds the snapshots; at its peak the tape also holds the
  // final values (put back at the end of backward()) and one step's copies.
  std::printf("peak memory: fields %.2f MB; the tape's copies %.2f MB: %d snapshots of %.1f KB (%.2f MB, budget %s), "
              "the final values and one step's copies; process %.1f MB resident (the full tape: %.0f MB of copies)\n",
              double(l.field_bytes()) / 1e6, double(peak) / 1e6, last.snapshots, double(last.state_bytes) / 1e3,
              double(last.snapshots) * double(last.state_bytes) / 1e6,
              budget.bytes ? (std::to_string(*budget.bytes) + " bytes").c_str()
                           : (std::to_string(*budget.snapshots) + " snapshots").c_str(),
              resident_mb(), full_tape_mb);

  svg::write_loss_curve(example::picture(opt, "long_rollout_loss.svg"), history, "long_rollout: loss per iteration");
  picture(opt, l, trace);
  return example::finish(opt, "long_rollout", history.front(), history.back(), 4.0, grad_error);
}
