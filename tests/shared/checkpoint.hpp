// A checkpointed rollout on fields of one memory space: the snapshots are
// buffers of that space (field_storage::allocate and copy_within_space), and
// backward() recomputes the steps there from them. The gradient must equal
// the full tape's bit for bit (but for sums of atomics) and the hand-written
// adjoint's (symplectic.hpp), with at most S + 2 states of copies alive.
#pragma once
#include <string>

#include "symplectic.hpp"

namespace backend_tests {

struct rollout_result {
  std::vector<double> grad_x, grad_v, x;
  double grad_k = 0;
  std::size_t peak = 0, state_bytes = 0;
  long long recomputed = 0;
};

// snapshots == 0: the full tape (a plain loop).
template <class X, class K>
rollout_result run_rollout(X const& x, X const& v, K const& k, K const& loss, std::vector<double> const& xs,
                           std::vector<double> const& vs, int steps, int snapshots) {
  x.copy_from(xs);
  v.copy_from(vs);
  loss.fill(0.0);
  rollout_result r;
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
  r.grad_x = x.grad().to_vector();
  r.grad_v = v.grad().to_vector();
  r.x = x.to_vector();
  r.grad_k = k.grad().to_vector()[0];
  return r;
}

inline void checkpointed_rollout(ctg::memory_space space) {
  int const n = 4096, steps = 40;
  double const stiffness = 1.3;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x", .space = space}), v({n}, {.name = "v", .space = space});
  ctg::field<double, 0, ctg::grad> k(ctg::field_options{.name = "k", .space = space}),
      loss(ctg::field_options{.name = "loss", .space = space});
  std::vector<double> const xs = euler_start_x(n), vs = euler_start_v(n);
  k.fill(stiffness);

  euler_reference const want = euler_rollout_by_hand(xs, vs, stiffness, steps);
  rollout_result const full = run_rollout(x, v, k, loss, xs, vs, steps, 0);
  check_close(full.grad_x, want.grad_x, 1e-10);
  check_close(full.grad_v, want.grad_v, 1e-10);
  CHECK(std::abs(full.grad_k - want.grad_k) <= 1e-9 * std::abs(want.grad_k));
  std::size_t const state_bytes = 2 * n * sizeof(double);
  for (int s : {1, 3, 7}) {
    CAPTURE(s);
    rollout_result const ck = run_rollout(x, v, k, loss, xs, vs, steps, s);
    // Each element's adjoint is the same sequence of operations in both
    // runs: the same bits. d loss / dk sums over threads, with atomics on
    // the device, in an order that changes from run to run.
    CHECK(ck.grad_x == full.grad_x);
    CHECK(ck.grad_v == full.grad_v);
    CHECK(ck.x == full.x);  // the fields end with their final forward values
    CHECK(std::abs(ck.grad_k - full.grad_k) <= 1e-12 * std::abs(full.grad_k));
    CHECK(ck.state_bytes == state_bytes);
    CHECK(ck.recomputed == ctg::checkpoint_schedule(steps, s).recomputed_steps() - (steps - 1));
    // At most S snapshots, the final values, one step's copies for its adjoints;
    // the full tape keeps a copy of x per step.
    CHECK(ck.peak <= std::size_t(s + 2) * state_bytes);
    CHECK(ck.peak < full.peak);
    // And the hand-written adjoint's gradient, up to rounding.
    check_close(ck.grad_x, want.grad_x, 1e-10);
    CHECK(std::abs(ck.grad_k - want.grad_k) <= 1e-9 * std::abs(want.grad_k));
  }
  check_close(full.x, want.x, 1e-12);
}

}  // namespace backend_tests

#define CTGRAD_CHECKPOINT_TESTS(REGISTER, space) \
  REGISTER(space, checkpointed_rollout, "a checkpointed rollout: the full tape's gradient, snapshots in its space")
