// docs/02-autodiff.md ("In-place state and the tape") and the CTG-TAPE
// entries of docs/04-diagnostics.md: state updated in place under a tape,
// what the tape keeps, and the errors it raises. The gradients are checked
// against central differences of the same loops written in plain C++, and
// against the same rollout with its state indexed by the step.
#if defined(__GNUC__) && !defined(__clang__)
// g++ 12 at -O3 reports a false -Wrestrict in the string concatenations of
// ctg::tape::listing() (GCC bug 105329).
#  pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include <ctgrad/ctgrad.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "check.hpp"

using namespace ctg::literals;

namespace {

constexpr int masses = 8, steps = 100, cells = 16, heat_steps = 10;
constexpr double dt = 0.05;

// The pendulums of the snippets in plain C++: loss = sum x^2 after `steps`.
double pendulums(std::vector<double> const& x0, double k) {
  std::vector<double> x = x0, v(x0.size(), 0.0);
  for (int t = 0; t < steps; ++t) {
    for (std::size_t i = 0; i < x.size(); ++i) v[i] -= dt * k * std::sin(x[i]);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += dt * v[i];
  }
  double l = 0;
  for (double e : x) l += e * e;
  return l;
}

// The heat equation of the snippets in plain C++: loss = sum u^2.
double heat(std::vector<double> u, double d) {
  std::vector<double> next(u.size());
  for (int t = 0; t < heat_steps; ++t) {
    for (std::size_t i = 0; i < u.size(); ++i)
      next[i] = (i > 0 && i + 1 < u.size()) ? u[i] + d * (u[i - 1] - 2 * u[i] + u[i + 1]) : u[i];
    std::swap(u, next);
  }
  double l = 0;
  for (double e : u) l += e * e;
  return l;
}

template <class F>
double central_difference(F f, double h) {
  return (f(h) - f(-h)) / (2 * h);
}

bool mentions(ctg::error const& e, char const* what) { return std::string(e.what()).find(what) != std::string::npos; }

}  // namespace

int main() {
  std::vector<double> start(masses);
  for (int i = 0; i < masses; ++i) start[std::size_t(i)] = 0.2 + 0.3 * i;

  // [snippet: inplace]
  // Pendulums, updated in place: kick reads x, drift overwrites it.
  ctg::field<double, 1, ctg::grad> x({masses}, {.name = "x"}), v({masses}, {.name = "v"});
  ctg::field<double, 0, ctg::grad> k({.name = "k"}), loss({.name = "loss"});
  k.at() = 1.5;
  auto kick = ctg::kernel<"kick">([](auto x, auto v, auto k) {
    return ctg::range(x.size(), [=](auto i) { return v[i] -= dt * k() * ctg::sin(x[i]); });
  });
  auto drift = ctg::kernel<"drift">([](auto x, auto v) {
    return ctg::range(x.size(), [=](auto i) { return x[i] += dt * v[i]; });
  });
  auto measure = ctg::kernel<"measure">([](auto x, auto loss) {
    return ctg::range(x.size(), [=](auto i) { return loss() += x[i] * x[i]; });
  });
  auto simulate = [&] {
    x.copy_from(start);  // every rollout starts from the same state
    v.fill(0.0);
    loss.fill(0.0);
    for (int t = 0; t < steps; ++t) {
      kick(x, v, k);  // its adjoint reads x (and k): the tape notes which version
      drift(x, v);    // overwrites that version of x: the tape copies it first
    }
    measure(x, loss);
  };
  ctg::tape tape(loss);
  simulate();
  std::size_t const saved = tape.bytes_saved();  // steps * masses * sizeof(double): one copy of x per step
  tape.backward();  // before each kick's adjoint, puts back the x it read; the final x stays
  // [snippet end]
  check(saved == std::size_t(steps) * masses * sizeof(double), "one copy of x per step");
  check(tape.peak_bytes_saved() >= saved, "peak_bytes_saved covers bytes_saved");
  double const d_k = k.grad().at();
  double const fd_k = central_difference([&](double h) { return pendulums(start, 1.5 + h); }, 1e-6);
  check(close(d_k, fd_k, 1e-7), "in place: d loss / d k against central differences");
  for (int i = 0; i < masses; i += 3) {
    auto moved = [&](double h) {
      auto s = start;
      s[std::size_t(i)] += h;
      return pendulums(s, 1.5);
    };
    check(close(x.grad().at(i), central_difference(moved, 1e-6), 1e-7), "in place: d loss / d x(0)");
  }
  check(close(std::as_const(loss).at(), pendulums(start, 1.5), 1e-13), "the loss of the rollout");

  {
    // [snippet: listing]
    ctg::tape named(loss);
    for (int t = 0; t < 2; ++t) {
      auto step = named.scope("step " + std::to_string(t));  // names the launches made while it lives
      kick(x, v, k);
      drift(x, v);
    }
    std::string const text = named.listing();
    // [snippet end]
    check(text.find("#1 step 0: kernel 'kick'; adjoint reads x, k; writes v; saved 0 bytes\n") != std::string::npos,
          "listing: kick");
    check(text.find("#2 step 0: kernel 'drift'; adjoint reads nothing; writes x; saved 64 bytes\n") !=
              std::string::npos,
          "listing: drift");
    check(text.find("total saved: 128 bytes\n") != std::string::npos, "listing: total");
  }

  // [snippet: needed]
  // Only what an adjoint reads is kept. With D a constant, the adjoint of
  // diffuse multiplies by D and reads no value of u: nothing is copied. With
  // D learned, its gradient reads each step's u, which the next step
  // overwrites: one copy per step but the last.
  ctg::field<double, 1, ctg::grad> u({cells}, {.name = "u"}), w({cells}, {.name = "w"});
  ctg::field<double, 0> d_fixed({.name = "D"});
  ctg::field<double, 0, ctg::grad> d_learned({.name = "D"}), energy({.name = "energy"});
  d_fixed.fill(0.2);
  d_learned.fill(0.2);
  auto diffuse = ctg::kernel<"diffuse">([](auto now, auto next, auto d) {
    return ctg::range(now.size(), [=](auto i) {
      return ctg::if_(i > 0 && i < now.size() - 1, next[i] = now[i] + d() * (now[i - 1] - 2.0 * now[i] + now[i + 1]),
                      next[i] = now[i]);
    });
  });
  std::vector<double> profile(cells);
  for (int i = 0; i < cells; ++i) profile[std::size_t(i)] = std::exp(-0.1 * (i - 6) * (i - 6));
  auto rollout = [&](auto const& d) {
    u.copy_from(profile);
    for (int t = 0; t < heat_steps; ++t) {
      diffuse(u, w, d);
      std::swap(u, w);  // handles: the new state is u again
    }
    energy.fill(0.0);
    measure(u, energy);
  };
  ctg::tape fixed(energy);
  rollout(d_fixed);
  std::size_t const fixed_bytes = fixed.bytes_saved();  // 0
  fixed.backward();
  ctg::tape learned(energy);
  rollout(d_learned);
  std::size_t const learned_bytes = learned.bytes_saved();  // (heat_steps - 1) * cells * sizeof(double)
  learned.backward();
  // [snippet end]
  check(fixed_bytes == 0 && fixed.bytes_saved() == 0, "a linear adjoint keeps nothing");
  check(learned_bytes == std::size_t(heat_steps - 1) * cells * sizeof(double), "one copy per step");
  double const fd_d = central_difference([&](double h) { return heat(profile, 0.2 + h); }, 1e-6);
  check(close(d_learned.grad().at(), fd_d, 1e-7), "ping-pong: d energy / d D against central differences");

  // [snippet: tape002]
  // Fails: a strict tape does not copy, and drift overwrites the x that
  // kick's adjoint reads.
  try {
    ctg::tape strict(loss, ctg::tape_options{.strict = true});
    kick(x, v, k);
    drift(x, v);
  } catch (ctg::autodiff_error const& e) {
    // CTG-TAPE-002 launch #2 (kernel 'drift') overwrites field 'x', whose current values the
    // adjoint of launch #1 (kernel 'kick') needs; the tape is strict and does not save them. ...
  }
  // Fixed: every step writes new fields, so nothing an adjoint reads is ever
  // overwritten. (The tape versions whole fields: x(t, i), one field indexed
  // by the step, is overwritten by every step, and copied whole.)
  std::vector<ctg::field<double, 1, ctg::grad>> xs, vs;
  for (int t = 0; t <= steps; ++t) {
    std::string const step = std::to_string(t);
    xs.push_back(ctg::field<double, 1, ctg::grad>({masses}, {.name = "x" + step}));
    vs.push_back(ctg::field<double, 1, ctg::grad>({masses}, {.name = "v" + step}));
  }
  auto advance = ctg::kernel<"advance">([](auto x, auto v, auto k, auto next_x, auto next_v) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(v[i] - dt * k() * ctg::sin(x[i]), [=](auto new_v) {
        return ctg::block(next_v[i] = new_v, next_x[i] = x[i] + dt * new_v);
      });
    });
  });
  xs[0].copy_from(start);
  loss.fill(0.0);
  ctg::tape strict(loss, ctg::tape_options{.strict = true});
  for (int t = 0; t < steps; ++t) advance(xs[t], vs[t], k, xs[t + 1], vs[t + 1]);
  measure(xs[steps], loss);
  strict.backward();  // strict.bytes_saved() == 0, and k.grad() as in place
  // [snippet end]
  {
    bool raised = false;
    try {
      ctg::tape refusing(loss, ctg::tape_options{.strict = true});
      kick(x, v, k);
      drift(x, v);
    } catch (ctg::autodiff_error const& e) {
      raised = mentions(e, "CTG-TAPE-002") && mentions(e, "field 'x'") && mentions(e, "launch #1 (kernel 'kick')");
    }
    check(raised, "CTG-TAPE-002 names the field and the launch that needs it");
  }
  check(strict.bytes_saved() == 0, "time-indexed state: nothing to keep");
  check(close(k.grad().at(), d_k, 1e-12), "the same gradient in place and indexed by the step");

  // [snippet: tape003]
  // Fails: a host write, between the forward pass and backward(), to values
  // an adjoint reads (measure's adjoint reads the final x).
  try {
    ctg::tape taped(loss);
    simulate();
    x.at(0) = 0.0;
    taped.backward();
  } catch (ctg::autodiff_error const& e) {
    // CTG-TAPE-003 kernel 'measure' (launch #201, parameter #0) needs field 'x' as it was when it ran,
    // but the field changed since by something the tape did not record: a host write ...
  }
  // Fixed: read, and write after backward(). A read through at() on a
  // non-const handle is not a write: the tape copies the field at the first
  // such access and compares at backward(); std::as_const skips both.
  ctg::tape reread(loss);
  simulate();
  double const first = x.at(0);                // a read, found unchanged at backward()
  double const same = std::as_const(x).at(0);  // a read, nothing to compare
  reread.backward();
  x.at(0) = 0.0;  // the tape is done with x
  // [snippet end]
  check(first == same, "two reads of one value");
  check(close(k.grad().at(), d_k, 1e-12), "reads through at() leave the gradient exact");
  {
    bool raised = false;
    try {
      ctg::tape taped(loss);
      simulate();
      x.at(0) = 0.0;
      taped.backward();
    } catch (ctg::autodiff_error const& e) {
      raised = mentions(e, "CTG-TAPE-003") && mentions(e, "kernel 'measure'") && mentions(e, "field 'x'");
    }
    check(raised, "CTG-TAPE-003 after a host write");
  }

  // [snippet: tape004]
  // A kernel that only reports (the largest speed, for a progress line): it
  // is never differentiated, so ctg::forward_only skips building and checking
  // its adjoint.
  auto fastest = ctg::kernel<"fastest", ctg::forward_only>([](auto v, auto top) {
    return ctg::range(v.size(), [=](auto i) { return ctg::atomic_max(top(), ctg::abs(v[i])); });
  });
  ctg::field<double, 0> top({.name = "top"});
  // Fails: launched on fields with gradients under a tape, where its adjoint
  // would be missing from the chain.
  try {
    ctg::tape taped(loss);
    simulate();
    fastest(v, top);
  } catch (ctg::autodiff_error const& e) {
    // CTG-TAPE-004 kernel 'fastest' is ctg::forward_only, but was launched on fields with gradients
    // under a ctg::tape: the tape would miss its adjoint. ...
  }
  // Fixed: launch it outside the tape (or drop ctg::forward_only).
  {
    ctg::tape taped(loss);
    simulate();
    taped.backward();
  }
  fastest(v, top);
  // [snippet end]
  {
    bool raised = false;
    try {
      ctg::tape taped(loss);
      fastest(v, top);
    } catch (ctg::autodiff_error const& e) {
      raised = mentions(e, "CTG-TAPE-004") && mentions(e, "'fastest'");
    }
    check(raised, "CTG-TAPE-004 under a tape");
    double largest = 0;
    for (double e : v.to_vector()) largest = std::max(largest, std::abs(e));
    check(std::as_const(top).at() == largest, "the forward-only kernel ran");
  }

  // [snippet: kgrad]
  // Without a tape, k.grad reads the fields as they are: they must be as the
  // forward launch left them.
  x.copy_from(start);
  x.zero_grad();
  loss.fill(0.0);
  measure(x, loss);
  loss.grad().fill(1.0);
  drift(x, v);  // x changes
  try {
    measure.grad(x, loss);
  } catch (ctg::autodiff_error const& e) {
    // CTG-TAPE-003 kernel 'measure': parameter #0 (field 'x', shape (8)) changed since the forward
    // launch (a launch or a host write), and the adjoint reads it. ...
  }
  loss.fill(0.0);
  measure(x, loss);       // forward again on the current x (or record both launches on a tape)
  measure.grad(x, loss);  // x.grad() == 2 x
  // [snippet end]
  {
    bool raised = false;
    drift(x, v);
    try {
      measure.grad(x, loss);
    } catch (ctg::autodiff_error const& e) {
      raised = mentions(e, "CTG-TAPE-003") && mentions(e, "field 'x'");
    }
    check(raised, "CTG-TAPE-003 from k.grad alone");
    x.zero_grad();
    loss.grad().fill(1.0);
    measure(x, loss);
    measure.grad(x, loss);
    check(close(x.grad().at(3), 2 * std::as_const(x).at(3), 1e-15), "k.grad after a fresh forward launch");
  }
  return 0;
}
