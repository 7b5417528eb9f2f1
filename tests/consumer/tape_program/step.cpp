#include "step.hpp"

namespace {
auto const euler = ctg::kernel<"euler">([](auto x, double dt) {
  return ctg::range(x.size(), [=](auto i) { return x[i] = x[i] + dt * ctg::sin(x[i]); });
});
}  // namespace

void step(ctg::field<double, 1, ctg::grad> const& x, double dt) { euler(x, dt); }
