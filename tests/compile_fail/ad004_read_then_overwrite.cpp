// D3: x() = cos(t()) * x() reads x, whose value the adjoint of the product
// needs, then overwrites it. The control writes the result to another field.
// expected-kernel {{rotate}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<float, 0, ctg::grad> x, t, y;
  auto k = ctg::kernel<"rotate">([](auto x, auto t, auto y) {
#if defined(CTG_CONTROL)
    return y() = ctg::cos(t()) * x();
#else
    (void)y;
    return x() = ctg::cos(t()) * x();
#endif
  });
  k(x, t, y);
  k.grad(x, t, y);  // expected-error {{CTG-AD-004}}
}
