// The tape on fields of one memory space: an in-place symplectic Euler
// rollout overwrites x and v every step; the tape saves the versions the
// adjoints need (in that space) and restores them before each adjoint. The
// gradient must be the hand-written adjoint's (symplectic.hpp).
#pragma once
#include "symplectic.hpp"

namespace backend_tests {

inline void tape_in_place_rollout(ctg::memory_space space) {
  int const n = 4096, steps = 40;
  double const stiffness = 1.3;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x", .space = space}), v({n}, {.name = "v", .space = space});
  ctg::field<double, 0, ctg::grad> k({.name = "k", .space = space}), loss({.name = "loss", .space = space});
  std::vector<double> const xs = euler_start_x(n), vs = euler_start_v(n);
  x.copy_from(xs);
  v.copy_from(vs);
  k.fill(stiffness);
  {
    ctg::tape tape(loss);
    for (int s = 0; s < steps; ++s) {
      kick(x, v, k);
      drift(x, v);
    }
    energy(x, v, loss);
    tape.backward();
  }
  euler_reference const want = euler_rollout_by_hand(xs, vs, stiffness, steps);
  check_close(x.grad().to_vector(), want.grad_x, 1e-10);
  check_close(v.grad().to_vector(), want.grad_v, 1e-10);
  // d loss / dk sums over every element and step, on the device with atomics in another order.
  double const grad_k = k.grad().to_vector()[0];
  CHECK(std::abs(grad_k - want.grad_k) <= 1e-9 * (1.0 + std::abs(want.grad_k)));
  CHECK(loss.to_vector()[0] == doctest::Approx(want.loss).epsilon(1e-12));
  // The fields hold their final forward values.
  check_close(x.to_vector(), want.x, 1e-12);
  check_close(v.to_vector(), want.v, 1e-12);
}

}  // namespace backend_tests

#define CTGRAD_TAPE_TESTS(REGISTER, space) \
  REGISTER(space, tape_in_place_rollout, "in-place symplectic Euler on a tape: the hand-written adjoint's gradient")
