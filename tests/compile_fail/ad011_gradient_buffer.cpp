// CTG-AD-011: a differentiated kernel reading a gradient buffer. The control
// passes the gradient as a field of its own.
// expected-kernel {{peek}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<float, 1, ctg::grad> x(4), y(4);
#if defined(CTG_CONTROL)
  auto k = ctg::kernel<"peek">([](auto x, auto y, auto g) { return ctg::range(4, [=](auto i) { return y[i] = x[i] * g[i]; }); });
  k(x, y, x.grad());
  k.grad(x, y, x.grad());
#else
  auto k = ctg::kernel<"peek">([](auto x, auto y) { return ctg::range(4, [=](auto i) { return y[i] = x[i] * x.grad()[i]; }); });
  k(x, y);
  k.grad(x, y);  // expected-error {{CTG-AD-011}}
#endif
}
