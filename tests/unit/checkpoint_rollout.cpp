// Checkpointed rollouts give the gradient of the full tape: bit for bit on one
// thread, to 1e-12 on the thread pool, on rollouts built like the examples
// (a 2-D wave in three buffers picked by t % 3 with a learned speed, a spring
// robot's actuated step, an MPM step that clears and refills its grid), for
// several numbers of snapshots; and they keep at most S + 2 states.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <string>
#include <utility>
#include <vector>

#include "ad_test_support.hpp"

using namespace ctg::literals;

namespace {

using vec2 = Eigen::Vector2d;

// What a rollout leaves: every gradient, the final values and the loss, flat.
struct outcome {
  std::vector<double> values;
  std::size_t peak = 0, state_bytes = 0;
  long long recomputed = -1, planned = -1;
  int snapshots = 0;
};
template <class F>
void append(std::vector<double>& out, F const& f) {
  for (auto const& e : f.to_vector()) {
    if constexpr (std::is_arithmetic_v<std::remove_cvref_t<decltype(e)>>)
      out.push_back(e);
    else
      for (int k = 0; k < int(e.size()); ++k) out.push_back(e(k));
  }
}

// The full tape: the steps in a plain loop.
template <class Problem>
outcome run_full(Problem& p) {
  p.reset();
  outcome o;
  {
    ctg::tape tape(p.loss);
    p.before();
    for (int t = 0; t < p.steps; ++t) p.step(t);
    p.after();
    tape.backward();
    o.peak = tape.peak_bytes_saved();
  }
  p.collect(o.values);
  return o;
}
// The same steps as a rollout with S snapshots.
template <class Problem>
outcome run_rollout(Problem& p, int snapshots) {
  p.reset();
  outcome o;
  {
    ctg::tape tape(p.loss);
    p.before();
    auto const& info = tape.rollout(p.steps, [&](int t) { p.step(t); }, ctg::checkpoint{.snapshots = snapshots});
    p.after();
    o.state_bytes = info.state_bytes;
    o.snapshots = info.snapshots;
    tape.backward();
    o.recomputed = info.recomputed;
    o.planned = info.schedule.recomputed_in_backward();
    o.peak = tape.peak_bytes_saved();
  }
  p.collect(o.values);
  return o;
}

template <class Problem>
void compare_with_full_tape(Problem& p, std::vector<int> const& budgets) {
  auto check = [&](bool exact) {
    outcome const full = run_full(p);
    double scale = 0;
    for (double v : full.values) scale = std::max(scale, std::abs(v));
    for (int s : budgets) {
      CAPTURE(s);
      outcome const ck = run_rollout(p, s);
      REQUIRE(ck.values.size() == full.values.size());
      std::size_t differ = 0;
      for (std::size_t k = 0; k < full.values.size(); ++k) {
        bool const same = exact ? ck.values[k] == full.values[k]
                                : std::abs(ck.values[k] - full.values[k]) <= 1e-12 * std::max(std::abs(full.values[k]), 1e-3 * scale);
        differ += same ? 0 : 1;
      }
      CHECK(differ == 0);
      if (s < p.steps) {
        CHECK(ck.snapshots == s);
        // Every step but the last, recorded in the forward pass, runs again,
        // with the advances the schedule plans.
        CHECK(ck.recomputed == ck.planned);
        CHECK(ck.recomputed == ctg::checkpoint_schedule(p.steps, s).recomputed_steps() - (p.steps - 1));
        // S snapshots, the final values, one step's copies for its adjoints.
        CHECK(ck.state_bytes > 0);
        CHECK(ck.peak <= std::size_t(s + 2) * ck.state_bytes);
      } else {
        CHECK(ck.snapshots == 0);  // recorded as the full tape
        CHECK(ck.peak == full.peak);
      }
    }
  };
  {
    ad_test::thread_scope one(1);
    check(true);
  }
  check(false);
}

// ---- a 2-D wave (wave.cpp): three buffers whose roles rotate, picked by t % 3 ----------------------
auto const wave_start = ctg::kernel<"wave_start">([](auto prev, auto now, auto initial) {
  return ctg::each(initial, [=](auto i, auto j) {
    return ctg::block(prev(i, j) = initial(i, j), now(i, j) = initial(i, j));
  });
});
// A learned speed c multiplies the Laplacian: its gradient reads every level.
auto const wave_step = ctg::kernel<"wave_step">([](auto prev, auto now, auto next, auto c) {
  auto const n = now.shape(0_c);
  return ctg::ndrange(n, n, [=](auto i, auto j) {
    auto const laplacian = now(i + 1, j) + now(i - 1, j) + now(i, j + 1) + now(i, j - 1) - 4 * now(i, j);
    return ctg::if_(i > 0 && i < n - 1 && j > 0 && j < n - 1,
                    next(i, j) = 2 * now(i, j) - prev(i, j) + c() * laplacian, next(i, j) = 0.0);
  });
});
auto const wave_loss = ctg::kernel<"wave_loss">([](auto p, auto loss) {
  return ctg::each(p, [=](auto i, auto j) { return loss() += ctg::pow(p(i, j) - 0.1, 2.0); });
});

struct wave_problem {
  static constexpr int n = 10;
  int steps = 37;
  std::vector<ctg::field<double, 2, ctg::grad>> level;
  ctg::field<double, 2, ctg::grad> initial{{n, n}, {.name = "initial"}};
  ctg::field<double, 0, ctg::grad> c{{.name = "c"}}, loss{{.name = "loss"}};
  wave_problem() {
    for (char const* name : {"p_a", "p_b", "p_c"}) level.emplace_back(std::initializer_list<int>{n, n}, ctg::field_options{.name = name});
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) initial.at(i, j) = std::exp(-0.3 * ((i - 4) * (i - 4) + (j - 5) * (j - 5)));
  }
  void reset() {
    c.at() = 0.22;
    loss.at() = 0;
  }
  void before() { wave_start(level[0], level[1], initial); }
  // Step t: p(t + 2) from p(t + 1) and p(t).
  void step(int t) { wave_step(level[t % 3], level[(t + 1) % 3], level[(t + 2) % 3], c); }
  void after() { wave_loss(level[(steps + 1) % 3], loss); }
  void collect(std::vector<double>& out) const {
    append(out, initial.grad());
    append(out, c.grad());
    for (auto const& l : level) append(out, l);
    append(out, loss);
  }
};

// ---- a spring robot's step (mass_spring.cpp) ------------------------------------------------------
constexpr double dt = 0.004;
auto const robot_step = ctg::kernel<"robot_step">([](auto x, auto v, auto v_inc, auto act, auto a, auto b, auto rest,
                                                     auto w, int t) {
  double const phase = 10.0 * dt * t;
  return ctg::block(
      ctg::range(rest.size(), [=](auto s) { return act[s] = ctg::tanh(w(s, 0_c) * ctg::sin(phase) + w(s, 1_c) * ctg::cos(phase)); }),
      ctg::range(x.size(), [=](auto i) { return v_inc[i] = ctg::vec(0.0, 0.0); }),
      ctg::serial_range(rest.size(), [=](auto s) {
        return ctg::let(x[a[s]] - x[b[s]], [=](auto d) {
          return ctg::let(ctg::norm(d) + 1e-4, [=](auto length) {
            auto const impulse = d * (dt * 300.0 * (length - rest[s] * (1.0 + 0.2 * act[s])) / length);
            return ctg::block(v_inc[a[s]] -= impulse, v_inc[b[s]] += impulse);
          });
        });
      }),
      ctg::range(x.size(), [=](auto i) {
        return ctg::let(v[i] * 0.999 + ctg::vec(0.0, -dt * 2.0) + v_inc[i], [=](auto new_v) {
          return ctg::block(v[i] = new_v, x[i] = x[i] + dt * new_v);
        });
      }));
});
auto const robot_loss = ctg::kernel<"robot_loss">([](auto x, auto loss) {
  return ctg::range(x.size(), [=](auto i) { return loss() += x[i][0_c] * x[i][0_c] + 0.5 * x[i][1_c]; });
});

struct robot_problem {
  static constexpr int masses = 6, springs = 9;
  int steps = 40;
  ctg::field<vec2, 1, ctg::grad> x{{masses}, {.name = "x"}}, v{{masses}, {.name = "v"}},
      v_inc{{masses}, {.name = "v_inc"}};
  ctg::field<double, 1, ctg::grad> act{{springs}, {.name = "act"}};
  ctg::field<double, 2, ctg::grad> w{{springs, 2}, {.name = "w"}};
  ctg::field<int, 1> a{{springs}, {.name = "a"}}, b{{springs}, {.name = "b"}};
  ctg::field<double, 1> rest{{springs}, {.name = "rest"}};
  ctg::field<double, 0, ctg::grad> loss{{.name = "loss"}};
  std::vector<vec2> start;
  robot_problem() {
    // Two rows of three masses, springs along, across and diagonal.
    for (int i = 0; i < masses; ++i) start.emplace_back(0.1 * (i % 3), 0.1 * (i / 3));
    std::vector<int> const as{0, 1, 3, 4, 0, 1, 2, 0, 1}, bs{1, 2, 4, 5, 3, 4, 5, 4, 5};
    a.copy_from(as);
    b.copy_from(bs);
    for (int s = 0; s < springs; ++s) {
      rest.at(s) = (start[std::size_t(as[std::size_t(s)])] - start[std::size_t(bs[std::size_t(s)])]).norm();
      w.at(s, 0) = 0.3 * std::sin(1.0 + s);
      w.at(s, 1) = 0.2 * std::cos(2.0 * s);
    }
  }
  void reset() {
    x.copy_from(start);
    v.fill(vec2::Zero());
    loss.at() = 0;
  }
  void before() {}
  void step(int t) { robot_step(x, v, v_inc, act, a, b, rest, w, t); }
  void after() { robot_loss(x, loss); }
  void collect(std::vector<double>& out) const {
    append(out, x.grad());
    append(out, v.grad());
    append(out, w.grad());
    append(out, x);
    append(out, act);
    append(out, loss);
  }
};

// ---- an MPM-like step (diffmpm.cpp): one kernel clears the grid, scatters, gathers -----------------
constexpr int nodes = 9;
constexpr double h = 1.0 / (nodes - 1);
auto const mpm_step = ctg::kernel<"mpm_step">([](auto x, auto grid) {
  return ctg::block(
      ctg::range(grid.size(), [=](auto i) { return grid[i] = 0.0; }),
      ctg::range(x.size(), [=](auto p) {
        return ctg::let(ctg::cast<int>(ctg::floor(x[p] / h)), [=](auto base) {
          return ctg::let(x[p] / h - ctg::cast<double>(base), [=](auto f) {
            return ctg::block(grid[base] += (1.0 - f) * (1.0 - f), grid[base + 1] += f * f);
          });
        });
      }),
      ctg::range(x.size(), [=](auto p) {
        return ctg::let(ctg::cast<int>(ctg::floor(x[p] / h)), [=](auto base) {
          return ctg::let(x[p] / h - ctg::cast<double>(base), [=](auto f) {
            return x[p] = x[p] + 0.004 * (ctg::tanh(grid[base]) * (1.0 - f) + ctg::tanh(grid[base + 1]) * f);
          });
        });
      }));
});
auto const cube_sum = ctg::kernel<"cube_sum">([](auto x, auto loss) {
  return ctg::range(x.size(), [=](auto p) { return loss() += x[p] * x[p] * x[p]; });
});

struct mpm_problem {
  int steps = 30;
  ctg::field<double, 1, ctg::grad> x{{7}, {.name = "x"}}, grid{{nodes}, {.name = "grid"}};
  ctg::field<double, 0, ctg::grad> loss{{.name = "loss"}};
  std::vector<double> start{0.13, 0.31, 0.42, 0.47, 0.58, 0.66, 0.77};
  void reset() {
    x.copy_from(start);
    loss.at() = 0;
  }
  void before() {}
  void step(int) { mpm_step(x, grid); }
  void after() { cube_sum(x, loss); }
  void collect(std::vector<double>& out) const {
    append(out, x.grad());
    append(out, x);
    append(out, grid);
    append(out, loss);
  }
};

}  // namespace

TEST_CASE("checkpointed wave (three buffers picked by t % 3): the full tape's gradient") {
  wave_problem p;
  compare_with_full_tape(p, {1, 2, 3, 7, 36, 37});
  // The steps carry all three buffers: each is written by one step and read
  // by the next two.
  p.reset();
  ctg::tape tape(p.loss);
  p.before();
  auto const& info = tape.rollout(p.steps, [&](int t) { p.step(t); }, ctg::checkpoint{.snapshots = 4});
  p.after();
  CHECK(info.state == std::vector<std::string>{"p_a", "p_b", "p_c"});
  CHECK(info.state_bytes == 3 * 10 * 10 * sizeof(double));
  tape.backward();
}

TEST_CASE("checkpointed spring robot: the full tape's gradient") {
  robot_problem p;
  compare_with_full_tape(p, {1, 3, 7, 39, 40});
}

TEST_CASE("checkpointed MPM step: the full tape's gradient") {
  mpm_problem p;
  compare_with_full_tape(p, {1, 2, 6, 29});
}

TEST_CASE("a checkpointed rollout keeps less than the full tape, and reports its progress") {
  mpm_problem p;
  p.steps = 64;
  outcome const full = run_full(p);
  p.reset();
  std::vector<ctg::rollout_progress> seen;
  {
    ctg::tape tape(p.loss);
    auto const& info = tape.rollout(p.steps, [&](int t) { p.step(t); },
                                    ctg::checkpoint{.snapshots = 8, .progress = [&](ctg::rollout_progress const& q) {
                                                      seen.push_back(q);
                                                    }});
    p.after();
    // The steps carry the particles and the grid (written and read by every
    // step); the launch-level sets cannot tell that each step clears the grid.
    CHECK(info.state == std::vector<std::string>{"x", "grid"});
    CHECK(info.describe().find("64 steps") != std::string::npos);
    CHECK(tape.listing().find("rollout of 64 steps: state x, grid") != std::string::npos);
    tape.backward();
    CHECK(tape.peak_bytes_saved() * 4 < full.peak);
    CHECK(tape.peak_bytes_saved() <= 10 * info.state_bytes);
  }
  REQUIRE(seen.size() == 64);
  for (std::size_t k = 0; k < seen.size(); ++k) {
    CHECK(seen[k].reversed == int(k) + 1);
    CHECK(seen[k].steps == 64);
    if (k > 0) CHECK(seen[k].recomputed >= seen[k - 1].recomputed);
  }
  CHECK(seen.back().recomputed == seen.back().planned);
  CHECK(seen.back().planned == ctg::checkpoint_schedule(64, 8).recomputed_steps() - 63);
}

TEST_CASE("a byte budget sets the number of snapshots") {
  mpm_problem p;
  outcome const full = run_full(p);
  std::size_t const state = (7 + nodes) * sizeof(double);
  for (std::size_t bytes : {state, 5 * state + 3, 1000 * state}) {
    CAPTURE(bytes);
    p.reset();
    {
      ctg::tape tape(p.loss);
      auto const& info = tape.rollout(p.steps, [&](int t) { p.step(t); }, ctg::checkpoint{.bytes = bytes});
      p.after();
      if (bytes < 1000 * state) {
        CHECK(info.snapshots == int(bytes / state));
        CHECK(info.recomputed == 0);
      } else {
        // Every step fits: recorded as the full tape, the first step run twice.
        CHECK(info.snapshots == 0);
        CHECK(info.recomputed == 1);
      }
      tape.backward();
    }
    std::vector<double> values;
    p.collect(values);
    std::size_t differ = 0;
    for (std::size_t k = 0; k < values.size(); ++k)
      differ += std::abs(values[k] - full.values[k]) <= 1e-12 * (1 + std::abs(full.values[k])) ? 0 : 1;
    CHECK(differ == 0);
  }
}
