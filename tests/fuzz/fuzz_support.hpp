// The harness of the generated gradient fuzz cases (tests/fuzz/gradients.py).
// Every case is one kernel over the same launch arguments and a plain C++
// version of it written by the generator from the same tree. A case passes
// when the kernel's forward values equal the plain version's, its adjoint
// (`k.grad`) equals central differences of the plain version, its tangent
// (`k.fwd`) equals directional differences, and the adjoint gives the same
// gradient on one thread and on several.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Dense>
#include <ctgrad/ctgrad.hpp>

namespace fuzz {

// The plain program's state: what a case's plain function reads and writes.
using vec2 = Eigen::Vector2d;

struct state {
  std::vector<double> x, w, out, t;
  std::vector<vec2> p, q;  // a vector input and a vector output
  double s = 0, acc = 0;
  std::vector<int> idx;
  int n = 0, m = 0;
};

using real_field = ctg::field<double, 1, ctg::grad | ctg::dual>;
using scalar_field = ctg::field<double, 0, ctg::grad | ctg::dual>;
using vector_field = ctg::field<vec2, 1, ctg::grad | ctg::dual>;

struct fields {
  real_field x, w, out, t;
  scalar_field s, acc;
  vector_field p, q;
  ctg::field<int, 1> idx;
  int n, m;
  fields(int n_, int m_)
      : x({n_}, {.name = "x"}),
        w({m_}, {.name = "w"}),
        out({n_}, {.name = "out"}),
        t({n_}, {.name = "t"}),
        s({.name = "s"}),
        acc({.name = "acc"}),
        p({n_}, {.name = "p"}),
        q({n_}, {.name = "q"}),
        idx({n_}, {.name = "idx"}),
        n(n_),
        m(m_) {}

  // Values (not gradients or tangents) from a plain state.
  void load(state const& st) {
    x.copy_from(st.x);
    w.copy_from(st.w);
    out.copy_from(st.out);
    t.copy_from(st.t);
    s.at() = st.s;
    acc.at() = st.acc;
    p.copy_from(st.p);
    q.copy_from(st.q);
    idx.copy_from(st.idx);
  }
  void clear_companions() {
    for (real_field* f : {&x, &w, &out, &t}) f->zero_grad(), f->zero_dual();
    for (scalar_field* f : {&s, &acc}) f->zero_grad(), f->zero_dual();
    for (vector_field* f : {&p, &q}) f->zero_grad(), f->zero_dual();
  }
};

// The parameters a gradient is taken with respect to: x, w, s, p.
inline std::vector<double> parameters(state const& st) {
  std::vector<double> p = st.x;
  p.insert(p.end(), st.w.begin(), st.w.end());
  p.push_back(st.s);
  for (vec2 const& e : st.p) p.push_back(e[0]), p.push_back(e[1]);
  return p;
}
inline void set_parameters(state& st, std::vector<double> const& p) {
  std::copy(p.begin(), p.begin() + st.n, st.x.begin());
  std::copy(p.begin() + st.n, p.begin() + st.n + st.m, st.w.begin());
  std::size_t at = std::size_t(st.n + st.m);
  st.s = p[at++];
  for (vec2& e : st.p) e[0] = p[at++], e[1] = p[at++];
}

struct seeds {
  std::vector<double> out;
  std::vector<vec2> q;
  double acc;
};

template <class Plain>
double loss(Plain const& plain, state st, seeds const& sd) {
  plain(st);
  double l = sd.acc * st.acc;
  for (int i = 0; i < st.n; ++i) l += sd.out[i] * st.out[i] + sd.q[i].dot(st.q[i]);
  return l;
}

inline bool close(double got, double want, double tol) {
  if (got == want) return true;  // infinities included
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  return std::abs(got - want) <= tol * std::max(1.0, std::abs(want));
}

struct outcome {
  int failures = 0, unsmooth = 0;
  bool unbounded = false;  // values past 1e6: differences say nothing there
};

inline double largest(std::vector<double> const& v) {
  double m = 0;
  for (double e : v) m = std::max(m, std::isfinite(e) ? std::abs(e) : HUGE_VAL);
  return m;
}

inline void report(outcome& r, char const* name, std::string const& what) {
  ++r.failures;
  std::printf("FAIL %s: %s\n", name, what.c_str());
}

// Values drawn uniformly from [-1, 1].
struct draw {
  std::mt19937 rng;
  std::uniform_real_distribution<double> u{-1.0, 1.0};
  explicit draw(unsigned seed) : rng(seed) {}
  double operator()() { return u(rng); }
  void fill(std::vector<double>& v) {
    for (double& e : v) e = u(rng);
  }
  void fill(std::vector<vec2>& v) {
    for (vec2& e : v) e[0] = u(rng), e[1] = u(rng);
  }
  void fill_indices(std::vector<int>& v, int n) {
    for (int& e : v) e = int(rng() % unsigned(n));
  }
};

// The tangent along dir against the adjoint (the two must agree: seeds . J
// dir == (J^T seeds) . dir); jvp is the seeds' product with the tangents.
inline void check_tangent(outcome& r, char const* name, double jvp, std::vector<double> const& gradient,
                          std::vector<double> const& dir) {
  double vjp = 0;
  for (std::size_t q = 0; q < dir.size(); ++q) vjp += gradient[q] * dir[q];
  if (!close(jvp, vjp, 1e-8)) report(r, name, "tangent . seeds = " + std::to_string(jvp) + ", gradient . direction " + std::to_string(vjp));
}

// The parameters whose differences are taken: the first two and last two
// of each block (a field's elements: the edges are where the stencils'
// guards switch) and 40 drawn at random. The adjoint's gradients on one and
// three threads are compared everywhere.
inline std::vector<std::size_t> probed(std::size_t size, std::vector<std::pair<std::size_t, std::size_t>> const& blocks) {
  std::vector<char> take(size, 0);
  for (auto [begin, end] : blocks)
    for (std::size_t q = begin; q < end; ++q)
      if (q < begin + 2 || q + 2 >= end) take[q] = 1;
  std::mt19937 rng{static_cast<unsigned>(size)};
  for (int k = 0; k < 40; ++k) take[rng() % size] = 1;
  std::vector<std::size_t> out;
  for (std::size_t q = 0; q < size; ++q)
    if (take[q]) out.push_back(q);
  return out;
}

// The adjoint's gradient on one thread (one) and on three (three) against
// each other and against central differences of loss_at(parameters) at p.
// Where two step sizes disagree the loss is not smooth there (a select or a
// min near its switch), and the point says nothing about the gradient.
template <class Loss>
void check_gradient_at(outcome& r, char const* name, std::vector<double> const& p, std::vector<double> const& one,
                       std::vector<double> const& three, Loss const& loss_at,
                       std::vector<std::pair<std::size_t, std::size_t>> const& blocks) {
  for (std::size_t q = 0; q < p.size(); ++q)
    if (!close(three[q], one[q], 1e-9))
      report(r, name, "gradient " + std::to_string(q) + " on 3 threads " + std::to_string(three[q]) + ", on 1 " + std::to_string(one[q]));
  for (std::size_t q : probed(p.size(), blocks)) {
    auto diff = [&](double h) {
      std::vector<double> a = p, b = p;
      a[q] += h, b[q] -= h;
      return (loss_at(a) - loss_at(b)) / (2 * h);
    };
    double const d1 = diff(1e-5), d2 = diff(1e-6);
    if (!close(d1, d2, 1e-5)) {
      ++r.unsmooth;
      continue;
    }
    if (!close(one[q], d2, 2e-5))
      report(r, name, "gradient " + std::to_string(q) + " = " + std::to_string(one[q]) + ", differences " + std::to_string(d2));
  }
}

// Runs one case: forward, adjoint on 1 and 3 threads, tangent.
template <class Kernel, class Plain>
outcome check_case(char const* name, Kernel& k, Plain const& plain, unsigned seed_value) {
  draw u(seed_value);
  int const n = 4099, m = 5;  // past the pool's inline_below: the launches run on threads
  state st;
  st.n = n, st.m = m;
  st.x.resize(n), st.w.resize(m), st.out.resize(n), st.t.resize(n), st.idx.resize(n);
  st.p.resize(n), st.q.resize(n);
  u.fill(st.p), u.fill(st.q), u.fill(st.x), u.fill(st.w), u.fill(st.out), u.fill(st.t);
  u.fill_indices(st.idx, n);
  st.s = u(), st.acc = u();
  seeds sd;
  sd.out.resize(n), sd.q.resize(n);
  u.fill(sd.out), u.fill(sd.q);
  sd.acc = u();

  outcome r;
  fields f(n, m);
  auto launch_forward = [&] {
    f.load(st);
    f.clear_companions();
    k(f.x, f.w, f.s, f.idx, f.out, f.acc, f.t, f.p, f.q, n, m);
  };
  // Forward values.
  state want = st;
  plain(want);
  launch_forward();
  for (int i = 0; i < n; ++i) {
    if (!close(f.out.at(i), want.out[i], 1e-9))
      report(r, name, "out[" + std::to_string(i) + "] = " + std::to_string(f.out.at(i)) + ", plain " + std::to_string(want.out[i]));
    for (int c = 0; c < 2; ++c)
      if (!close(f.q.at(i)[c], want.q[i][c], 1e-9))
        report(r, name, "q[" + std::to_string(i) + "][" + std::to_string(c) + "] = " + std::to_string(f.q.at(i)[c]) + ", plain " + std::to_string(want.q[i][c]));
    if (!close(f.t.at(i), want.t[i], 1e-9))
      report(r, name, "t[" + std::to_string(i) + "] = " + std::to_string(f.t.at(i)) + ", plain " + std::to_string(want.t[i]));
  }
  if (!close(f.acc.at(), want.acc, 1e-9))
    report(r, name, "acc = " + std::to_string(f.acc.at()) + ", plain " + std::to_string(want.acc));
  if (r.failures) return r;
  // Past 1e6 the loss's rounding (an ulp of about 1e-7 per 1e9) swamps the
  // central differences' 1e-6 steps: not judged. The vector output counts
  // too (a cube of the index reaches 1.7e7).
  double biggest_q = 0;
  for (vec2 const& e : want.q) biggest_q = std::max({biggest_q, std::abs(e[0]), std::abs(e[1])});
  if (std::max({largest(want.out), largest(want.t), std::abs(want.acc), biggest_q}) > 1e6) {
    r.unbounded = true;
    return r;
  }

  // Adjoint, on 1 thread and on 3.
  auto seed_outputs = [&] {
    f.out.grad().copy_from(sd.out);
    f.acc.grad().at() = sd.acc;
    f.q.grad().copy_from(sd.q);
  };
  auto gradient = [&] {  // in the order of parameters()
    std::vector<double> g;
    for (int i = 0; i < n; ++i) g.push_back(f.x.grad().at(i));
    for (int j = 0; j < m; ++j) g.push_back(f.w.grad().at(j));
    g.push_back(f.s.grad().at());
    for (int i = 0; i < n; ++i) g.push_back(f.p.grad().at(i)[0]), g.push_back(f.p.grad().at(i)[1]);
    return g;
  };
  std::vector<double> grads[2];
  for (int run = 0; run < 2; ++run) {
    ctg::set_num_threads(run == 0 ? 1 : 3);
    launch_forward();
    seed_outputs();
    k.grad(f.x, f.w, f.s, f.idx, f.out, f.acc, f.t, f.p, f.q, n, m);
    grads[run] = gradient();
  }
  ctg::set_num_threads(0);
  // Value and gradient in one launch: the same values and gradients.
  {
    f.load(st);
    f.clear_companions();
    seed_outputs();
    k.value_and_grad(f.x, f.w, f.s, f.idx, f.out, f.acc, f.t, f.p, f.q, n, m);
    std::vector<double> const g = gradient();
    for (std::size_t q = 0; q < g.size(); ++q)
      if (!close(g[q], grads[0][q], 1e-9))
        report(r, name, "value_and_grad: gradient " + std::to_string(q) + " = " + std::to_string(g[q]) + ", k.grad " + std::to_string(grads[0][q]));
    for (int i = 0; i < n; ++i)
      if (!close(f.out.at(i), want.out[i], 1e-9) || !close(f.t.at(i), want.t[i], 1e-9) ||
          !close(f.q.at(i)[0], want.q[i][0], 1e-9) || !close(f.q.at(i)[1], want.q[i][1], 1e-9))
        report(r, name, "value_and_grad: values at " + std::to_string(i) + " differ from the plain ones");
    if (!close(f.acc.at(), want.acc, 1e-9)) report(r, name, "value_and_grad: acc differs from the plain one");
  }
  std::vector<double> const p = parameters(st);
  std::size_t const un = std::size_t(n), um = std::size_t(m);
  check_gradient_at(
      r, name, p, grads[0], grads[1],
      [&](std::vector<double> const& q) {
        state a = st;
        set_parameters(a, q);
        return loss(plain, a, sd);
      },
      {{0, un}, {un, un + um + 1}, {un + um + 1, p.size()}});

  // Tangent along a random direction, against the adjoint's dot product
  // (the two must agree: seeds . J d == (J^T seeds) . d).
  std::vector<double> dir(p.size());
  u.fill(dir);
  f.load(st);
  f.clear_companions();
  for (int i = 0; i < n; ++i) f.x.dual().at(i) = dir[std::size_t(i)];
  for (int j = 0; j < m; ++j) f.w.dual().at(j) = dir[std::size_t(n + j)];
  f.s.dual().at() = dir[std::size_t(n + m)];
  for (int i = 0; i < n; ++i) f.p.dual().at(i) = vec2(dir[std::size_t(n + m + 1 + 2 * i)], dir[std::size_t(n + m + 2 + 2 * i)]);
  k.fwd(f.x, f.w, f.s, f.idx, f.out, f.acc, f.t, f.p, f.q, n, m);
  double jvp = sd.acc * f.acc.dual().at();
  for (int i = 0; i < n; ++i) jvp += sd.out[i] * f.out.dual().at(i) + sd.q[i].dot(f.q.dual().at(i));
  check_tangent(r, name, jvp, grads[0], dir);
  return r;
}

}  // namespace fuzz

namespace fuzz {

// How a step's launches run: the values (and a tape's records), or the
// values and the tangents (k.fwd).
inline constexpr auto run_values = [](auto const& k, auto&&... args) { k(args...); };
inline constexpr auto run_tangents = [](auto const& k, auto&&... args) { k.fwd(args...); };

// The gradient of a rollout's loss under a tape recording every step, on 1
// thread and on 3 (returned in that order), and under tape.rollout with two
// snapshots on 1 thread, which must equal the first to 1e-12. load() resets
// the state, step(t) makes step t's launches, measure() launches the loss,
// gradient() reads the parameters' gradients.
template <class Loss, class Load, class Step, class Measure, class Gradient>
std::array<std::vector<double>, 2> taped_gradients(outcome& r, char const* name, Loss& loss, int steps, Load const& load,
                                                   Step const& step, Measure const& measure,
                                                   Gradient const& gradient) {
  ctg::set_num_threads(1);
  load();
  {
    ctg::tape tape(loss);
    tape.rollout(steps, [&](int t) { step(t); }, ctg::checkpoint{.snapshots = 2});
    measure();
    tape.backward();
  }
  std::vector<double> const checkpointed = gradient();
  std::array<std::vector<double>, 2> grads;
  for (int run = 0; run < 2; ++run) {
    ctg::set_num_threads(run == 0 ? 1 : 3);
    load();
    {
      ctg::tape tape(loss);
      for (int t = 0; t < steps; ++t) step(t);
      measure();
      tape.backward();
    }
    grads[std::size_t(run)] = gradient();
  }
  ctg::set_num_threads(0);
  for (std::size_t q = 0; q < checkpointed.size(); ++q)
    if (!close(checkpointed[q], grads[0][q], 1e-12))
      report(r, name, "gradient " + std::to_string(q) + " checkpointed " + std::to_string(checkpointed[q]) + ", taped " + std::to_string(grads[0][q]));
  return grads;
}

// A rollout case: state x, v updated in place by the case's kernels over
// several steps under a tape, then a loss of the final state. Parameters:
// the initial x and v, w and s.
struct rollout_state {
  std::vector<double> x, v, w, seed;
  std::vector<double> ctrl;  // max_steps x m, row t read by step t
  double s = 0;
  std::vector<int> idx;
  int n = 0, m = 0;
  double& C(int t, int k) { return ctrl[std::size_t(t * m + k)]; }
  static constexpr int max_steps = 8;
};

struct rollout_fields {
  ctg::field<double, 1, ctg::grad | ctg::dual> x, v, w;
  ctg::field<double, 2, ctg::grad | ctg::dual> ctrl;
  ctg::field<double, 0, ctg::grad | ctg::dual> s, loss;
  ctg::field<double, 1> seed;
  ctg::field<int, 1> idx;
  int n, m;
  rollout_fields(int n_, int m_)
      : x({n_}, {.name = "x"}),
        v({n_}, {.name = "v"}),
        w({m_}, {.name = "w"}),
        ctrl({rollout_state::max_steps, m_}, {.name = "ctrl"}),
        s({.name = "s"}),
        loss({.name = "loss"}),
        seed({n_}, {.name = "seed"}),
        idx({n_}, {.name = "idx"}),
        n(n_),
        m(m_) {}
  void load(rollout_state const& st) {
    x.copy_from(st.x);
    v.copy_from(st.v);
    w.copy_from(st.w);
    ctrl.copy_from(st.ctrl);
    s.at() = st.s;
    loss.at() = 0.0;
    seed.copy_from(st.seed);
    idx.copy_from(st.idx);
    x.zero_dual(), v.zero_dual(), w.zero_dual(), ctrl.zero_dual(), s.zero_dual(), loss.zero_dual();
  }
  // The parameters' tangents, in the order of parameters().
  void set_direction(std::vector<double> const& d) {
    std::size_t at = 0;
    for (int i = 0; i < n; ++i) x.dual().at(i) = d[at++];
    for (int i = 0; i < n; ++i) v.dual().at(i) = d[at++];
    for (int j = 0; j < m; ++j) w.dual().at(j) = d[at++];
    for (int t = 0; t < rollout_state::max_steps; ++t)
      for (int j = 0; j < m; ++j) ctrl.dual().at(t, j) = d[at++];
    s.dual().at() = d[at];
  }
};

inline std::vector<double> parameters(rollout_state const& st) {
  std::vector<double> p = st.x;
  p.insert(p.end(), st.v.begin(), st.v.end());
  p.insert(p.end(), st.w.begin(), st.w.end());
  p.insert(p.end(), st.ctrl.begin(), st.ctrl.end());
  p.push_back(st.s);
  return p;
}
inline void set_parameters(rollout_state& st, std::vector<double> const& p) {
  auto at = p.begin();
  std::copy(at, at + st.n, st.x.begin());
  std::copy(at + st.n, at + 2 * st.n, st.v.begin());
  std::copy(at + 2 * st.n, at + 2 * st.n + st.m, st.w.begin());
  at += 2 * st.n + st.m;
  std::copy(at, at + std::ptrdiff_t(st.ctrl.size()), st.ctrl.begin());
  st.s = p.back();
}

// The loss of a rollout: a fixed function of the final state.
inline constexpr auto measure = ctg::kernel<"measure">([](auto x, auto v, auto seed, auto loss) {
  return ctg::range(x.size(), [=](auto i) { return loss() += seed[i] * x[i] + 0.5 * seed[i] * ctg::sin(v[i]); });
});
inline double plain_measure(rollout_state const& st) {
  double loss = 0;
  for (int i = 0; i < st.n; ++i) loss += st.seed[i] * st.x[i] + 0.5 * st.seed[i] * std::sin(st.v[i]);
  return loss;
}

// step(fields, t, run) makes step t's launches through run (run_values or
// run_tangents), plain(state) runs the whole rollout on the plain state and
// returns the loss. The gradient is taken under a tape recording every
// step, on 1 thread and on 3, and under a checkpointed rollout
// (tape.rollout, two snapshots) on 1 thread; the tangents of the same steps
// (k.fwd) along a random direction are checked against the gradient.
template <class Step, class Plain>
outcome check_rollout(char const* name, Step const& step, int steps, Plain const& plain, unsigned seed_value) {
  draw u(seed_value);
  int const n = 2311, m = 4;
  rollout_state st;
  st.n = n, st.m = m;
  st.x.resize(n), st.v.resize(n), st.w.resize(m), st.seed.resize(n), st.idx.resize(n);
  st.ctrl.resize(std::size_t(rollout_state::max_steps * m));
  u.fill(st.x), u.fill(st.v), u.fill(st.w), u.fill(st.seed), u.fill(st.ctrl);
  u.fill_indices(st.idx, n);
  st.s = u();
  outcome r;
  rollout_fields f(n, m);
  auto launch = [&] {
    for (int t = 0; t < steps; ++t) step(f, t, run_values);
    measure(f.x, f.v, f.seed, f.loss);
  };

  // Forward values.
  rollout_state want = st;
  double const want_loss = plain(want);
  f.load(st);
  launch();
  if (!close(f.loss.at(), want_loss, 1e-9))
    report(r, name, "loss = " + std::to_string(f.loss.at()) + ", plain " + std::to_string(want_loss));
  for (int i = 0; i < n; ++i) {
    if (!close(f.x.at(i), want.x[i], 1e-9)) report(r, name, "final x[" + std::to_string(i) + "] = " + std::to_string(f.x.at(i)) + ", plain " + std::to_string(want.x[i]));
    if (!close(f.v.at(i), want.v[i], 1e-9)) report(r, name, "final v[" + std::to_string(i) + "] = " + std::to_string(f.v.at(i)) + ", plain " + std::to_string(want.v[i]));
  }
  if (r.failures) return r;
  if (std::max({largest(want.x), largest(want.v), std::abs(want_loss)}) > 1e6) {
    r.unbounded = true;
    return r;
  }

  auto gradient = [&] {
    std::vector<double> g;
    for (int i = 0; i < n; ++i) g.push_back(f.x.grad().at(i));
    for (int i = 0; i < n; ++i) g.push_back(f.v.grad().at(i));
    for (int j = 0; j < m; ++j) g.push_back(f.w.grad().at(j));
    for (int t = 0; t < rollout_state::max_steps; ++t)
      for (int j = 0; j < m; ++j) g.push_back(f.ctrl.grad().at(t, j));
    g.push_back(f.s.grad().at());
    return g;
  };
  auto const grads = taped_gradients(
      r, name, f.loss, steps, [&] { f.load(st); }, [&](int t) { step(f, t, run_values); },
      [&] { measure(f.x, f.v, f.seed, f.loss); }, gradient);
  auto plain_loss = [&](std::vector<double> const& p) {
    rollout_state a = st;
    set_parameters(a, p);
    return plain(a);
  };
  std::vector<double> const p = parameters(st);
  std::size_t const un = std::size_t(n);
  check_gradient_at(r, name, p, grads[0], grads[1], plain_loss, {{0, un}, {un, 2 * un}, {2 * un, p.size()}});
  std::vector<double> dir(p.size());
  u.fill(dir);
  f.load(st);
  f.set_direction(dir);
  for (int t = 0; t < steps; ++t) step(f, t, run_tangents);
  measure.fwd(f.x, f.v, f.seed, f.loss);
  check_tangent(r, name, f.loss.dual().at(), grads[0], dir);
  return r;
}

}  // namespace fuzz

namespace fuzz {
using mat2 = Eigen::Matrix2d;
inline mat2 make_mat2(double a, double b, double c, double d) {
  mat2 m;
  m << a, b, c, d;
  return m;
}
inline double cross(vec2 const& a, vec2 const& b) { return a[0] * b[1] - a[1] * b[0]; }
}  // namespace fuzz

namespace fuzz {

// A grid case: 2-D fields g (input), u (written by a first offload, read by
// a second) and h (output), row-major ny x nx, with w, s and acc as above.
struct grid_state {
  std::vector<double> g, u, h, w;
  double s = 0, acc = 0;
  int ny = 0, nx = 0, m = 0;
  double& G(int i, int j) { return g[std::size_t(i * nx + j)]; }
  double& U(int i, int j) { return u[std::size_t(i * nx + j)]; }
  double& H(int i, int j) { return h[std::size_t(i * nx + j)]; }
};

struct grid_fields {
  ctg::field<double, 2, ctg::grad | ctg::dual> g, u, h;
  real_field w;
  scalar_field s, acc;
  grid_fields(int ny, int nx, int m)
      : g({ny, nx}, {.name = "g"}),
        u({ny, nx}, {.name = "u"}),
        h({ny, nx}, {.name = "h"}),
        w({m}, {.name = "w"}),
        s({.name = "s"}),
        acc({.name = "acc"}) {}
  void load(grid_state const& st) {
    g.copy_from(st.g);
    u.copy_from(st.u);
    h.copy_from(st.h);
    w.copy_from(st.w);
    s.at() = st.s;
    acc.at() = st.acc;
    g.zero_grad(), u.zero_grad(), h.zero_grad(), w.zero_grad(), s.zero_grad(), acc.zero_grad();
    g.zero_dual(), u.zero_dual(), h.zero_dual(), w.zero_dual(), s.zero_dual(), acc.zero_dual();
  }
};

template <class Kernel, class Plain>
outcome check_grid(char const* name, Kernel& k, Plain const& plain, unsigned seed_value) {
  draw u(seed_value);
  int const ny = 53, nx = 61, m = 5, cells = ny * nx;
  grid_state st;
  st.ny = ny, st.nx = nx, st.m = m;
  for (auto* v : {&st.g, &st.u, &st.h}) {
    v->resize(std::size_t(cells));
    u.fill(*v);
  }
  st.w.resize(m);
  u.fill(st.w);
  st.s = u(), st.acc = u();
  std::vector<double> seed_h(static_cast<std::size_t>(cells));
  u.fill(seed_h);
  double const seed_acc = u();
  auto params = [](grid_state const& a) {
    std::vector<double> p = a.g;
    p.insert(p.end(), a.w.begin(), a.w.end());
    p.push_back(a.s);
    return p;
  };
  auto loss_at = [&](std::vector<double> const& p) {
    grid_state a = st;
    std::copy(p.begin(), p.begin() + cells, a.g.begin());
    std::copy(p.begin() + cells, p.begin() + cells + m, a.w.begin());
    a.s = p.back();
    plain(a);
    double l = seed_acc * a.acc;
    for (std::size_t c = 0; c < a.h.size(); ++c) l += seed_h[c] * a.h[c];
    return l;
  };
  outcome r;
  grid_fields f(ny, nx, m);
  grid_state want = st;
  plain(want);
  f.load(st);
  k(f.g, f.u, f.h, f.w, f.s, f.acc, ny, nx, m);
  for (int i = 0; i < ny; ++i)
    for (int j = 0; j < nx; ++j) {
      if (!close(f.h.at(i, j), want.H(i, j), 1e-9))
        report(r, name, "h(" + std::to_string(i) + ", " + std::to_string(j) + ") = " + std::to_string(f.h.at(i, j)) + ", plain " + std::to_string(want.H(i, j)));
      if (!close(f.u.at(i, j), want.U(i, j), 1e-9))
        report(r, name, "u(" + std::to_string(i) + ", " + std::to_string(j) + ") = " + std::to_string(f.u.at(i, j)) + ", plain " + std::to_string(want.U(i, j)));
    }
  if (!close(f.acc.at(), want.acc, 1e-9)) report(r, name, "acc differs from the plain one");
  if (r.failures) return r;
  if (std::max({largest(want.h), largest(want.u), std::abs(want.acc)}) > 1e6) {
    r.unbounded = true;
    return r;
  }
  std::vector<double> grads[2];
  for (int run = 0; run < 2; ++run) {
    ctg::set_num_threads(run == 0 ? 1 : 3);
    f.load(st);
    k(f.g, f.u, f.h, f.w, f.s, f.acc, ny, nx, m);
    f.h.grad().copy_from(seed_h);
    f.acc.grad().at() = seed_acc;
    k.grad(f.g, f.u, f.h, f.w, f.s, f.acc, ny, nx, m);
    for (int i = 0; i < ny; ++i)
      for (int j = 0; j < nx; ++j) grads[run].push_back(f.g.grad().at(i, j));
    for (int j = 0; j < m; ++j) grads[run].push_back(f.w.grad().at(j));
    grads[run].push_back(f.s.grad().at());
  }
  ctg::set_num_threads(0);
  std::vector<double> const p = params(st);
  std::size_t const uc = std::size_t(cells);
  check_gradient_at(r, name, p, grads[0], grads[1], loss_at, {{0, std::size_t(nx)}, {uc - std::size_t(nx), uc}, {uc, p.size()}});
  // The tangent against the adjoint.
  std::vector<double> dir(p.size());
  u.fill(dir);
  f.load(st);
  for (int i = 0; i < ny; ++i)
    for (int j = 0; j < nx; ++j) f.g.dual().at(i, j) = dir[std::size_t(i * nx + j)];
  for (int j = 0; j < m; ++j) f.w.dual().at(j) = dir[std::size_t(cells + j)];
  f.s.dual().at() = dir.back();
  k.fwd(f.g, f.u, f.h, f.w, f.s, f.acc, ny, nx, m);
  double jvp = seed_acc * f.acc.dual().at();
  for (int i = 0; i < ny; ++i)
    for (int j = 0; j < nx; ++j) jvp += seed_h[std::size_t(i * nx + j)] * f.h.dual().at(i, j);
  check_tangent(r, name, jvp, grads[0], dir);
  return r;
}

}  // namespace fuzz

namespace fuzz {
// The decompositions' unique parts, written independently: the signed
// singular values (largest first, the last with the sign of det), the
// eigenvalues of the symmetric part in ascending order, and the rotation of
// the polar decomposition (the one nearest to m: angle atan2(c - b, a + d)).
inline double svd_sigma(mat2 const& m, int k) {
  Eigen::JacobiSVD<mat2> svd(m);
  double const s = svd.singularValues()[k];
  return k == 1 && m.determinant() < 0 ? -s : s;
}
inline double sym_eig_value(mat2 const& m, int k) {
  mat2 const a = 0.5 * (m + m.transpose());
  double const mean = 0.5 * (a(0, 0) + a(1, 1)), half = 0.5 * (a(0, 0) - a(1, 1));
  double const radius = std::sqrt(half * half + a(0, 1) * a(0, 1));
  return k == 0 ? mean - radius : mean + radius;
}
inline double polar_r(mat2 const& m, int r, int c) {
  double const angle = std::atan2(m(1, 0) - m(0, 1), m(0, 0) + m(1, 1));
  mat2 rot;
  rot << std::cos(angle), -std::sin(angle), std::sin(angle), std::cos(angle);
  return rot(r, c);
}
}  // namespace fuzz

namespace fuzz {
// 3x3 matrices: the same conventions, through Eigen's SVD and symmetric
// eigensolver. With m = U0 diag(s) V0^T (U0, V0 orthogonal, s >= 0
// descending), the signed SVD flips the last columns of U0 and V0 to make
// them rotations, which multiplies the last singular value by
// det(U0) det(V0) = sign(det m); the polar rotation is U V^T.
using vec3 = Eigen::Vector3d;
using mat3 = Eigen::Matrix3d;
inline mat3 make_mat3(double a, double b, double c, double d, double e, double f, double g, double h, double i) {
  mat3 m;
  m << a, b, c, d, e, f, g, h, i;
  return m;
}
inline double svd_sigma3(mat3 const& m, int k) {
  Eigen::JacobiSVD<mat3> svd(m);
  double const s = svd.singularValues()[k];
  return k == 2 && m.determinant() < 0 ? -s : s;
}
inline double sym_eig_value3(mat3 const& m, int k) {
  Eigen::SelfAdjointEigenSolver<mat3> eig(0.5 * (m + m.transpose()));
  return eig.eigenvalues()[k];
}
inline mat3 polar_rotation3(mat3 const& m) {
  Eigen::JacobiSVD<mat3> svd(m, Eigen::ComputeFullU | Eigen::ComputeFullV);
  mat3 const u = svd.matrixU(), v = svd.matrixV();
  vec3 const flip(1.0, 1.0, u.determinant() * v.determinant() < 0 ? -1.0 : 1.0);
  return u * flip.asDiagonal() * v.transpose();
}
inline double polar_r3(mat3 const& m, int r, int c) { return polar_rotation3(m)(r, c); }
inline double polar_s3(mat3 const& m, int r, int c) {
  mat3 const s = polar_rotation3(m).transpose() * m;
  return 0.5 * (s(r, c) + s(c, r));
}
}  // namespace fuzz

namespace fuzz {

// A particle case: np particles (position xp in [0.2, 0.8], velocity vp,
// 3x3 matrix F) and a grid of ng cells on the unit interval, updated in
// place step after step; the loss is a fixed function of the final state.
// Parameters: the initial xp, vp, F and w, s.
struct particle_state {
  std::vector<double> xp, vp, gv, gm, gout, w;
  std::vector<mat3> F;
  std::vector<int> idx;
  double s = 0, inv_dx = 0, dt = 0;
  int np = 0, ng = 0, n = 0, m = 0;
  // The loss's weights.
  std::vector<double> seed_x, seed_v, seed_g;
  std::vector<mat3> seed_F;
};

// Quadratic B-spline weights of the three cells around a particle whose
// offset from the first is fx (in cells, in [0.5, 1.5)).
inline auto const bspline_weights = ctg::func<"bspline_weights">([](auto fx) {
  return ctg::vec(0.5 * (1.5 - fx) * (1.5 - fx), 0.75 - (fx - 1.0) * (fx - 1.0), 0.5 * (fx - 0.5) * (fx - 0.5));
});
inline vec3 bspline(double fx) {
  return vec3(0.5 * (1.5 - fx) * (1.5 - fx), 0.75 - (fx - 1.0) * (fx - 1.0), 0.5 * (fx - 0.5) * (fx - 0.5));
}

inline constexpr auto both = ctg::grad | ctg::dual;

// What both layouts of the particles share: the grid, the parameters w and s,
// the loss and its weights.
struct grid_and_loss {
  ctg::field<double, 1, both> gv, gm, gout, w;
  ctg::field<double, 0, both> s, loss;
  ctg::field<double, 1> seed_x, seed_v, seed_g;
  ctg::field<mat3, 1> seed_F;
  ctg::field<int, 1> idx;
  int np, ng, m;
  double inv_dx, dt;
  explicit grid_and_loss(particle_state const& st)
      : gv({st.ng}, {.name = "gv"}),
        gm({st.ng}, {.name = "gm"}),
        gout({st.ng}, {.name = "gout"}),
        w({st.m}, {.name = "w"}),
        s({.name = "s"}),
        loss({.name = "loss"}),
        seed_x({st.np}, {.name = "seed_x"}),
        seed_v({st.np}, {.name = "seed_v"}),
        seed_g({st.ng}, {.name = "seed_g"}),
        seed_F({st.np}, {.name = "seed_F"}),
        idx({st.np}, {.name = "idx"}),
        np(st.np),
        ng(st.ng),
        m(st.m),
        inv_dx(st.inv_dx),
        dt(st.dt) {}
};

// The particles in fields of their own.
struct particle_fields : grid_and_loss {
  ctg::field<double, 1, both> xp, vp;
  ctg::field<mat3, 1, both> F;
  explicit particle_fields(particle_state const& st)
      : grid_and_loss(st), xp({st.np}, {.name = "xp"}), vp({st.np}, {.name = "vp"}), F({st.np}, {.name = "F"}) {}
};

// The particles in the program's own memory: an array of structs viewed
// member by member (strided fields), the gradients in a second array of
// structs given to the views.
struct particle {
  double xp, vp;
  mat3 F;
  int tag;  // a member no field views
};

struct particle_views : grid_and_loss {
  std::vector<particle> parts, grads;
  ctg::field<double, 1, both | ctg::strided> xp, vp;
  ctg::field<mat3, 1, both | ctg::strided> F;
  explicit particle_views(particle_state const& st)
      : grid_and_loss(st),
        parts(std::size_t(st.np), particle{0.0, 0.0, mat3::Zero(), 7}),
        grads(std::size_t(st.np), particle{0.0, 0.0, mat3::Zero(), 7}),
        xp(ctg::view_member<both>(parts, &particle::xp, {.name = "xp", .grad = &grads[0].xp})),
        vp(ctg::view_member<both>(parts, &particle::vp, {.name = "vp", .grad = &grads[0].vp})),
        F(ctg::view_member<both>(parts, &particle::F, {.name = "F", .grad = &grads[0].F})) {}
  particle_views(particle_views const&) = delete;
  // The views wrote the members they view and nothing else.
  bool tags_kept() const {
    for (std::size_t p = 0; p < parts.size(); ++p)
      if (parts[p].tag != 7 || grads[p].tag != 7) return false;
    return true;
  }
};

// Values (and zero tangents) from a plain state, for either layout.
template <class Fields>
void load(Fields& f, particle_state const& st) {
  f.xp.copy_from(st.xp), f.vp.copy_from(st.vp), f.F.copy_from(st.F);
  f.gv.copy_from(st.gv), f.gm.copy_from(st.gm), f.gout.copy_from(st.gout);
  f.w.copy_from(st.w);
  f.s.at() = st.s;
  f.loss.at() = 0.0;
  f.seed_x.copy_from(st.seed_x), f.seed_v.copy_from(st.seed_v), f.seed_g.copy_from(st.seed_g);
  f.seed_F.copy_from(st.seed_F);
  f.idx.copy_from(st.idx);
  f.xp.zero_dual(), f.vp.zero_dual(), f.F.zero_dual(), f.gv.zero_dual(), f.gm.zero_dual(), f.gout.zero_dual();
  f.w.zero_dual(), f.s.zero_dual(), f.loss.zero_dual();
}

// The parameters' tangents, in the order of parameters().
template <class Fields>
void set_direction(Fields& f, std::vector<double> const& d) {
  std::size_t at = 0;
  for (int p = 0; p < f.np; ++p) f.xp.dual().at(p) = d[at++];
  for (int p = 0; p < f.np; ++p) f.vp.dual().at(p) = d[at++];
  for (int p = 0; p < f.np; ++p) {
    mat3 t;
    for (int c = 0; c < 9; ++c) t.data()[c] = d[at++];
    f.F.dual().at(p) = t;
  }
  for (int j = 0; j < f.m; ++j) f.w.dual().at(j) = d[at++];
  f.s.dual().at() = d[at];
}

inline constexpr auto particle_measure = ctg::kernel<"particle_measure">(
    [](auto xp, auto vp, auto F, auto gout, auto seed_x, auto seed_v, auto seed_F, auto seed_g, auto loss) {
      return ctg::block(
          ctg::range(xp.size(), [=](auto p) {
            return loss() += seed_x[p] * xp[p] + seed_v[p] * ctg::sin(vp[p]) + ctg::trace(ctg::transpose(seed_F[p]) * F[p]);
          }),
          ctg::range(gout.size(), [=](auto i) { return loss() += seed_g[i] * gout[i]; }));
    });
inline double plain_measure(particle_state const& st) {
  double loss = 0;
  for (int p = 0; p < st.np; ++p)
    loss += st.seed_x[p] * st.xp[p] + st.seed_v[p] * std::sin(st.vp[p]) + st.seed_F[p].cwiseProduct(st.F[p]).sum();
  for (int i = 0; i < st.ng; ++i) loss += st.seed_g[i] * st.gout[i];
  return loss;
}

inline std::vector<double> parameters(particle_state const& st) {
  std::vector<double> p = st.xp;
  p.insert(p.end(), st.vp.begin(), st.vp.end());
  for (mat3 const& f : st.F) p.insert(p.end(), f.data(), f.data() + 9);
  p.insert(p.end(), st.w.begin(), st.w.end());
  p.push_back(st.s);
  return p;
}
inline void set_parameters(particle_state& st, std::vector<double> const& p) {
  auto at = p.begin();
  std::copy(at, at + st.np, st.xp.begin());
  at += st.np;
  std::copy(at, at + st.np, st.vp.begin());
  at += st.np;
  for (mat3& f : st.F) std::copy(at, at + 9, f.data()), at += 9;
  std::copy(at, at + st.m, st.w.begin());
  st.s = p.back();
}

// As check_rollout: forward values against the plain steps, the taped
// gradient on 1 and 3 threads against central differences, a checkpointed
// rollout (two snapshots) against the full tape, the tangents against the
// gradient.
template <class Fields, class Step, class Plain>
outcome check_particles(char const* name, Step const& step, int steps, Plain const& plain, unsigned seed_value) {
  draw u(seed_value);
  particle_state st;
  st.np = 2503, st.ng = 64, st.m = 5;  // past the pool's inline_below
  st.n = st.np;
  st.inv_dx = st.ng, st.dt = 0.01;
  st.xp.resize(std::size_t(st.np)), st.vp.resize(std::size_t(st.np)), st.F.resize(std::size_t(st.np));
  st.seed_x.resize(std::size_t(st.np)), st.seed_v.resize(std::size_t(st.np)), st.seed_F.resize(std::size_t(st.np));
  st.gv.resize(std::size_t(st.ng)), st.gm.resize(std::size_t(st.ng)), st.gout.resize(std::size_t(st.ng));
  st.seed_g.resize(std::size_t(st.ng)), st.w.resize(std::size_t(st.m)), st.idx.resize(std::size_t(st.np));
  for (double& x : st.xp) x = 0.5 + 0.25 * u();
  u.fill(st.vp), u.fill(st.w), u.fill(st.seed_x), u.fill(st.seed_v), u.fill(st.seed_g);
  u.fill(st.gv), u.fill(st.gm), u.fill(st.gout);
  for (mat3& f : st.F)
    for (int c = 0; c < 9; ++c) f.data()[c] = (c % 4 == 0 ? 1.0 : 0.0) + 0.2 * u();
  for (mat3& f : st.seed_F)
    for (int c = 0; c < 9; ++c) f.data()[c] = u();
  u.fill_indices(st.idx, st.np);
  st.s = u();
  outcome r;
  Fields f(st);
  auto launch = [&] {
    for (int t = 0; t < steps; ++t) step(f, run_values);
    particle_measure(f.xp, f.vp, f.F, f.gout, f.seed_x, f.seed_v, f.seed_F, f.seed_g, f.loss);
  };

  particle_state want = st;
  double const want_loss = plain(want);
  load(f, st);
  launch();
  if (!close(f.loss.at(), want_loss, 1e-9))
    report(r, name, "loss = " + std::to_string(f.loss.at()) + ", plain " + std::to_string(want_loss));
  for (int p = 0; p < st.np; ++p) {
    if (!close(f.xp.at(p), want.xp[p], 1e-9)) report(r, name, "final xp[" + std::to_string(p) + "] = " + std::to_string(f.xp.at(p)) + ", plain " + std::to_string(want.xp[p]));
    if (!close(f.vp.at(p), want.vp[p], 1e-9)) report(r, name, "final vp[" + std::to_string(p) + "] = " + std::to_string(f.vp.at(p)) + ", plain " + std::to_string(want.vp[p]));
    for (int c = 0; c < 9; ++c)
      if (!close(f.F.at(p).data()[c], want.F[p].data()[c], 1e-9))
        report(r, name, "final F[" + std::to_string(p) + "] differs from the plain one");
  }
  for (int i = 0; i < st.ng; ++i)
    if (!close(f.gout.at(i), want.gout[i], 1e-9)) report(r, name, "final gout[" + std::to_string(i) + "] = " + std::to_string(f.gout.at(i)) + ", plain " + std::to_string(want.gout[i]));
  if (r.failures) return r;
  if (std::abs(want_loss) > 1e6 || largest(want.vp) > 1e6) {
    r.unbounded = true;
    return r;
  }

  auto gradient = [&] {
    std::vector<double> g;
    for (int p = 0; p < st.np; ++p) g.push_back(f.xp.grad().at(p));
    for (int p = 0; p < st.np; ++p) g.push_back(f.vp.grad().at(p));
    for (int p = 0; p < st.np; ++p) {
      mat3 const d = f.F.grad().at(p);
      g.insert(g.end(), d.data(), d.data() + 9);
    }
    for (int j = 0; j < st.m; ++j) g.push_back(f.w.grad().at(j));
    g.push_back(f.s.grad().at());
    return g;
  };
  auto const grads = taped_gradients(
      r, name, f.loss, steps, [&] { load(f, st); }, [&](int) { step(f, run_values); },
      [&] { particle_measure(f.xp, f.vp, f.F, f.gout, f.seed_x, f.seed_v, f.seed_F, f.seed_g, f.loss); }, gradient);
  std::vector<double> const p = parameters(st);
  auto plain_loss = [&](std::vector<double> const& q) {
    particle_state a = st;
    set_parameters(a, q);
    return plain(a);
  };
  std::size_t const np = std::size_t(st.np);
  check_gradient_at(r, name, p, grads[0], grads[1], plain_loss, {{0, np}, {np, 2 * np}, {2 * np, 11 * np}, {11 * np, p.size()}});
  std::vector<double> dir(p.size());
  u.fill(dir);
  load(f, st);
  set_direction(f, dir);
  for (int t = 0; t < steps; ++t) step(f, run_tangents);
  particle_measure.fwd(f.xp, f.vp, f.F, f.gout, f.seed_x, f.seed_v, f.seed_F, f.seed_g, f.loss);
  check_tangent(r, name, f.loss.dual().at(), grads[0], dir);
  if constexpr (requires { f.tags_kept(); })
    if (!f.tags_kept()) report(r, name, "a view wrote a member it does not view");
  return r;
}

}  // namespace fuzz
