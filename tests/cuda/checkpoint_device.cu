// A checkpointed rollout on device fields: the snapshots are device buffers
// (field_storage::allocate and copy_within_space of the device space), and
// backward() recomputes the steps on the device from them. The gradient must
// equal the full tape's on the device (and the host's), with at most S + 2
// states of copies alive.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <string>
#include <vector>

namespace {

constexpr double dt = 0.05;
// The adjoint of kick reads x (sin, and x^2): every step overwrites what the
// previous one's adjoint needs, so the full tape keeps one copy of x per step.
constexpr auto kick = ctg::kernel<"ckpt_kick">([](auto x, auto v, auto k) {
  return ctg::range(x.size(), [=](auto i) { return v[i] += -dt * k() * ctg::sin(x[i]) * (1.0 + x[i] * x[i]); });
});
constexpr auto drift = ctg::kernel<"ckpt_drift">([](auto x, auto v) {
  return ctg::range(x.size(), [=](auto i) { return x[i] += dt * v[i]; });
});
constexpr auto energy = ctg::kernel<"ckpt_energy">([](auto x, auto v, auto loss) {
  return ctg::range(x.size(), [=](auto i) { return loss() += x[i] * x[i] + 0.5 * v[i] * v[i]; });
});

struct result {
  std::vector<double> gx, gv, x;
  double gk = 0;
  std::size_t peak = 0, state_bytes = 0;
  long long recomputed = 0;
};

// snapshots == 0: the full tape (a plain loop).
template <class X, class K, class L>
result run(X const& x, X const& v, K const& k, L const& loss, std::vector<double> const& xs,
           std::vector<double> const& vs, int steps, int snapshots) {
  x.copy_from(xs);
  v.copy_from(vs);
  loss.fill(0.0);
  result r;
  {
    ctg::tape tape(loss);
    auto step = [&](int) {
      kick(x, v, k);
      drift(x, v);
    };
    ctg::rollout_info const* info = nullptr;
    if (snapshots == 0)
      for (int t = 0; t < steps; ++t) step(t);
    else
      info = &tape.rollout(steps, step, ctg::checkpoint{.snapshots = snapshots});
    energy(x, v, loss);
    tape.backward();
    r.peak = tape.peak_bytes_saved();
    if (info) {
      r.state_bytes = info->state_bytes;
      r.recomputed = info->recomputed;
      CHECK(info->state == std::vector<std::string>{"x", "v"});
    }
  }
  r.gx = x.grad().to_vector();
  r.gv = v.grad().to_vector();
  r.x = x.to_vector();
  r.gk = k.grad().to_vector()[0];
  return r;
}

double worst_relative(std::vector<double> const& a, std::vector<double> const& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]) / (1.0 + std::abs(b[i])));
  return worst;
}

}  // namespace

TEST_CASE("a checkpointed rollout on device fields: the full tape's gradient, snapshots on the device") {
  int const n = 4096, steps = 40;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), v({n}, {.name = "v"});
  ctg::field<double, 0, ctg::grad> k(ctg::field_options{.name = "k"}), loss(ctg::field_options{.name = "loss"});
  std::vector<double> xs(n), vs(n);
  for (int i = 0; i < n; ++i) xs[std::size_t(i)] = 0.001 * i - 1.0, vs[std::size_t(i)] = 0.01 * (i % 5);
  k.fill(1.3);
  auto dx = x.clone(ctg::device), dv = v.clone(ctg::device);
  auto dk = k.clone(ctg::device), dloss = loss.clone(ctg::device);

  result const host_full = run(x, v, k, loss, xs, vs, steps, 0);
  result const full = run(dx, dv, dk, dloss, xs, vs, steps, 0);
  std::size_t const state_bytes = 2 * n * sizeof(double);
  for (int s : {1, 3, 7}) {
    CAPTURE(s);
    result const ck = run(dx, dv, dk, dloss, xs, vs, steps, s);
    // Each element's adjoint is the same sequence of operations in both
    // runs: the same bits. d loss / dk sums over threads with atomics, in an
    // order that changes from run to run.
    CHECK(ck.gx == full.gx);
    CHECK(ck.gv == full.gv);
    CHECK(ck.x == full.x);  // the fields end with their final forward values
    CHECK(std::abs(ck.gk - full.gk) <= 1e-12 * std::abs(full.gk));
    CHECK(ck.state_bytes == state_bytes);
    CHECK(ck.recomputed == ctg::checkpoint_schedule(steps, s).recomputed_steps() - (steps - 1));
    // At most S snapshots, the final values, one step's copies for its adjoints;
    // the full tape keeps a copy of x per step.
    CHECK(ck.peak <= std::size_t(s + 2) * state_bytes);
    CHECK(ck.peak < full.peak);
    // And the host's gradient, up to the device's own rounding.
    CHECK(worst_relative(ck.gx, host_full.gx) < 1e-10);
    CHECK(std::abs(ck.gk - host_full.gk) <= 1e-9 * std::abs(host_full.gk));
  }
}
