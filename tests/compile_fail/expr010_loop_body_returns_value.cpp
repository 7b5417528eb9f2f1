// CTG-EXPR-010: a loop body that returns a value, as a Python comprehension
// would, instead of storing it. The body was lowered on as if it were a
// statement: 213 lines of g++ errors from hoisting and the checks after the
// ID. Now the ID with the fix, and nothing after it. The control stores the
// value.
// expected-kernel {{twice}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<double, 1, ctg::grad> x(4), y(4);
  auto k = ctg::kernel<"twice">([](auto x, auto y) {
#if defined(CTG_CONTROL)
    return ctg::range(x.size(), [=](auto i) { return y[i] = x[i] * 2.0; });
#else
    return ctg::range(x.size(), [=](auto i) { return x[i] * 2.0; });
#endif
  });
  k(x, y);  // expected-error {{CTG-EXPR-010 a loop body must return a statement}}
  k.grad(x, y);
}
