// README.md: the kernel at the top of the page.
#include <ctgrad/ctgrad.hpp>

#include <cmath>

#include "check.hpp"

int main() {
  // [snippet: readme]
  ctg::field<double, 1, ctg::grad> x({4}, {.name = "x"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  auto energy = ctg::kernel<"energy">([](auto x, auto loss) {
    return ctg::range(x.size(), [=](auto i) { return loss() += x[i] * x[i] + ctg::sin(x[i]); });
  });
  energy(x, loss);         // forward, on a thread pool (or the GPU, for device fields)
  loss.grad().at() = 1.0;
  energy.grad(x, loss);    // reverse mode: x.grad() = 2x + cos(x)
  // [snippet end]
  check(x.grad().at(0) == 1.0, "readme");
  return 0;
}
