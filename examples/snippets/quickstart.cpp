// A first differentiable kernel (docs/00-quickstart.md shows this whole file).
#include <ctgrad/ctgrad.hpp>

#include <cmath>
#include <cstdio>

int main() {
  // Fields: the element type, the rank and whether there is a gradient
  // buffer are part of the type; the shape is given at run time.
  ctg::field<double, 1, ctg::grad> x({4}, {.name = "x"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  for (int i = 0; i < 4; ++i) x.at(i) = 0.5 * i;

  // A kernel is a lambda over field handles. ctg::range(n, body) is a
  // parallel loop; += on a field element is an atomic accumulation.
  auto energy = ctg::kernel<"energy">([](auto x, auto loss) {
    return ctg::range(x.size(), [=](auto i) { return loss() += x[i] * x[i] + ctg::sin(x[i]); });
  });

  energy(x, loss);         // forward: loss = sum_i x_i^2 + sin(x_i)
  loss.grad().at() = 1.0;  // seed: d loss / d loss = 1
  energy.grad(x, loss);    // reverse: x.grad() += d loss / d x
  bool ok = true;
  for (int i = 0; i < 4; ++i) {
    double const want = 2 * x.at(i) + std::cos(x.at(i));
    std::printf("x = %.2f  d loss / dx = %.6f  (2x + cos x = %.6f)\n", x.at(i), x.grad().at(i), want);
    ok = ok && std::abs(x.grad().at(i) - want) < 1e-12;
  }

  // The same through a tape (it records launches and replays their adjoints),
  // and the adjoint compared with central finite differences.
  auto forward = [&] {
    loss.at() = 0.0;
    energy(x, loss);
  };
  ctg::gradient_check_result const report = ctg::check_gradient(forward, loss, x);
  std::printf("check_gradient: worst relative error %.1e over %d coefficients\n", report.worst_relative_error,
              report.checked);
  return ok && report.worst_relative_error < 1e-6 ? 0 : 1;
}
