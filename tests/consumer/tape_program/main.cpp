// A program of two translation units that launch kernels: two steps in
// place (step.cpp), then loss = sum x, on a tape. With y = x + dt sin(x),
// dy/dx = 1 + dt cos(x), so d loss / d x0 is the product over both steps.
#include <cmath>
#include <cstdio>

#include "step.hpp"

namespace {
auto const total = ctg::kernel<"total">([](auto x, auto loss) {
  return ctg::range(x.size(), [=](auto i) { return loss() += x[i]; });
});
}  // namespace

int main() {
  int const n = 5;
  double const dt = 0.1;
  ctg::field<double, 1, ctg::grad> x{{n}, {.name = "x"}};
  ctg::field<double, 0, ctg::grad> loss{{}, {.name = "loss"}};
  for (int i = 0; i < n; ++i) x.at(i) = 0.3 * i;
  {
    ctg::tape tape(loss);
    step(x, dt);
    step(x, dt);
    total(x, loss);
    tape.backward();
  }
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    double const x0 = 0.3 * i, x1 = x0 + dt * std::sin(x0);
    double const expected = (1 + dt * std::cos(x0)) * (1 + dt * std::cos(x1));
    double const got = x.grad().at(i);
    if (std::abs(got - expected) > 1e-12) {
      std::printf("d loss / d x[%d] = %.15g, expected %.15g\n", i, got, expected);
      ++wrong;
    }
  }
  return wrong == 0 ? 0 : 1;
}
