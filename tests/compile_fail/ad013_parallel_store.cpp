// CTG-AD-013: every iteration of a parallel loop stores into the loss, which
// keeps the last square only. The control adds the squares up instead.
// expected-kernel {{last_square}}
// expected-parameter {{1}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<double, 1, ctg::grad> x(4);
  ctg::field<double, 0, ctg::grad> loss;
  auto k = ctg::kernel<"last_square">([](auto x, auto loss) {
#if defined(CTG_CONTROL)
    return ctg::range(4, [=](auto i) { return loss() += x[i] * x[i]; });
#else
    return ctg::range(4, [=](auto i) { return loss() = x[i] * x[i]; });
#endif
  });
  k(x, loss);
  k.grad(x, loss);  // expected-error {{CTG-AD-013}}
}
