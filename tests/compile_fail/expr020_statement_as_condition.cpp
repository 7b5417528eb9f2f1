// CTG-EXPR-020: a store as an if_'s condition, meaning "set y[i] and branch
// on it", as C's `if (y = x)`. The condition's type was void: 41 lines of
// g++ errors from the evaluators, none with an ID; now one error at the
// launch. The control stores first and branches on the value read again.
// expected-kernel {{branch_on_copy}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<double, 1, ctg::grad> x(4), y(4), z(4);
  auto k = ctg::kernel<"branch_on_copy">([](auto x, auto y, auto z) {
    return ctg::range(x.size(), [=](auto i) {
#if defined(CTG_CONTROL)
      return ctg::block(y[i] = x[i], ctg::if_(y[i] > 0.0, z[i] = y[i] * y[i]));
#else
      return ctg::if_(y[i] = x[i], z[i] = y[i] * y[i]);
#endif
    });
  });
  k(x, y, z);  // expected-error {{CTG-EXPR-020 a statement}}
  k.grad(x, y, z);
}
