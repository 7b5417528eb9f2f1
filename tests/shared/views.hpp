// Views of memory the program owns, in one memory space: a strided view of
// integers (one member of an array of structs) bounds a nested loop, so the
// adstack is sized on the host from those elements (from a copy of them when
// they are in device memory). Values and gradients are the recurrence's, by
// hand.
#pragma once
#include <ctgrad/view.hpp>

#include "backend_support.hpp"

namespace backend_tests {

struct cell {
  int steps;     // iterations of the recurrence for this element
  float weight;  // beside it: what a packed copy of `steps` would read as an integer
};

inline void strided_view_bounds_nested_loop(ctg::memory_space space) {
  int const n = 1024;
  std::vector<cell> cells(n);
  for (int i = 0; i < n; ++i) cells[std::size_t(i)] = {1 + i % 9, 0.5f + 0.001f * float(i)};
  owned_array<cell> memory(space, cells);
  auto steps = ctg::strided_view(&memory.data()->steps, {n}, {std::int64_t(sizeof(cell))},
                                 {.name = "steps", .space = space});
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x", .space = space}), y({n}, {.name = "y", .space = space});
  std::vector<double> xs(n);
  for (int i = 0; i < n; ++i) xs[std::size_t(i)] = 0.3 + 0.4 * std::sin(0.21 * i);
  x.copy_from(xs);
  y.grad().fill(1.0);
  auto k = ctg::kernel<"recurrence">([](auto x, auto y, auto steps) {
    return ctg::range(x.size(), [=](auto i) {
      return y[i] = ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::range(steps[i], [=](auto) { return v = ctg::sin(v) * 1.2 + 0.1; }), ctg::result(v));
      });
    });
  });
  k(x, y, steps);
  k.grad(x, y, steps);
  // By hand: v <- 1.2 sin(v) + 0.1 steps[i] times; the gradient is the
  // product over the steps of 1.2 cos(v).
  std::vector<double> want_y(n), want_grad(n);
  for (int i = 0; i < n; ++i) {
    double v = xs[std::size_t(i)], g = 1.0;
    for (int s = 0; s < cells[std::size_t(i)].steps; ++s) {
      g *= 1.2 * std::cos(v);
      v = std::sin(v) * 1.2 + 0.1;
    }
    want_y[std::size_t(i)] = v, want_grad[std::size_t(i)] = g;
  }
  check_close(y.to_vector(), want_y, 1e-12);
  check_close(x.grad().to_vector(), want_grad, 1e-12);
  // The view read the integers in place, and left them as they were.
  std::vector<int> want_steps(n);
  for (int i = 0; i < n; ++i) want_steps[std::size_t(i)] = cells[std::size_t(i)].steps;
  CHECK(steps.to_vector() == want_steps);
}

}  // namespace backend_tests

#define CTGRAD_VIEW_TESTS(REGISTER, space) \
  REGISTER(space, strided_view_bounds_nested_loop, "a strided view of integers bounds a nested loop: adstack sizing")
