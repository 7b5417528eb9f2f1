// docs/02-autodiff.md: reverse mode, forward mode, the tape, the adstack and
// gradient checks, each verified against a closed form.
#include <ctgrad/ctgrad.hpp>

#include <cmath>
#include <vector>

#include "check.hpp"

// [snippet: custom]
// A functor with a hand-written derivative: forward(x), backward(x, g)
// returning the adjoint of x, and (for k.fwd) tangent(x, dx). It is stored in
// the kernel's IR: trivially copyable, members CTG_HOST_DEVICE for the GPU.
struct safe_norm {
  double eps;
  template <class T>
  CTG_HOST_DEVICE T forward(T x) const {
    using std::sqrt;
    return sqrt(x * x + T(eps));
  }
  template <class T>
  CTG_HOST_DEVICE T backward(T x, T g) const {  // several operands: return ctg::gradients(ga, gb, ...)
    using std::sqrt;
    return g * x / sqrt(x * x + T(eps));
  }
  template <class T>
  CTG_HOST_DEVICE T tangent(T x, T dx) const {
    using std::sqrt;
    return dx * x / sqrt(x * x + T(eps));
  }
};
// [snippet end]

int main() {
  // [snippet: grad]
  ctg::field<double, 1, ctg::grad> x({3}, {.name = "x"}), y({3}, {.name = "y"});
  ctg::field<double, 0, ctg::grad> w({.name = "w"});
  x.copy_from(std::vector<double>{0.5, 1.0, 2.0});
  w.at() = 3.0;
  auto model = ctg::kernel<"model">([](auto x, auto w, auto y) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = w() * x[i] * x[i]; });
  });
  model(x, w, y);           // y = w x^2
  y.grad().fill(1.0);       // seed: the gradient of some loss with respect to y
  model.grad(x, w, y);      // x.grad() += 2 w x,  w.grad() += sum x^2,  y.grad() = 0
  // [snippet end]
  check(close(x.grad().at(2), 12.0) && close(w.grad().at(), 5.25) && y.grad().at(0) == 0.0, "grad");

  // [snippet: accumulate]
  // A store gives its gradient to the value stored and clears it; an atomic
  // += passes it on and leaves it. Inputs' gradients always accumulate.
  ctg::field<double, 0, ctg::grad> a({.name = "a"}), b({.name = "b"}), total({.name = "total"});
  a.at() = 2.0;
  auto twice = ctg::kernel<"twice">([](auto a, auto b, auto total) {
    return ctg::block(b() = 2.0 * a(), total() += b());
  });
  twice(a, b, total);
  total.grad().at() = 1.0;
  twice.grad(a, b, total);  // a.grad() == 2, b.grad() == 0 (cleared by its store), total.grad() == 1 (kept)
  twice.grad(a, b, total);  // a.grad() == 4: calling the adjoint again adds again
  // [snippet end]
  check(a.grad().at() == 4.0 && b.grad().at() == 0.0 && total.grad().at() == 1.0, "store vs accumulate");

  // [snippet: value-and-grad]
  // A training step's loss and gradient: one sweep computes both.
  ctg::field<double, 1, ctg::grad> params({4}, {.name = "params"});
  ctg::field<double, 0, ctg::grad> fit({.name = "fit"});
  params.copy_from(std::vector<double>{0.5, 1.0, 1.5, 2.0});
  auto objective = ctg::kernel<"objective">([](auto p, auto fit) {
    return ctg::range(p.size(), [=](auto i) { return fit() += (p[i] - 1.0) * (p[i] - 1.0); });
  });
  fit.at() = 0.0;
  fit.grad().at() = 1.0;                  // d fit / d fit
  objective.value_and_grad(params, fit);  // fit = sum (p - 1)^2 = 1.5,  params.grad() += 2 (p - 1)
  // [snippet end]
  check(close(fit.at(), 1.5) && close(params.grad().at(0), -1.0) && close(params.grad().at(3), 2.0), "value_and_grad");
  static_assert(decltype(objective)::fuses_value_and_gradient<decltype(params), decltype(fit)>());

  // [snippet: fwd]
  // Forward mode: tangents flow from the inputs' .dual() into the outputs'.
  ctg::field<double, 1, ctg::dual> u({3}, {.name = "u"}), v({3}, {.name = "v"});
  u.copy_from(std::vector<double>{0.0, 0.5, 1.0});
  u.dual().fill(1.0);  // the direction
  auto wave = ctg::kernel<"wave">([](auto u, auto v) {
    return ctg::range(u.size(), [=](auto i) { return v[i] = ctg::sin(u[i]) * u[i]; });
  });
  wave.fwd(u, v);  // v = sin(u) u and v.dual() = (cos(u) u + sin(u)) u.dual()
  // [snippet end]
  check(close(v.dual().at(2), std::cos(1.0) + std::sin(1.0)) && close(v.at(1), std::sin(0.5) * 0.5), "fwd");

  // [snippet: tape]
  // A time-stepped simulation: state per step, one launch per step.
  int const steps = 50;
  ctg::field<double, 1, ctg::grad> s({steps + 1}, {.name = "s"});
  ctg::field<double, 0, ctg::grad> rate({.name = "rate"}), loss({.name = "loss"});
  rate.at() = 0.1;
  auto advance = ctg::kernel<"advance">([](auto s, auto rate, int t) {
    return s[t + 1] = s[t] + rate() * ctg::cos(s[t]);
  });
  auto measure = ctg::kernel<"measure">([](auto s, auto loss, int t) { return loss() = s[t] * s[t]; });
  auto simulate = [&] {
    s.at(0) = 0.0;
    for (int t = 0; t < steps; ++t) advance(s, rate, t);
    measure(s, loss, steps);
  };
  {
    ctg::tape tape(loss);  // records the launches of kernels that touch a field with ctg::grad
    simulate();
    tape.backward();       // zeroes their gradients, seeds loss.grad() = 1, replays the adjoints in reverse
  }
  double const d_rate = rate.grad().at();  // d loss / d rate
  // [snippet end]
  double h = 1e-6, lp, lm;
  rate.at() = 0.1 + h, simulate(), lp = loss.at();
  rate.at() = 0.1 - h, simulate(), lm = loss.at();
  rate.at() = 0.1;
  check(close(d_rate, (lp - lm) / (2 * h), 1e-7), "tape");

  // [snippet: check]
  ctg::gradient_check_options options;
  options.step = 1e-6;           // relative finite-difference step
  options.samples_per_field = 4;  // coefficients probed per parameter field
  auto report = ctg::check_gradient(options, simulate, loss, rate);
  // report.worst_relative_error, report.worst ("field 'rate' coefficient 0: adjoint ..., finite difference ...")
  // [snippet end]
  check(report.worst_relative_error < 1e-6 && report.checked == 1, "check_gradient");

  // [snippet: adstack]
  // A nested loop whose carried local goes through a nonlinear operation: the
  // reverse pass needs every iteration's value, kept on the adstack (sized at
  // launch from the loop bound, here n_iter).
  ctg::field<double, 1, ctg::grad> p({2}, {.name = "p"}), q({2}, {.name = "q"});
  p.fill(0.5);
  auto iterate = ctg::kernel<"iterate">([](auto p, auto q, int n_iter) {
    return ctg::range(p.size(), [=](auto i) {
      return ctg::let(p[i], [=](auto v) {
        return ctg::block(ctg::range(n_iter, [=](auto) { return v = ctg::sin(v); }), q[i] = v);
      });
    });
  });
  // A linear recurrence needs no stored values: ctg::no_adstack is enough.
  auto decay = ctg::kernel<"decay", ctg::no_adstack>([](auto p, auto q, int n_iter) {
    return ctg::range(p.size(), [=](auto i) {
      return ctg::let(p[i], [=](auto v) {
        return ctg::block(ctg::range(n_iter, [=](auto) { return v = 0.5 * v + 1.0; }), q[i] = v);
      });
    });
  });
  // A while_ has no bound to size from: give the most iterations per loop.
  auto grow = ctg::kernel<"grow", ctg::adstack_capacity<100>>([](auto p, auto q) {
    return ctg::range(p.size(), [=](auto i) {
      return ctg::let(p[i], [=](auto v) { return ctg::block(ctg::while_(v < 10.0, v = v * v + 1.0), q[i] = v); });
    });
  });
  // [snippet end]
  iterate(p, q, 3);
  q.grad().fill(1.0);
  iterate.grad(p, q, 3);
  double const s1 = std::sin(0.5), s2 = std::sin(s1);
  check(close(p.grad().at(0), std::cos(s2) * std::cos(s1) * std::cos(0.5)), "adstack: sin^3");
  p.zero_grad();
  decay(p, q, 4);
  q.grad().fill(1.0);
  decay.grad(p, q, 4);
  check(close(p.grad().at(1), 1.0 / 16), "no_adstack: 0.5^4");
  p.zero_grad();
  grow(p, q);  // 0.5 -> 1.25 -> 2.5625 -> 7.566 -> 58.25
  q.grad().fill(1.0);
  grow.grad(p, q);
  double const v1 = 1.25, v2 = v1 * v1 + 1, v3 = v2 * v2 + 1;
  check(close(p.grad().at(0), 2 * v3 * 2 * v2 * 2 * v1 * 2 * 0.5), "adstack_capacity: while_");

  // [snippet: stop-grad]
  // stop_grad(e): the value of e, through which no gradient flows.
  auto damped = ctg::kernel<"damped">([](auto p, auto q) {
    return ctg::range(p.size(), [=](auto i) { return q[i] = p[i] * ctg::stop_grad(p[i]); });
  });
  // [snippet end]
  p.zero_grad();
  damped(p, q);
  q.grad().fill(1.0);
  damped.grad(p, q);
  check(close(p.grad().at(0), 0.5), "stop_grad: d(p * const)/dp = p");

  // [snippet: custom-use]
  auto soft_abs = ctg::custom_gradient<"safe_norm">(safe_norm{1e-6});
  auto smooth = ctg::kernel<"smooth">([=](auto p, auto q) {
    return ctg::range(p.size(), [=](auto i) { return q[i] = soft_abs(p[i] - 0.25); });
  });
  // [snippet end]
  p.zero_grad();
  smooth(p, q);
  q.grad().fill(1.0);
  smooth.grad(p, q);
  check(close(p.grad().at(0), 0.25 / std::sqrt(0.0625 + 1e-6)), "custom gradient");

  // [snippet: diagnose]
  // The gradient checks as a value, for tests: an empty report means k.grad builds.
  using vec_t = ctg::field<double, 1, ctg::grad>;
  static_assert(decltype(iterate)::diagnose<vec_t, vec_t, int>().ok());
  static_assert(!decltype(decay)::diagnose<vec_t, vec_t, int>().has(ctg::finding::nested_loop_needs_adstack));
  // [snippet end]
  return 0;
}
