// CTG-EXPR-020: a store as a math function's operand, meaning "set y[i] and
// take the sine of it". The ID came first, but clang went on through
// lowering, the checks and the launch: 399 lines. Lowering now puts a
// marked zero where the operation stood and the launch reports it once.
// The control stores first and reads the element again.
// expected-kernel {{sine_of_copy}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<double, 1, ctg::grad> x(4), y(4), z(4);
  auto k = ctg::kernel<"sine_of_copy">([](auto x, auto y, auto z) {
    return ctg::range(x.size(), [=](auto i) {
#if defined(CTG_CONTROL)
      return ctg::block(y[i] = x[i], z[i] = 2.0 * ctg::sin(y[i]));
#else
      return z[i] = 2.0 * ctg::sin(y[i] = x[i]);
#endif
    });
  });
  k(x, y, z);  // expected-error {{CTG-EXPR-020 a statement}}
  k.grad(x, y, z);
}
